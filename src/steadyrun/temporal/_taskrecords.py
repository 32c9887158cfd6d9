"""The background tasks of Temporal runs, recorded in the app's store when they end.

A run's workflow owns its tasks while they run (``WorkflowTasks``). When one ends, the
workflow queues its record for the ``steadyrun.record`` activity, which writes it to the
built-in engine's task tables in the app's own database (``TaskStore``: the same format,
versioned by ``TASK_FORMAT`` and the task tables' schema version, read by the same code):
``SqliteTaskStore`` tables in a ``SqliteStore``'s file, ``PostgresTaskStore`` tables in a
``PostgresStore``'s schema (through its pool), a ``MemoryTaskStore`` beside a ``MemoryStore``.
From there the load that starts a new turn gives them back to the new workflow run, and
``TemporalRuns.tasks`` and the service list them once the workflow no longer answers.

Only ended tasks are written (final and notified, so a built-in worker sharing the tables
never claims or announces them), each with its last ``RECORDED_UPDATES`` progress updates:
``task_status`` shows the last ten.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle, WorkflowQueryRejectedError
from temporalio.common import QueryRejectCondition
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._codec import from_plain, to_plain
from steadyrun.background import MemoryTaskStore, Task, TaskStore, Update
from steadyrun.background._sql import PostgresTaskStore, SqliteTaskStore, prepare_sqlite
from steadyrun.stores import MemoryStore, PostgresStore, SqliteStore, Store

__all__ = [
    "RECORDED_UPDATES",
    "in_start_order",
    "open_or_recorded",
    "record_task",
    "recorded_tasks",
    "task_op_data",
    "task_records",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")

RECORDED_UPDATES = 20
"""Progress updates recorded with a task that ended (the last ones; ``task_status`` shows ten)."""

_BY_STORE: weakref.WeakKeyDictionary[Any, TaskStore] = weakref.WeakKeyDictionary()


def task_records(store: Store | None) -> TaskStore | None:
    """The task tables in ``store``'s database (one per store object); ``None``: it has none.

    A store of another kind (your own) records no tasks: they are listed while the run's
    workflow answers, and a later turn does not find those that ended before it.
    """
    if store is None:
        return None
    try:
        known = _BY_STORE.get(store)
    except TypeError:  # not weakly referable: a store of another kind
        return None
    if known is not None:
        return known
    made: TaskStore
    if isinstance(store, SqliteStore):
        made = _SqliteShared(store)
    elif isinstance(store, PostgresStore):
        made = _PostgresShared(store)
    elif isinstance(store, MemoryStore):
        made = MemoryTaskStore()
    else:
        return None
    _BY_STORE[store] = made
    return made


def task_op_data(task: Task, updates: list[Update]) -> dict[str, Any]:
    """A ``task`` record op's data: the task and its last ``RECORDED_UPDATES`` updates."""
    kept = updates[-RECORDED_UPDATES:]
    return {"task": to_plain(task, Task), "updates": [to_plain(u, Update) for u in kept]}


async def record_task(tasks: TaskStore, data: dict[str, Any]) -> None:
    """Write a ``task`` record op (idempotent: a retried batch writes it again, unchanged)."""
    task = from_plain(data["task"], Task)
    stored = await tasks.insert(task)
    if stored != task:
        await tasks.modify(task.id, lambda _: task)
    for plain in data.get("updates", []):
        await tasks.add_update(task.id, from_plain(plain, Update))


async def recorded_tasks(
    tasks: TaskStore, run_id: str
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The run's ended tasks and their last updates, as plain data for a new workflow run."""
    ended: list[dict[str, Any]] = []
    updates: dict[str, list[dict[str, Any]]] = {}
    for task in await tasks.list_tasks(run_id):
        if not task.final:
            continue
        ended.append(to_plain(task, Task))
        kept = await tasks.updates(task.id, RECORDED_UPDATES)
        if kept:
            updates[task.id] = [to_plain(u, Update) for u in kept]
    return ended, updates


async def open_or_recorded(
    handle: WorkflowHandle[Any, Any], records: TaskStore, run_id: str
) -> list[Task] | None:
    """The open workflow's tasks, else those ``records`` holds of the run.

    Temporal rejects the query of a closed workflow (no worker replays it); ``None``: no
    workflow has this id and no task of the run was recorded.
    """
    query = handle.query("tasks", result_type=list, reject_condition=QueryRejectCondition.NOT_OPEN)
    try:
        return from_plain(await query, list[Task])
    except WorkflowQueryRejectedError:
        return in_start_order(await records.list_tasks(run_id))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return in_start_order(await records.list_tasks(run_id)) or None


def in_start_order(tasks: list[Task]) -> list[Task]:
    """``tasks`` oldest first, those one response started in the order of their calls.

    The records are written as tasks end, so the tables' own order is the order of their
    endings; the built-in engine lists a run's tasks in the order they started.
    """
    return sorted(tasks, key=_start_key)


def _start_key(task: Task) -> tuple[Any, ...]:
    # Call ids of one response share a creation time; steadyrun's own ("m3.c12") sort by
    # their numbers, a provider's by their text.
    parts = re.split(r"(\d+)", task.call_id)
    natural = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p)
    return (task.created_at is None, task.created_at or _EPOCH, natural)


class _SqliteShared(SqliteTaskStore):
    """``SqliteTaskStore`` tables on the ``SqliteStore``'s own connection (closed with it)."""

    def __init__(self, store: SqliteStore) -> None:
        self.path = store.path
        self._db = store._db
        self._prepared = False

    async def _run(self, fn: Callable[[Any], T]) -> T:
        if not self._prepared:
            await self._db.run(prepare_sqlite)
            self._prepared = True
        return await self._db.run(fn)

    async def close(self) -> None:
        """Nothing: the connection is the run store's."""


class _PostgresShared(PostgresTaskStore):
    """``PostgresTaskStore`` tables in the ``PostgresStore``'s schema, through its pool."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__("", schema=store.schema)
        self._database = store.database
        self._migrated = False

    async def _ready(self) -> Any:
        pool = await self._database.ready()
        if not self._migrated:
            async with self._lock:
                if not self._migrated:
                    async with pool.connection() as conn:
                        await self._migrate(conn)
                    self._migrated = True
        return pool

    async def close(self) -> None:
        """Nothing: the pool is the run store's."""
