"""The end of a run's life: deleting it, retention, and moving it to another store.

- **delete** (``Operations.delete``): the run, its sub-agent runs, their input, the run's
  claim and step log go in one transaction of the store (``RunLifecycle.delete_run``), which
  refuses while another executor holds the claim (``RunBusyError``); a claim whose owner is a
  process of this host that died holds nothing back. The run's background tasks go after it
  (a task a worker is running holds the delete back: it is asked to stop, and the delete
  refused until it has). Deleting what is not there is not an error.
- **retention** (``Retention``, applied by ``Operations.apply_retention`` and periodically by
  a ``Worker``, or a ``TemporalEngine`` given one): finished runs whose last activity is older
  than a bound are deleted, a batch per pass; then a ``SqliteStore`` gives the freed pages
  back to the disk. A run another engine executes (its claim says so) is deleted by that
  engine's ``delete`` when the pass has it (``foreign``), else skipped as busy.
- **export / import**: the run tree as one versioned JSON document
  (``steadyrun.stores.export_document``), restored whole into another store, with its
  unhandled wake-ups, so a worker there takes it up as one here would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from steadyrun._errors import ForeignEngineError, RunBusyError, RunNotFoundError, UsageError
from steadyrun.records import RunStatus
from steadyrun.runtime._claims import owner_died
from steadyrun.service._start import successor_key
from steadyrun.stores import SqliteStore, Store
from steadyrun.stores._export import export_document, read_document
from steadyrun.stores._leases import fenced
from steadyrun.stores._lifecycle import RunLifecycle, root_of

if TYPE_CHECKING:
    from steadyrun.background import TaskStore

__all__ = [
    "Deleted",
    "Deleter",
    "Imported",
    "Retention",
    "RetentionPass",
    "apply_retention",
    "delete_run",
    "export_run",
    "import_run",
    "retain",
]

log = logging.getLogger("steadyrun.retention")

_PAGE = 100
_CLAIM_TTL = 60.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Deleted:
    """The outcome of ``Operations.delete``.

    Attributes:
        run_id: The run.
        runs: The run rows deleted: the run and its sub-agent runs, sorted.
        messages: Input messages deleted.
        tasks: Background tasks deleted.
    """

    run_id: str
    runs: list[str] = field(default_factory=list)
    messages: int = 0
    tasks: int = 0

    @property
    def found(self) -> bool:
        """Whether there was anything to delete."""
        return bool(self.runs or self.messages or self.tasks)


Deleter = Callable[[str], Awaitable[Deleted]]
"""Deletes a run another engine executes (``TemporalEngine.delete``), for retention."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Imported:
    """The outcome of ``Operations.import_run``.

    Attributes:
        run_id: The run.
        runs: The runs written: the run and its sub-agent runs, sorted.
        woken: Whether the run is runnable here (it had wake-ups nobody handled).
    """

    run_id: str
    runs: list[str]
    woken: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Retention:
    """Which runs a retention pass deletes, and how often a ``Worker`` makes one.

    Attributes:
        older_than: A run is deleted once its last activity (``updated_at``) is older.
        statuses: The statuses of the runs deleted; finished runs by default. A sub-agent run
            is deleted with its run, never alone.
        every: Seconds between a worker's passes (the first comes when it starts).
        batch: Runs deleted per pass at most; the rest wait for the next pass.
        reclaim: Whether a pass that deleted runs gives the space back to the disk after it
            (``SqliteStore.reclaim``: incremental, cheap; other stores reuse the space).

    Example:
        ``Worker(runtime, retention=Retention(older_than=timedelta(days=30)))``
    """

    older_than: timedelta
    statuses: tuple[RunStatus, ...] = ("completed", "failed", "cancelled")
    every: float = 600.0
    batch: int = 1000
    reclaim: bool = True

    def __post_init__(self) -> None:
        if self.older_than < timedelta(0) or self.every <= 0 or self.batch < 1:
            raise UsageError(
                "Retention needs older_than >= 0, every > 0 and batch >= 1, not "
                f"{self.older_than}, {self.every} and {self.batch}"
            )
        if not self.statuses:
            raise UsageError("Retention needs at least one status to delete runs of")


@dataclass(frozen=True, kw_only=True, slots=True)
class RetentionPass:
    """What one retention pass did.

    Attributes:
        deleted: The runs deleted, in the order they were.
        busy: Runs due that another executor held (left for a later pass).
        reclaimed: Bytes the store gave back to the file system (SQLite).
    """

    deleted: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    reclaimed: int = 0


def lifecycle_of(store: Store) -> RunLifecycle:
    """``store`` as a ``RunLifecycle``; raises ``UsageError`` when it is not one."""
    if not isinstance(store, RunLifecycle):
        raise UsageError(
            f"{type(store).__name__} cannot delete, export or import runs: it needs the "
            "RunLifecycle methods delete_run, dump_run and restore_run"
        )
    return store


def _top_level(run_id: str, doing: str) -> None:
    if "/" in run_id:
        raise UsageError(
            f"run {run_id!r} is a sub-agent run: {doing} its run {root_of(run_id)!r}, which "
            "takes it along"
        )


async def delete_run(
    store: Store,
    run_id: str,
    *,
    tasks: TaskStore | None,
    owner: str,
    now: datetime,
) -> Deleted:
    """Delete a run tree, its background tasks and its successor claim (see the module).

    Raises:
        RunBusyError: Another executor holds the run, or a worker runs one of its tasks.
        UsageError: ``run_id`` is a sub-agent run, or the store cannot delete runs.
    """
    _top_level(run_id, "delete")
    lifecycle = lifecycle_of(store)
    if tasks is not None:
        await _tasks_let_go(tasks, run_id, now)
    lease = None
    holder = await store.leases.holder(run_id)
    if holder is not None and owner_died(holder.owner):
        # Its executor is gone: take the claim, and delete under it.
        lease = await store.leases.acquire(run_id, owner, _CLAIM_TTL, dead_token=holder.token)
    try:
        with fenced(lease.fence if lease is not None else None):
            deletion = await lifecycle.delete_run(run_id)
    except BaseException:
        if lease is not None:
            await store.leases.release(lease)
        raise
    # Which run continued this one, kept in a feed of its own: a new run of this id starts
    # with no successor.
    await lifecycle.delete_run(successor_key(run_id))
    gone = await tasks.delete_run_tasks(run_id) if tasks is not None else 0
    return Deleted(run_id=run_id, runs=deletion.runs, messages=deletion.messages, tasks=gone)


async def _tasks_let_go(tasks: TaskStore, run_id: str, now: datetime) -> None:
    """Refuse while a worker runs a task of the run; ask such tasks to stop."""
    busy = None
    for task in await tasks.list_tasks(run_id):
        live = task.lease_until is not None and task.lease_until > now
        if task.final or task.owner is None or not live:
            continue
        await tasks.request_cancel(task.id, now)
        busy = busy or task
    if busy is not None:
        assert busy.owner is not None
        raise RunBusyError(run_id, busy.owner, busy.lease_until)


async def export_run(store: Store, run_id: str, *, now: datetime) -> dict[str, Any]:
    """The export document of a run tree (JSON-compatible data).

    Raises:
        RunNotFoundError: The store holds nothing of the run.
        UsageError: ``run_id`` is a sub-agent run, or the store cannot export runs.
    """
    _top_level(run_id, "export")
    dump = await lifecycle_of(store).dump_run(run_id)
    if dump is None:
        raise RunNotFoundError(run_id)
    return export_document(dump, now=now)


async def import_run(store: Store, document: Any) -> Imported:
    """Write the run tree of an export document into ``store``.

    Raises:
        ConflictError: A run of the tree exists in the store.
        FormatVersionError: The document has a format this release does not read.
        StoreError: The document is not a run export.
    """
    dump = read_document(document)
    _top_level(dump.run_id, "import")
    await lifecycle_of(store).restore_run(dump)
    runs = sorted(snap.run.run_id for snap in dump.runs)
    return Imported(run_id=dump.run_id, runs=runs, woken=dump.woken)


async def apply_retention(
    store: Store,
    policy: Retention,
    *,
    tasks: TaskStore | None,
    owner: str,
    now: datetime,
    foreign: Deleter | None = None,
    on_deleted: Callable[[str], None] | None = None,
) -> RetentionPass:
    """One retention pass: delete the runs ``policy`` says are due, then reclaim space.

    ``foreign`` deletes the runs another engine executes (their claim is that engine's for
    good); without it they are skipped as busy. ``on_deleted`` hears of each run as it goes,
    before the pass ends (a counter read once the run is gone is then never behind).
    """
    lifecycle_of(store)
    cutoff = now - policy.older_than
    done = RetentionPass()
    seen: set[str] = set()
    for status in policy.statuses:
        before: datetime | None = cutoff
        while before is not None and len(done.deleted) < policy.batch:
            page = await store.list_runs(status=status, updated_before=before, limit=_PAGE)
            fresh = [s for s in page if s.run_id not in seen]
            if not fresh:
                # What is left here stays (busy, or sub-agent runs of live runs): look older.
                before = page[-1].updated_at if len(page) == _PAGE else None
                continue
            for summary in fresh:
                seen.add(summary.run_id)
                if "/" in summary.run_id or len(done.deleted) >= policy.batch:
                    continue  # a sub-agent run goes with its run
                if await _retire(store, summary.run_id, tasks, owner, now, foreign):
                    done.deleted.append(summary.run_id)
                    if on_deleted is not None:
                        on_deleted(summary.run_id)
                else:
                    done.busy.append(summary.run_id)
    if done.deleted and policy.reclaim and isinstance(store, SqliteStore):
        reclaimed = await store.reclaim()
        done = RetentionPass(deleted=done.deleted, busy=done.busy, reclaimed=reclaimed.freed)
    return done


async def _retire(
    store: Store,
    run_id: str,
    tasks: TaskStore | None,
    owner: str,
    now: datetime,
    foreign: Deleter | None,
) -> bool:
    """Delete a due run; ``False`` when it is busy (or another engine's, with no ``foreign``)."""
    try:
        await delete_run(store, run_id, tasks=tasks, owner=owner, now=now)
    except ForeignEngineError:
        if foreign is None:
            return False
        try:
            await foreign(run_id)
        except RunBusyError:
            return False
    except RunBusyError:
        return False
    return True


async def retain(
    store: Store,
    policy: Retention,
    *,
    tasks: TaskStore | None,
    owner: str,
    clock: Callable[[], datetime],
    stopping: asyncio.Event,
    on_deleted: Callable[[str], None],
    foreign: Deleter | None = None,
) -> None:
    """Apply ``policy`` now and every ``policy.every`` seconds until ``stopping`` is set.

    A pass that fails is logged and tried again at the next one: retention never stops a
    worker. ``foreign`` and ``on_deleted``: as for ``apply_retention``.
    """
    while not stopping.is_set():
        try:
            await apply_retention(
                store,
                policy,
                tasks=tasks,
                owner=owner,
                now=clock(),
                foreign=foreign,
                on_deleted=on_deleted,
            )
        except Exception:
            log.exception("a retention pass of %s failed; the next one tries again", owner)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), policy.every)
