"""``RunLifecycle`` of ``MemoryStore``: deleting, dumping and restoring run trees in memory.

Nothing here awaits between looking at the run's claim and changing the dicts, so on one
event loop a delete or a restore is as atomic as the durable stores' transactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from steadyrun._codec import decode, encode
from steadyrun._errors import ConflictError
from steadyrun.stores._leases import current_fence
from steadyrun.stores._lifecycle import (
    FeedDump,
    RunDeletion,
    RunDump,
    check_dump,
    refuse_held,
    root_of,
)
from steadyrun.stores._memory_rows import StoredFeed, StoredRun
from steadyrun.stores._ports import FeedMessage

if TYPE_CHECKING:
    from steadyrun.records import RunSnapshot
    from steadyrun.stores._leases_memory import MemoryLeases

__all__ = ["MemoryLifecycle"]


class _Host(Protocol):
    """What the mixin uses of ``MemoryStore``."""

    _runs: dict[str, StoredRun]
    _feeds: dict[str, StoredFeed]
    leases: MemoryLeases

    async def load(self, run_id: str) -> RunSnapshot | None: ...


def _tree(runs: dict[str, StoredRun], run_id: str) -> list[str]:
    """The run and its sub-agent runs, found through their delegation calls, sorted."""
    found: list[str] = []
    todo = [run_id]
    while todo:
        current = todo.pop()
        found.append(current)
        stored = runs.get(current)
        if stored is not None:
            todo.extend(f"{current}/{call_id}" for call_id in stored.calls)
    return sorted(found)


class MemoryLifecycle:
    """The ``RunLifecycle`` methods of ``MemoryStore`` (a mixin of it)."""

    async def delete_run(self: _Host, run_id: str) -> RunDeletion:
        """Delete the run, its sub-agent runs, their input, the claim and the step log.

        Raises:
            RunBusyError: Another executor holds the run's claim (nothing is deleted).
        """
        root = root_of(run_id)
        # MemoryLeases.holder never suspends: nothing runs between this look and the delete.
        refuse_held(run_id, await self.leases.holder(root), current_fence())
        runs: list[str] = []
        messages = 0
        for member in _tree(self._runs, run_id):
            if self._runs.pop(member, None) is not None:
                runs.append(member)
            feed = self._feeds.pop(member, None)
            if feed is not None:
                messages += len(feed.messages)
        if run_id == root:
            self.leases.forget(root)
        return RunDeletion(run_id=run_id, runs=runs, messages=messages)

    async def dump_run(self: _Host, run_id: str) -> RunDump | None:
        """The run tree as stored, or ``None``."""
        dump = RunDump(run_id=run_id)
        for member in _tree(self._runs, run_id):
            snap = await self.load(member)
            if snap is not None:
                dump.runs.append(snap)
            feed = self._feeds.get(member)
            if feed is not None and (feed.messages or feed.consumed):
                messages = [decode(m, FeedMessage) for m in feed.messages]
                dump.feeds.append(
                    FeedDump(run_id=member, messages=messages, consumed=feed.consumed)
                )
        if not dump.runs and not dump.feeds:
            return None
        dump.woken = self.leases.unhandled(root_of(run_id))
        return dump

    async def restore_run(self: _Host, dump: RunDump) -> None:
        """Write a dumped tree; everything is encoded before anything is changed.

        Raises:
            ConflictError: A run of the tree has a row or input here already.
            UsageError: The dump names a run outside its tree.
        """
        for member in check_dump(dump):
            feed = self._feeds.get(member)
            if member in self._runs or (feed is not None and (feed.messages or feed.consumed)):
                raise ConflictError(
                    f"run {member!r} exists in this store; delete it before restoring run "
                    f"{dump.run_id!r}"
                )
        runs = {
            snap.run.run_id: StoredRun(
                run=encode(snap.run),
                checkpoint=encode(snap.checkpoint),
                context=[encode(m) for m in snap.context],
                calls={c.id: encode(c) for c in snap.calls},
                blocks={b.id: encode(b) for b in snap.blocks},
            )
            for snap in dump.runs
        }
        feeds = {}
        for dumped in dump.feeds:
            feed = StoredFeed(
                messages=[encode(m) for m in dumped.messages], consumed=dumped.consumed
            )
            feed.keys = {(m.id, m.revision): m.seq for m in dumped.messages}
            feeds[dumped.run_id] = feed
        self._runs.update(runs)
        self._feeds.update(feeds)
        if dump.woken:
            await self.leases.wake(root_of(dump.run_id))
