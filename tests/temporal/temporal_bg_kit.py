"""A recoverable background tool over a file-based "external job", for the Temporal tests.

The job outlives the worker that started it: it is a folder entry the test finishes by writing
``<job>.done``. ``start`` and ``recover`` leave one line each in the effects file (O_APPEND), so
the test sees that the operation started once and was re-attached after the worker died.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pydantic
from temporal_kit import Deps, effect, last_results, rounds

import steadyrun as sr
from steadyrun.background import BackgroundTool, MemoryTaskStore, Operation, TaskManager, TaskRef
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.temporal import TemporalApp, TemporalOptions
from steadyrun.testing import FunctionModel, text, tool_calls


class _Job(Operation):
    def __init__(self, folder: Path, job: str) -> None:
        self.folder = folder
        self.checkpoint = {"job": job}

    async def wait(self) -> Any:
        done = self.folder / f"{self.checkpoint['job']}.done"
        while not done.exists():  # noqa: ASYNC110 - another process writes the file
            await asyncio.sleep(0.05)
        return json.loads(done.read_text())


class BuildArgs(pydantic.BaseModel):
    target: str


class Build(BackgroundTool):
    """Builds a target on an external build farm (a job that outlives workers)."""

    name = "build"
    description = "Build a target on the build farm."
    Args = BuildArgs

    def __init__(self, folder: Path, effects: Path) -> None:
        self.folder = folder
        self.effects = effects

    def job_of(self, task: TaskRef) -> str:
        return task.task_id.replace("/", "_")

    async def start(self, task: TaskRef, args: Any) -> Operation:
        job = self.job_of(task)
        effect(Deps(effects=self.effects), f"start {job} {args.target}")
        return _Job(self.folder, job)

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        line = f"recover {checkpoint['job']} attempt={task.attempt}"
        effect(Deps(effects=self.effects), line)
        return _Job(self.folder, checkpoint["job"])


class QuickBuild(Build):
    """The same build, adopted into the background after a tenth of a second."""

    foreground_timeout = 0.1


def build_model(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "system" and last.text.startswith("Background task"):
        return text("told: " + last.text)
    if rounds(request) == 0:
        return tool_calls(("build", {"target": "app"}))
    return text("built: " + last_results(request))


def build_app(
    store: Path, folder: Path, effects: Path, *, task_queue: str, adopt: bool = False
) -> TemporalApp:
    """The builder agent's app; with ``adopt`` its build goes to the background at once."""
    build = (QuickBuild if adopt else Build)(folder, effects)
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [build])
    agent = sr.Agent(name="builder", model=FunctionModel(build_model), tools=[manager.tool(build)])
    options = TemporalOptions(
        task_queue=task_queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
    )
    return TemporalApp(
        agents=[agent], store=sr.SqliteStore(store), options=options, background=[build]
    )
