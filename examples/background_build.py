"""Background tools: a build that runs past its foreground timeout becomes a durable task.

Runs without an API key: ``python examples/background_build.py``. The model starts a build;
after 0.2 s in the foreground the same operation is adopted into a task (never started again)
and the model gets a receipt. When the build ends, the run's feed gets a notification, and the
run answers at its next turn.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pydantic

import steadyrun as sr
from steadyrun.background import (
    BackgroundTool,
    Operation,
    SqliteTaskStore,
    TaskManager,
    TaskRef,
    Update,
)
from steadyrun.testing import ScriptedModel, text, tool_calls


class BuildArgs(pydantic.BaseModel):
    """What to build."""

    repo: str


class Build(Operation):
    """A stand-in for a CI job: a real one would call the CI system's API."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.checkpoint = {"job": f"ci-{repo}"}  # what a worker needs to re-attach

    async def wait(self) -> Any:
        await asyncio.sleep(1.0)
        return {"repo": self.repo, "artifact": f"{self.repo}-1.0.tar.gz"}

    def updates(self) -> AsyncIterator[Update]:
        async def steps() -> AsyncIterator[Update]:
            for i, step in enumerate(["checkout", "compile", "test"]):
                yield Update(event_id=f"step-{i}", kind="step", data=step)
                await asyncio.sleep(0.2)

        return steps()


class BuildTool(BackgroundTool):
    """Builds a repository on the CI system."""

    name = "build_repo"
    description = "Build a repository and return its artifact."
    Args = BuildArgs
    foreground_timeout = 0.2

    async def start(self, task: TaskRef, args: Any) -> Operation:
        return Build(args.repo)

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        return Build(args.repo)  # a real tool would look the CI job up by checkpoint["job"]

    def describe(self, args: Any) -> str:
        return f"build of {args.repo}"


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        runs = sr.SqliteStore(Path(folder) / "runs.db")
        tasks = SqliteTaskStore(Path(folder) / "tasks.db")
        manager = TaskManager(tasks, runs, [BuildTool()], poll=0.05)
        model = ScriptedModel(
            [
                tool_calls(("build_repo", {"repo": "shop"})),
                text("The build is running in the background; I will tell you when it is done."),
                text("The build finished: shop-1.0.tar.gz is ready."),
            ]
        )
        agent = sr.Agent(name="ci", model=model, tools=manager.tools())
        runtime = sr.Runtime(runs)
        async with manager:
            first = await runtime.run(agent, run_id="build-1", input="Build the shop, please.")
            print("receipt:", first.call("m1.c1").result)
            print("answer:", first.text)
            await runs.wait_pending("build-1", 0, 10.0)  # a worker would wait like this
            print(await manager.progress("build-1/m1.c1"))
        second = await runtime.resume("build-1")
        note = [m.text for m in model.requests[-1].messages if m.role == "system"][-1]
        print("the model was told:", note.splitlines()[0])
        print("answer:", second.text)
        await tasks.close()
        await runs.close()


if __name__ == "__main__":
    asyncio.run(main())
