"""The background tasks of Temporal runs, recorded in the app's store as they go.

A run's workflow owns its tasks while they run (``WorkflowTasks``). When one is adopted,
waits for an answer, resumes or ends, the
workflow queues its record for the ``steadyrun.record`` activity, which writes it to the
built-in engine's task tables in the app's own database (``TaskStore``: the same format,
versioned by ``TASK_FORMAT`` and the task tables' schema version, read by the same code):
``SqliteTaskStore`` tables in a ``SqliteStore``'s file, ``PostgresTaskStore`` tables in a
``PostgresStore``'s schema (through its pool), a ``MemoryTaskStore`` beside a ``MemoryStore``.
From there the load that starts a new turn gives them back to the new workflow run, and
``TemporalRuns.tasks`` and the service list them once the workflow no longer answers.

A task that has not ended is written owned by its workflow (``owner`` ``temporal:<workflow
id>``, a lease that never expires), so a built-in worker sharing the tables never claims it;
an ended one is written final and notified, so none announces it either. The
``steadyrun.background`` activity writes the operation's progress updates to the tables as
it heartbeats (``store_updates``: every update, as the built-in engine keeps them, and no
workflow event for them); the record of an ended task carries its last
``RECORDED_UPDATES`` too, for the updates an activity could not write. A task still going
when its workflow went away (terminated) stays recorded as it was; the load that starts the
run's next workflow run settles it as the built-in engine settles a task lost with its
worker (``lost_verdict``: the tool's traits say).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle, WorkflowQueryRejectedError
from temporalio.common import QueryRejectCondition
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._codec import from_plain, to_plain
from steadyrun._errors import UsageError
from steadyrun.background import BackgroundTool, MemoryTaskStore, Task, TaskStore, Update
from steadyrun.background._shared import lost_verdict
from steadyrun.background._sql import PostgresTaskStore, SqliteTaskStore, prepare_sqlite
from steadyrun.stores import MemoryStore, PostgresStore, SqliteStore, Store

__all__ = [
    "HELD_UNTIL",
    "RECORDED_UPDATES",
    "in_start_order",
    "open_or_recorded",
    "record_task",
    "recorded_tasks",
    "store_updates",
    "task_op_data",
    "task_records",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")

RECORDED_UPDATES = 20
"""Progress updates recorded with a task that ended (the last ones; ``task_status`` shows ten)."""

HELD_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)
"""The lease of a task recorded while its workflow holds it: no built-in worker claims it."""

_OWNER = "temporal:"

_BY_STORE: weakref.WeakKeyDictionary[Any, TaskStore] = weakref.WeakKeyDictionary()


def task_records(store: Store | None) -> TaskStore | None:
    """The task tables in ``store``'s database (one per store object); ``None``: it has none.

    A store with a ``task_store()`` method (a store of your own kind, say) records them in
    the ``TaskStore`` it returns. Another store of another kind records no tasks: they are
    listed while the run's workflow answers, and a later turn does not find those that
    ended before it.
    """
    if store is None:
        return None
    own = getattr(store, "task_store", None)
    try:
        known = _BY_STORE.get(store)
    except TypeError:  # not weakly referable: asked every time
        return _own_tasks(own)
    if known is not None:
        return known
    made: TaskStore
    given = _own_tasks(own)
    if given is not None:
        made = given
    elif isinstance(store, SqliteStore):
        made = _SqliteShared(store)
    elif isinstance(store, PostgresStore):
        made = _PostgresShared(store)
    elif isinstance(store, MemoryStore):
        made = MemoryTaskStore()
    else:
        return None
    _BY_STORE[store] = made
    return made


def _own_tasks(own: Any) -> TaskStore | None:
    if not callable(own):
        return None
    tasks = own()
    if not isinstance(tasks, TaskStore):
        raise UsageError(f"the store's task_store() gave {type(tasks).__name__}, not a TaskStore")
    return tasks


def task_op_data(
    task: Task, updates: list[Update], *, held_by: str | None = None
) -> dict[str, Any]:
    """A ``task`` record op's data: the task and its last ``RECORDED_UPDATES`` updates.

    ``held_by`` (the workflow id) for a task that has not ended: it is written owned by that
    workflow, so no built-in worker sharing the tables claims it (even one written by an
    older steadyrun's record activity, which writes the task as it is given).
    """
    if held_by is not None and not task.final:
        task = replace(task, owner=_OWNER + held_by, lease_until=HELD_UNTIL)
    kept = updates[-RECORDED_UPDATES:]
    return {"task": to_plain(task, Task), "updates": [to_plain(u, Update) for u in kept]}


async def record_task(tasks: TaskStore, data: dict[str, Any]) -> None:
    """Write a ``task`` record op (idempotent: a retried batch writes it again, unchanged).

    A task that has not ended never replaces one that has (a settled task stays settled).
    """
    task = from_plain(data["task"], Task)
    stored = await tasks.insert(task)
    if stored != task:
        await tasks.modify(task.id, lambda old: None if old.final and not task.final else task)
    for plain in data.get("updates", []):
        await tasks.add_update(task.id, from_plain(plain, Update))


async def store_updates(tasks: TaskStore, task_id: str, updates: list[Update]) -> bool:
    """Write a running task's progress ``updates`` (each event id once), in the activity.

    ``False`` while the task is not recorded yet (not adopted, or its record not written):
    the caller keeps them for the next try. An update the tables refuse is dropped.
    """
    if not updates:
        return True
    if await tasks.get(task_id) is None:
        return False
    for update in updates:
        try:
            await tasks.add_update(task_id, update)
        except UsageError:  # over the limits: the workflow drops it too
            continue
    return True


async def recorded_tasks(
    tasks: TaskStore, run_id: str, tools: Mapping[str, BackgroundTool] | None = None
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The run's ended tasks and their last updates, as plain data for a new workflow run.

    A task recorded as not ended was left by a workflow that went away (a new workflow run
    starts only when none is open): its operation is no longer watched, so it is settled
    here, as the built-in engine settles a task lost with its worker, and written so.
    """
    ended: list[dict[str, Any]] = []
    updates: dict[str, list[dict[str, Any]]] = {}
    for task in await tasks.list_tasks(run_id):
        if not task.final:
            settled = await _settle(tasks, task, (tools or {}).get(task.tool))
            if settled is None or not settled.final:
                continue
            task = settled
        ended.append(to_plain(task, Task))
        kept = await tasks.updates(task.id, RECORDED_UPDATES)
        if kept:
            updates[task.id] = [to_plain(u, Update) for u in kept]
    return ended, updates


async def _settle(tasks: TaskStore, task: Task, bt: BackgroundTool | None) -> Task | None:
    # An unknown tool's traits are unknown: the task needs review.
    review, error = lost_verdict(bt) if bt is not None else (True, "its tool is unknown here")

    def settle(old: Task) -> Task | None:
        if old.final:
            return None
        return replace(
            old,
            status="failed",
            error=error,
            needs_review=review,
            owner=None,
            lease_until=None,
            notified=True,  # the new workflow run holds it: no built-in worker announces it
            updated_at=datetime.now(UTC),
        )

    return await tasks.modify(task.id, settle)


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
