"""A worker process for the background kill test: ``start`` runs a run whose two tools get
adopted, then keeps working until it is killed; ``work`` is the replacement worker.

Usage: python bg_worker.py (start|work) <folder>
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pydantic

import steadyrun as sr
from steadyrun.background import BackgroundTool, Operation, SqliteTaskStore, TaskManager, TaskRef
from steadyrun.testing import ScriptedModel, text, tool_calls


class JobArgs(pydantic.BaseModel):
    """The job's name."""

    name: str


def log_start(folder: Path, what: str) -> None:
    # O_APPEND: one whole line per start, whatever process writes it.
    fd = os.open(folder / "starts.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{what}\n".encode())
    os.close(fd)


class WatchFile(Operation):
    """Waits for the external job's result file."""

    def __init__(self, result: Path) -> None:
        self.checkpoint = {"result": str(result)}
        self.result = result

    async def wait(self) -> Any:
        # Another OS process writes the file: nothing in this process could set an event.
        while not self.result.exists():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        return self.result.read_text()


class ExternalJob(BackgroundTool):
    """A job run by a separate OS process, which outlives the worker (recoverable)."""

    name = "external_job"
    description = "Run a job outside this process."
    Args = JobArgs
    foreground_timeout = 0.2

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def start(self, task: TaskRef, args: Any) -> Operation:
        safe = task.task_id.replace("/", "_")
        result = self.folder / f"{safe}.result"
        marker = self.folder / f"{safe}.started"
        if not marker.exists():  # idempotent by task id
            marker.write_text("1")
            log_start(self.folder, f"external {task.task_id}")
            go = self.folder / "go"
            script = (
                "import pathlib, time, sys\n"
                f"go = pathlib.Path({str(go)!r})\n"
                "while not go.exists(): time.sleep(0.05)\n"
                f"pathlib.Path({str(result)!r}).write_text('job {args.name} done')\n"
            )
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", script, start_new_session=True
            )
        return WatchFile(result)

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        log_start(self.folder, f"recover {task.task_id}")
        return WatchFile(Path(checkpoint["result"]))


class InProcessJob(BackgroundTool):
    """A job that lives in the worker's process: it dies with it (plain)."""

    name = "local_job"
    description = "Run a job in this process."
    Args = JobArgs
    foreground_timeout = 0.2

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def start(self, task: TaskRef, args: Any) -> Operation:
        log_start(self.folder, f"local {task.task_id}")
        return _Forever()


class _Forever(Operation):
    async def wait(self) -> Any:
        await asyncio.Event().wait()


def stores(folder: Path) -> tuple[sr.SqliteStore, SqliteTaskStore]:
    return sr.SqliteStore(folder / "runs.db"), SqliteTaskStore(folder / "tasks.db")


async def main(mode: str, folder: Path) -> None:
    runs, tasks = stores(folder)
    tools = [ExternalJob(folder), InProcessJob(folder)]
    manager = TaskManager(tasks, runs, tools, owner=mode, lease=1.0, poll=0.05)
    async with manager:
        if mode == "start":
            model = ScriptedModel(
                [
                    tool_calls(("external_job", {"name": "a"}), ("local_job", {"name": "b"})),
                    text("both started"),
                ]
            )
            agent = sr.Agent(name="ops", model=model, tools=manager.tools())
            await sr.Runtime(runs).run(agent, run_id="run", input="start both")
            (folder / "adopted").write_text("1")
        await asyncio.Event().wait()  # work until killed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
