"""The ``TaskStore`` port: tasks with leases, fenced writes, exactly-once answers, updates.

Every operation is written once, here, on three primitives a store implements atomically:
insert-if-absent, modify-one-task, and listing claimable ids. ``MemoryTaskStore`` (tests, one
process) lives here too; SQLite and PostgreSQL implementations are in their own modules.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.background._model import Outcome, Task, Update, check_update

__all__ = ["MemoryTaskStore", "TaskStore", "in_run_tree"]

Modify = Callable[[Task], Task | None]
"""Returns the task's new state, or ``None`` to leave it unchanged."""


class TaskStore(ABC):
    """Where background tasks live. Writes by a worker are fenced by its lease.

    A worker claims a task (``claim``), holding a lease it renews; every write of the
    operation's progress passes the worker's id and is refused once another worker took the
    task over (the lease expired), so a worker that lost its lease cannot overwrite the new
    owner's work.
    """

    # -- primitives --------------------------------------------------------------------------

    @abstractmethod
    async def insert(self, task: Task) -> Task:
        """Store a new task; when the id exists, return the stored task unchanged."""

    @abstractmethod
    async def get(self, task_id: str) -> Task | None:
        """One task, or ``None``."""

    @abstractmethod
    async def list_tasks(self, run_id: str) -> list[Task]:
        """The tasks of a run, oldest first."""

    @abstractmethod
    async def modify(self, task_id: str, fn: Modify) -> Task | None:
        """Apply ``fn`` to the stored task atomically; the task after it (``None``: unknown)."""

    @abstractmethod
    async def claimable(self, now: datetime, limit: int) -> list[str]:
        """Ids of tasks a worker may claim.

        Those are unfinished, with no live lease, and not waiting for an answer still to come.
        """

    @abstractmethod
    async def unnotified(self, limit: int) -> list[str]:
        """Ids of finished tasks whose run was not told yet."""

    @abstractmethod
    async def add_update(self, task_id: str, update: Update) -> bool:
        """Append a progress update; ``False`` when its event id was seen already."""

    @abstractmethod
    async def updates(self, task_id: str, last: int | None = None) -> list[Update]:
        """The task's updates in order (the ``last`` ones only, when given)."""

    async def close(self) -> None:  # noqa: B027 (nothing to release by default)
        """Release connections; the store is not used after this."""

    async def delete_run_tasks(self, run_id: str) -> int:
        """Delete the tasks of a run and of its sub-agent runs, with their updates.

        Returns how many tasks were deleted. ``Operations.delete`` calls it after the run is
        gone; a store of your own implements it to let runs be deleted with their tasks.

        Raises:
            UsageError: This task store cannot delete tasks.
        """
        raise UsageError(f"{type(self).__name__} cannot delete tasks: it needs delete_run_tasks")

    # -- operations --------------------------------------------------------------------------

    async def claim(
        self, owner: str, now: datetime, lease: timedelta, limit: int = 10
    ) -> list[Task]:
        """Take up to ``limit`` claimable tasks for ``owner``, each a new attempt."""
        claimed = []
        for task_id in await self.claimable(now, limit):

            def take(task: Task) -> Task | None:
                if not _claimable(task, now):
                    return None  # another worker was faster
                return replace(
                    task,
                    owner=owner,
                    lease_until=now + lease,
                    attempt=task.attempt + 1,
                    updated_at=now,
                )

            task = await self.modify(task_id, take)
            if task is not None and task.owner == owner and task.lease_until == now + lease:
                claimed.append(task)
        return claimed

    async def renew(self, task_id: str, owner: str, until: datetime) -> Task | None:
        """Extend ``owner``'s lease: the task as it stands, or ``None`` when it lost the task.

        The task comes back so the owner learns of a cancellation with the same write.
        """
        task = await self.modify(
            task_id, lambda t: replace(t, lease_until=until) if _owns(t, owner) else None
        )
        held = task is not None and _owns(task, owner) and task.lease_until == until
        return task if held else None

    async def record(
        self,
        task_id: str,
        owner: str,
        now: datetime,
        outcome: Outcome,
        *,
        needs_review: bool = False,
    ) -> bool:
        """Write an attempt's outcome if ``owner`` still holds the task (the fence)."""
        done = False

        def write(task: Task) -> Task | None:
            nonlocal done
            if not _owns(task, owner) or task.final:
                return None
            done = True
            if outcome.status == "waiting_input":
                checkpoint = task.checkpoint if outcome.checkpoint is None else outcome.checkpoint
                return replace(
                    task,
                    status="waiting_input",
                    input=outcome.input,
                    checkpoint=checkpoint,
                    owner=None,
                    lease_until=None,
                    updated_at=now,
                )
            return replace(
                task,
                status=outcome.status,
                output=outcome.output,
                error=outcome.error,
                owner=None,
                lease_until=None,
                needs_review=needs_review,
                updated_at=now,
            )

        await self.modify(task_id, write)
        return done

    async def mark_started(self, task_id: str, owner: str) -> bool:
        """Note, before the operation starts, that it is starting (so nothing starts it twice)."""
        task = await self.modify(
            task_id, lambda t: replace(t, started=True) if _owns(t, owner) else None
        )
        return task is not None and _owns(task, owner) and task.started

    async def save_checkpoint(self, task_id: str, owner: str, checkpoint: Any) -> bool:
        """Keep the operation's checkpoint (for recovery) if ``owner`` holds the task."""
        task = await self.modify(
            task_id,
            lambda t: replace(t, checkpoint=checkpoint) if _owns(t, owner) else None,
        )
        return task is not None and _owns(task, owner)

    async def release(self, task_id: str, owner: str) -> None:
        """Give a task back without an outcome (a graceful shutdown): another worker recovers it."""
        await self.modify(
            task_id, lambda t: replace(t, owner=None, lease_until=None) if _owns(t, owner) else None
        )

    async def request_cancel(self, task_id: str, now: datetime) -> Task | None:
        """Ask for a task's cancellation; an unowned waiting task is cancelled at once."""

        def cancel(task: Task) -> Task | None:
            if task.final:
                return None
            if task.status == "waiting_input" and task.owner is None:
                return replace(task, status="cancelled", error="cancelled", updated_at=now)
            return replace(task, cancel_requested=True, updated_at=now)

        return await self.modify(task_id, cancel)

    async def answer(
        self, task_id: str, wait_id: str, answer: Any, now: datetime, *, by: str | None = None
    ) -> bool:
        """Give the answer to a task's question, once; ``False`` for a repeat or a stale id.

        ``by`` names who answered (``TaskInput.answered_by``).
        """
        given = False

        def give(task: Task) -> Task | None:
            nonlocal given
            question = task.input
            if task.status != "waiting_input" or question is None or question.wait_id != wait_id:
                return None
            if question.answered:
                return None
            given = True
            answered = replace(question, answer=answer, answered=True, answered_by=by)
            return replace(task, input=answered, updated_at=now)

        if await self.modify(task_id, give) is None:
            raise UsageError(f"there is no task {task_id!r}")
        return given

    async def resumed(self, task_id: str, owner: str, now: datetime) -> bool:
        """Mark a claimed waiting task running again (its answer handed to the operation)."""
        task = await self.modify(
            task_id,
            lambda t: (
                replace(t, status="running", updated_at=now)
                if _owns(t, owner) and t.status == "waiting_input"
                else None
            ),
        )
        return task is not None and task.status == "running"

    async def mark_notified(self, task_id: str) -> bool:
        """Note that the run was told the task ended; ``False`` when it was already."""
        first = False

        def mark(task: Task) -> Task | None:
            nonlocal first
            if task.notified:
                return None
            first = True
            return replace(task, notified=True)

        await self.modify(task_id, mark)
        return first


def in_run_tree(task_run: str, run_id: str) -> bool:
    """Whether a task of ``task_run`` belongs to ``run_id`` (the run or a sub-agent run)."""
    return task_run == run_id or task_run.startswith(run_id + "/")


def _owns(task: Task, owner: str) -> bool:
    return task.owner == owner


def _claimable(task: Task, now: datetime) -> bool:
    if task.final:
        return False
    if task.owner is not None and task.lease_until is not None and task.lease_until > now:
        return False
    if task.status == "waiting_input":
        return task.input is not None and task.input.answered or task.cancel_requested
    return True


class MemoryTaskStore(TaskStore):
    """Tasks in memory, for tests and single-process use (a fake: nothing survives the process)."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self._updates: dict[str, list[Update]] = {}
        self._lock = asyncio.Lock()

    async def insert(self, task: Task) -> Task:
        """Store a new task; an existing id returns the stored task."""
        async with self._lock:
            stored = self._tasks.setdefault(task.id, replace(task))
            return replace(stored)

    async def get(self, task_id: str) -> Task | None:
        """One task, or ``None``."""
        task = self._tasks.get(task_id)
        return None if task is None else replace(task)

    async def list_tasks(self, run_id: str) -> list[Task]:
        """The tasks of a run, oldest first."""
        return [replace(t) for t in self._tasks.values() if t.run_id == run_id]

    async def modify(self, task_id: str, fn: Modify) -> Task | None:
        """Apply ``fn`` atomically."""
        async with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return None
            new = fn(replace(task))
            if new is not None:
                self._tasks[task_id] = new
                task = new
            return replace(task)

    async def claimable(self, now: datetime, limit: int) -> list[str]:
        """Ids of tasks a worker may claim."""
        return [t.id for t in self._tasks.values() if _claimable(t, now)][:limit]

    async def delete_run_tasks(self, run_id: str) -> int:
        """Delete the tasks (and updates) of a run and of its sub-agent runs."""
        async with self._lock:
            gone = [t.id for t in self._tasks.values() if in_run_tree(t.run_id, run_id)]
            for task_id in gone:
                del self._tasks[task_id]
                self._updates.pop(task_id, None)
            return len(gone)

    async def unnotified(self, limit: int) -> list[str]:
        """Ids of finished tasks whose run was not told yet."""
        return [t.id for t in self._tasks.values() if t.final and not t.notified][:limit]

    async def add_update(self, task_id: str, update: Update) -> bool:
        """Append an update unless its event id was seen."""
        check_update(update)
        async with self._lock:
            seen = self._updates.setdefault(task_id, [])
            if any(u.event_id == update.event_id for u in seen):
                return False
            seen.append(replace(update, metadata=dict(update.metadata)))
            return True

    async def updates(self, task_id: str, last: int | None = None) -> list[Update]:
        """The task's updates in order."""
        seen = self._updates.get(task_id, [])
        return [replace(u) for u in (seen[-last:] if last else seen)]
