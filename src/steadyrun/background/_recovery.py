"""Recovering background tool calls a crash interrupted, as an extension of the agent.

Without it, a background call found unsettled on resume is settled by its traits like any
call. With it (``Agent(extensions=[manager.recovery()])``), the runtime asks the task store
first: a call adopted into a task before the crash gets its launch receipt (the task runs on,
and the run is told when it ends); a call of a recoverable tool that died in its foreground
wait runs again, which re-attaches to the same operation (``start`` is idempotent by task id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from steadyrun.background._model import receipt_of, task_id_of
from steadyrun.background._store import TaskStore
from steadyrun.background._tool import BackgroundTool
from steadyrun.records import CallRecord
from steadyrun.runtime._extension import Extension, RunHandle

__all__ = ["TaskRecovery", "TaskSource"]


class TaskSource(Protocol):
    """Where recovery finds a call's task and its tool (a ``TaskManager``)."""

    @property
    def store(self) -> TaskStore:
        """Where tasks live."""
        ...

    @property
    def by_name(self) -> Mapping[str, BackgroundTool]:
        """The background tools, by name."""
        ...


class TaskRecovery(Extension):
    """Settles interrupted background calls from the task store (see the module docstring)."""

    name = "background_tasks"

    def __init__(self, manager: TaskSource) -> None:
        self.manager = manager
        self.run_id: str | None = None

    def for_run(self) -> TaskRecovery:
        """An instance for one run."""
        return TaskRecovery(self.manager)

    def attach(self, handle: RunHandle) -> None:
        """Keep the run's id: tasks are found by ``<run id>/<call id>``."""
        self.run_id = handle.run_id

    async def recover_call(self, record: CallRecord) -> CallRecord | None:
        """The receipt of the call's task, a re-run of a recoverable call, or ``None``."""
        bt = self.manager.by_name.get(record.name)
        if bt is None or self.run_id is None:
            return None
        task = await self.manager.store.get(task_id_of(self.run_id, record.id))
        if task is not None:  # adopted before the crash: the model gets its receipt
            return replace(
                record,
                rev=record.rev + 1,
                status="succeeded",
                result=receipt_of(task),
                completed_at=record.started_at,
            )
        if bt.recoverable:  # died in the foreground wait: start again, idempotently
            return replace(record, rev=record.rev + 1, status="queued", started_at=None)
        return None
