"""The end of a run's life in a store: deleting it, and dumping it to restore it elsewhere.

A run is a tree: the run itself and the sub-agent runs of its delegation calls
(``<run>/<call>``, and theirs in turn), each with its records, context, blocks and feed. The
tree is found through the call records (a sub-agent run exists only under a call of its
parent), so a store answers it through its primary keys, never by scanning run ids for a
prefix.

``RunLifecycle`` is a port of its own beside ``Store``: every steadyrun store implements it,
and a store of your own that does not still works for everything else (the operations that
need it say so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from steadyrun._errors import ForeignEngineError, RunBusyError, UsageError
from steadyrun.records import RunSnapshot
from steadyrun.stores._leases import Fence, Holder, foreign_engine
from steadyrun.stores._ports import FeedMessage

__all__ = [
    "FeedDump",
    "RunDeletion",
    "RunDump",
    "RunLifecycle",
    "check_dump",
    "refuse_held",
    "root_of",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunDeletion:
    """What ``delete_run`` removed.

    Attributes:
        run_id: The run asked for.
        runs: Ids of the run rows deleted: the run and its sub-agent runs, sorted.
        messages: Input messages deleted from their feeds.
    """

    run_id: str
    runs: list[str] = field(default_factory=list)
    messages: int = 0

    @property
    def found(self) -> bool:
        """Whether there was anything to delete (a run, or input of a run not started yet)."""
        return bool(self.runs or self.messages)


@dataclass(kw_only=True, slots=True)
class FeedDump:
    """The whole feed of one run: every message with its number, and how far it was consumed.

    Attributes:
        run_id: The run.
        messages: Every message, consumed or not, by ``seq``.
        consumed: The consumed boundary.
    """

    run_id: str
    messages: list[FeedMessage] = field(default_factory=list)
    consumed: int = 0


@dataclass(kw_only=True, slots=True)
class RunDump:
    """Everything a store holds of a run tree, as ``dump_run`` reads it in one snapshot.

    Attributes:
        run_id: The run (the root of the tree).
        runs: The run and its sub-agent runs that have rows, sorted by id (the run first).
        feeds: The feeds of those runs that hold input (a run started and not executed yet
            has a feed and no row), sorted by run id.
        woken: Whether the run had wake-ups no executor handled yet (input, a decision, an
            answer or a result written since its last execution, or an execution cut off):
            restoring it counts a wake-up, so a worker executes it there too.
    """

    run_id: str
    runs: list[RunSnapshot] = field(default_factory=list)
    feeds: list[FeedDump] = field(default_factory=list)
    woken: bool = False


@runtime_checkable
class RunLifecycle(Protocol):
    """Deleting a run tree, and dumping and restoring it whole.

    Contract: ``delete_run`` removes, in one transaction, the run, its sub-agent runs, their
    feeds, and the run's claim and step log, and refuses (``RunBusyError``, changing nothing)
    while another executor holds the run's unexpired claim; a claim of the current task's
    fence may be deleted with its run. ``dump_run`` reads the tree in one snapshot (``None``
    when there is nothing), with whether the run has unhandled wake-ups. ``restore_run``
    writes a dump in one transaction, exactly as it was read (call order, feed numbers,
    consumed boundaries), counts a wake-up when the dump says so, and refuses with
    ``ConflictError`` when any run of the tree has a row or input already.
    """

    async def delete_run(self, run_id: str) -> RunDeletion:
        """Delete the run tree; refuse while another executor holds its claim."""
        ...

    async def dump_run(self, run_id: str) -> RunDump | None:
        """The run tree as stored, or ``None`` when the store holds nothing of it."""
        ...

    async def restore_run(self, dump: RunDump) -> None:
        """Write a dumped run tree into this store (new runs only)."""
        ...


def root_of(run_id: str) -> str:
    """The top-level run of a sub-agent run: its claim covers the whole tree."""
    return run_id.split("/", 1)[0]


def refuse_held(run_id: str, holder: Holder | None, fence: Fence | None) -> None:
    """Raise when ``holder`` (the live claim of the run's tree) is another executor's.

    A claim held under the current task's own fence is not in the way: an executor may
    delete the run it holds.

    Raises:
        ForeignEngineError: Another engine (Temporal) executes the run.
        RunBusyError: Another executor holds the run's claim.
    """
    if holder is None:
        return
    if fence is not None and fence.run_id == holder.run_id and fence.token == holder.token:
        return
    if foreign_engine(holder.owner) is not None:
        raise ForeignEngineError(run_id, holder.owner, holder.expires_at)
    raise RunBusyError(run_id, holder.owner, holder.expires_at)


def check_dump(dump: RunDump) -> list[str]:
    """The run ids a dump writes; raises when one lies outside its tree or repeats.

    Raises:
        UsageError: The dump names a run that is neither its run nor one of its sub-agent runs.
    """
    root = dump.run_id
    ids = [snap.run.run_id for snap in dump.runs]
    feeds = [feed.run_id for feed in dump.feeds]
    for run_id in ids + feeds:
        if run_id != root and not run_id.startswith(root + "/"):
            raise UsageError(f"a dump of run {root!r} holds run {run_id!r}, outside its tree")
    if len(set(ids)) != len(ids) or len(set(feeds)) != len(feeds):
        raise UsageError(f"a dump of run {root!r} holds a run or a feed twice")
    for feed in dump.feeds:
        # Feeds number their messages 1, 2, 3...: runs remember input by these numbers.
        seqs = [m.seq for m in feed.messages]
        if seqs != list(range(1, len(seqs) + 1)) or not 0 <= feed.consumed <= len(seqs):
            raise UsageError(
                f"the feed of run {feed.run_id!r} in a dump is not numbered 1..n with its "
                f"consumed boundary inside it (seq {seqs[:5]}..., consumed {feed.consumed})"
            )
    return sorted(set(ids) | set(feeds))
