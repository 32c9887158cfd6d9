"""The tools the model uses on its background tasks: status, output, cancel."""

from __future__ import annotations

import json
from typing import Protocol

from steadyrun.background._model import Task
from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["TaskControls", "answer_task_tool", "task_tools"]


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


async def answer_task_tool(manager: TaskControls, name: str, task_id: str, run_id: str) -> str:
    """What the task tool ``name`` answers for ``task_id`` in run ``run_id``.

    The tools' bodies, for an engine that runs them without the ``Tool`` objects (Temporal's
    workflow answers them from its own tasks).
    """
    task = await manager.status(task_id)
    if task.run_id != run_id:  # a run sees only its own tasks
        raise LookupError(f"there is no task {task_id!r} in this run")
    if name == "task_status":
        return await manager.progress(task_id, last=10)
    if name == "task_output":
        if task.status == "completed":
            out = task.output
            return out if isinstance(out, str) else json.dumps(out, default=str)
        if task.final:
            return f"the task {task.status}: {task.error}"
        return f"the task is still {task.status}; its output is not ready"
    if name == "cancel_task":
        task = await manager.cancel(task_id)
        if task.final:
            return f"the task had already ended: {task.status}"
        return "cancellation requested; you will be told when the task has stopped"
    raise ValueError(f"{name!r} is not a task tool")


def task_tools(manager: TaskControls) -> list[Tool]:
    """``task_status``, ``task_output`` and ``cancel_task``, bound to ``manager``."""

    @tool(replayable=True, concurrency_key="")
    async def task_status(task_id: str, ctx: ToolContext) -> str:
        """Show a background task's status and its recent progress.

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        return await answer_task_tool(manager, "task_status", task_id, ctx.run_id)

    @tool(replayable=True, concurrency_key="")
    async def task_output(task_id: str, ctx: ToolContext) -> str:
        """Read a finished background task's output (or its error).

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        return await answer_task_tool(manager, "task_output", task_id, ctx.run_id)

    @tool(side_effects=True, replayable=True, concurrency_key="")
    async def cancel_task(task_id: str, ctx: ToolContext) -> str:
        """Cancel a background task; its operation is stopped.

        Args:
            task_id: The task id from the launch receipt.
            ctx: The call's context, filled by the runtime.
        """
        return await answer_task_tool(manager, "cancel_task", task_id, ctx.run_id)

    return [task_status, task_output, cancel_task]
