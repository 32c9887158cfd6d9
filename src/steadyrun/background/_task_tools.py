"""The tools the model uses on its background tasks: status, output, cancel."""

from __future__ import annotations

import json
from typing import Protocol

from steadyrun.background._model import Task
from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["TaskControls", "task_tools"]


class TaskControls(Protocol):
    """What the task tools do with tasks (a ``TaskManager`` does it)."""

    async def status(self, task_id: str) -> Task:
        """A task; ``UsageError`` for an unknown id."""
        ...

    async def progress(self, task_id: str, last: int = 20) -> str:
        """The task's recent updates, formatted for the model."""
        ...

    async def cancel(self, task_id: str) -> Task:
        """Ask for a task's cancellation."""
        ...


def task_tools(manager: TaskControls) -> list[Tool]:
    """``task_status``, ``task_output`` and ``cancel_task``, bound to ``manager``."""

    async def own(task_id: str, ctx: ToolContext) -> None:
        task = await manager.status(task_id)
        if task.run_id != ctx.run_id:  # a run sees only its own tasks
            raise LookupError(f"there is no task {task_id!r} in this run")

    @tool(replayable=True, concurrency_key="")
    async def task_status(task_id: str, ctx: ToolContext) -> str:
        """Show a background task's status and its recent progress.

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        await own(task_id, ctx)
        return await manager.progress(task_id, last=10)

    @tool(replayable=True, concurrency_key="")
    async def task_output(task_id: str, ctx: ToolContext) -> str:
        """Read a finished background task's output (or its error).

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        await own(task_id, ctx)
        task = await manager.status(task_id)
        if task.status == "completed":
            out = task.output
            return out if isinstance(out, str) else json.dumps(out, default=str)
        if task.final:
            return f"the task {task.status}: {task.error}"
        return f"the task is still {task.status}; its output is not ready"

    @tool(side_effects=True, replayable=True, concurrency_key="")
    async def cancel_task(task_id: str, ctx: ToolContext) -> str:
        """Cancel a background task; its operation is stopped.

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        await own(task_id, ctx)
        task = await manager.cancel(task_id)
        if task.final:
            return f"the task had already ended: {task.status}"
        return "cancellation requested; you will be told when the task has stopped"

    return [task_status, task_output, cancel_task]
