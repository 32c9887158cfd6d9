"""Background tools for tests: operations that run until told, counting their starts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pydantic

from steadyrun.background import BackgroundTool, Operation, Outcome, TaskInput, TaskRef, Update


class BuildArgs(pydantic.BaseModel):
    """Arguments of the test build."""

    repo: str
    seconds: float = 0.0


class Registry:
    """Shared state of fake operations: starts per task id, a release switch, stops."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}
        self.recovers: dict[str, int] = {}
        self.stops: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    def gate(self, task_id: str) -> asyncio.Event:
        return self.release.setdefault(task_id, asyncio.Event())


class FakeBuild(Operation):
    """Runs until its gate opens (or ``seconds`` pass), reporting updates."""

    def __init__(self, reg: Registry, task_id: str, seconds: float, repeat_updates: bool) -> None:
        self.reg = reg
        self.task_id = task_id
        self.seconds = seconds
        self.repeat_updates = repeat_updates
        self.checkpoint = {"job": f"job-{task_id}"}

    async def wait(self) -> Any:
        gate = self.reg.gate(self.task_id)
        if self.seconds:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.wait(), self.seconds)
        else:
            await gate.wait()
        return {"built": self.task_id}

    async def stop(self) -> None:
        self.reg.stops.append(self.task_id)
        self.reg.gate(self.task_id).set()

    def updates(self) -> AsyncIterator[Update] | None:
        async def gen() -> AsyncIterator[Update]:
            yield Update(event_id="e1", kind="log", data="cloning")
            if self.repeat_updates:
                yield Update(event_id="e1", kind="log", data="cloning")
            yield Update(event_id="e2", kind="log", data="compiling")

        return gen()


class Build(BackgroundTool):
    """A build that takes a while."""

    name = "build"
    description = "Build a repository."
    Args = BuildArgs
    foreground_timeout = 0.05

    def __init__(self, reg: Registry, *, adopt: bool = True) -> None:
        self.reg = reg
        self.adopt = adopt

    async def start(self, task: TaskRef, args: Any) -> Operation:
        self.reg.starts[task.task_id] = self.reg.starts.get(task.task_id, 0) + 1
        return FakeBuild(self.reg, task.task_id, args.seconds, repeat_updates=True)

    def describe(self, args: Any) -> str:
        return f"build {args.repo}"

    def should_adopt(self, view: Any) -> bool:
        return self.adopt


class RecoverableBuild(Build):
    """A build another worker can re-attach to."""

    name = "rbuild"

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        assert checkpoint == {"job": f"job-{task.task_id}"}
        self.reg.recovers[task.task_id] = self.reg.recovers.get(task.task_id, 0) + 1
        return FakeBuild(self.reg, task.task_id, args.seconds, repeat_updates=False)


class Deploy(BackgroundTool):
    """A deploy that asks for approval of its plan mid-way, then finishes."""

    name = "deploy"
    description = "Deploy a service."
    Args = BuildArgs
    foreground_timeout = 0.05

    def __init__(self, reg: Registry) -> None:
        self.reg = reg
        self.resumes: list[Any] = []

    async def start(self, task: TaskRef, args: Any) -> Operation:
        self.reg.starts[task.task_id] = self.reg.starts.get(task.task_id, 0) + 1
        return _Ask(task.task_id)

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        return _Ask(task.task_id)

    async def resume(
        self, task: TaskRef, args: Any, checkpoint: Any, wait_id: str, answer: Any
    ) -> Operation:
        self.resumes.append((wait_id, answer))
        return _Done({"deployed": answer["version"]})


class _Ask(Operation):
    def __init__(self, task_id: str) -> None:
        self.checkpoint = {"stage": "planned"}
        self.task_id = task_id

    async def wait(self) -> Any:
        await asyncio.sleep(0.2)  # past the foreground timeout: adopted first
        question = TaskInput(
            wait_id=f"{self.task_id}.approve",
            prompt="Deploy which version?",
            response_schema={
                "type": "object",
                "properties": {"version": {"type": "string"}},
                "required": ["version"],
            },
        )
        return Outcome(status="waiting_input", input=question, checkpoint={"stage": "asked"})


class _Done(Operation):
    def __init__(self, value: Any) -> None:
        self.value = value

    async def wait(self) -> Any:
        return self.value
