"""``MemoryStore``: a journal and feed in process memory, for tests and examples.

It serialises everything it keeps with the same codec as the durable stores, so a value that
would not survive a real store fails here too, and what a run gets back on load is a copy,
never the object it saved.
"""

from __future__ import annotations

from datetime import UTC, datetime

from steadyrun._codec import decode, decode_all, encode
from steadyrun._errors import CallNotFoundError, StoreError
from steadyrun.chat import Message
from steadyrun.records import (
    CallRecord,
    CallUpdate,
    RunRecord,
    RunSnapshot,
    RunStatus,
    Step,
    merge_call,
    merges_whole,
    overlay_external,
    whole_rev,
)
from steadyrun.records._history import StepEntry
from steadyrun.stores._encoded import decode_snapshot, encode_step
from steadyrun.stores._feed_wait import FeedWaiters
from steadyrun.stores._history_memory import MemoryHistory
from steadyrun.stores._leases import late_outcome
from steadyrun.stores._leases_memory import MemoryLeases
from steadyrun.stores._lifecycle_memory import MemoryLifecycle
from steadyrun.stores._listing import RunFilter, record_summary
from steadyrun.stores._memory_rows import StoredFeed, StoredRun
from steadyrun.stores._ports import Claim, FeedMessage, RunSummary

__all__ = ["MemoryStore"]


class MemoryStore(MemoryLifecycle):
    """A ``Journal`` and ``Feed`` kept in memory, serialised like a real store.

    It deletes, dumps and restores run trees too (``RunLifecycle``).

    Attributes:
        leases: The claims of runs (see ``steadyrun.stores.Leases``).
        bytes_written: Bytes of encoded data written so far (steps, calls, input).
        step_bytes: Bytes written by each ``save_step``, in order.
    """

    def __init__(self) -> None:
        self._runs: dict[str, StoredRun] = {}
        self._feeds: dict[str, StoredFeed] = {}
        self._waiters = FeedWaiters()
        self.leases = MemoryLeases()
        self.bytes_written = 0
        self.step_bytes: list[int] = []

    # -- journal ---------------------------------------------------------------------------

    async def save_step(self, run_id: str, step: Step) -> int | None:
        """Write one step atomically: everything is encoded before anything is changed.

        Returns what ``pending`` returns for the step's claimed position (``Journal``).
        """
        enc = encode_step(run_id, step)
        run_b, cp_b, base, appended, written = (
            enc.run,
            enc.checkpoint,
            enc.base,
            enc.append,
            enc.size,
        )
        blocks = {block_id: data for block_id, _, data in enc.blocks}
        self.leases.check(run_id)  # a lost claim: refused before anything changes
        # Merge the call snapshots (after the step's removals) before changing anything, so a
        # snapshot that cannot be encoded leaves the stored run as it was.
        stored = self._runs.get(run_id)
        # Where the appended messages go (checked now), or the new log of a rewrite.
        at = _append_at(stored.context if stored else [], base, step.context.start)
        history = stored.history if stored else MemoryHistory()
        entry = history.plan(step, len(stored.context) if stored else 0)
        written += len(entry.data)
        removed = set(step.removed_calls)
        calls: dict[str, tuple[bytes, int | None]] = {}
        for call in step.calls:
            old = calls.get(call.id)
            if old is None and stored is not None and call.id not in removed:
                old = _stored_call(stored, call.id)
            calls[call.id] = _merged(old, call)
            written += len(calls[call.id][0])

        if stored is None:
            stored = self._runs[run_id] = StoredRun(run=run_b, checkpoint=cp_b, history=history)
        for block_id in step.removed_blocks:
            stored.blocks.pop(block_id, None)
        for call_id in step.removed_calls:
            stored.calls.pop(call_id, None)
            stored.whole.pop(call_id, None)
        for call_id, (data, whole) in calls.items():
            _put_call(stored, call_id, data, whole)
        stored.blocks.update(blocks)
        history.apply(entry, stored.context)
        if base is not None:
            stored.context = base + appended  # the old log stays with the history's archive
        else:
            # In place: a copy of the whole log per step made each save O(N).
            del stored.context[at:]
            stored.context.extend(appended)
        stored.run = run_b
        stored.checkpoint = cp_b
        self.leases.check(run_id, step.run.steps)  # logs the writer
        self.bytes_written += written
        self.step_bytes.append(written)
        return self._pending(run_id, step.checkpoint.claimed_through)

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        """Merge one call snapshot with ``merge_call``."""
        if not late_outcome(call):
            self.leases.check(run_id)
        stored = self._runs.get(run_id)
        if stored is None:
            raise StoreError(f"call {call.id!r} saved for unknown run {run_id!r}")
        data, whole = _merged(_stored_call(stored, call.id), call)
        _put_call(stored, call.id, data, whole)
        self.bytes_written += len(data)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        """Apply a host write with ``overlay_external``."""
        stored = self._runs.get(run_id)
        if stored is None or call_id not in stored.calls:
            raise CallNotFoundError(run_id, call_id)
        merged = overlay_external(decode(stored.calls[call_id], CallRecord), update)
        _put_call(stored, call_id, encode(merged), whole_rev(merged))
        self.leases.woken(run_id)
        return merged

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """One call record, or ``None``."""
        stored = self._runs.get(run_id)
        data = stored.calls.get(call_id) if stored is not None else None
        return decode(data, CallRecord) if data is not None else None

    async def load(self, run_id: str) -> RunSnapshot | None:
        """Load a run; ``None`` when there is none."""
        stored = self._runs.get(run_id)
        if stored is None:
            return None
        return decode_snapshot(
            stored.run,
            stored.checkpoint,
            stored.context,
            stored.calls.values(),
            stored.blocks.values(),
            call_ids=stored.calls.keys(),
            sort_blocks=True,  # kept by id: in model order as the SQL stores give them
        )

    async def history(self, run_id: str) -> list[StepEntry]:
        """The run's step entries, by step number (``StepHistory``)."""
        stored = self._runs.get(run_id)
        return stored.history.listed() if stored is not None else []

    async def context_at(self, run_id: str, step: int) -> list[Message] | None:
        """The run's context after ``step``, or ``None`` when it has no such step."""
        stored = self._runs.get(run_id)
        found = stored.history.context_at(step, stored.context) if stored is not None else None
        return decode_all(found, Message) if found is not None else None

    # -- feed ------------------------------------------------------------------------------

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        """Append input; a message whose id and revision are already there is returned as is."""
        feed = self._feeds.setdefault(run_id, StoredFeed())
        pair = (message.id, message.revision)  # compared as a pair: no joined text
        seq = feed.keys.get(pair)
        if seq is not None:
            return decode(feed.messages[seq - 1], FeedMessage)
        stored = FeedMessage(
            seq=len(feed.messages) + 1,
            id=message.id,
            revision=message.revision,
            role=message.role,
            content=message.content,
            media=list(message.media),
            meta=message.meta,
        )
        data = encode(stored)
        feed.messages.append(data)
        feed.keys[pair] = stored.seq
        self.bytes_written += len(data)
        self.leases.woken(run_id)
        self._waiters.wake(run_id)
        return stored

    async def pending(self, run_id: str, after: int) -> int:
        """The last sequence number when it is above ``after`` and unconsumed, else 0."""
        return self._pending(run_id, after)

    def _pending(self, run_id: str, after: int) -> int:
        feed = self._feeds.get(run_id)
        if feed is None:
            return 0
        last = len(feed.messages)
        return last if last > max(after, feed.consumed) else 0

    async def claim(self, run_id: str, through: int) -> Claim:
        """The unconsumed messages up to ``through``."""
        feed = self._feeds.get(run_id)
        last = len(feed.messages) if feed else 0
        consumed = feed.consumed if feed else 0
        if through <= consumed:
            raise StoreError(
                f"claim through {through} of run {run_id!r} is at or below consumed {consumed}"
            )
        if through > last:
            raise StoreError(f"claim through {through} of run {run_id!r} is beyond input {last}")
        assert feed is not None
        messages = [decode(m, FeedMessage) for m in feed.messages[consumed:through]]
        return Claim(end_seq=through, messages=messages)

    async def consume(self, run_id: str, through: int) -> None:
        """Mark input delivered up to ``through``."""
        feed = self._feeds.setdefault(run_id, StoredFeed())
        feed.consumed = max(feed.consumed, min(through, len(feed.messages)))

    async def wait_pending(self, run_id: str, after: int, max_wait: float) -> int:
        """Wait for input above ``after``; woken by ``append``."""
        return await self._waiters.wait(run_id, lambda: self.pending(run_id, after), max_wait)

    # -- run index -------------------------------------------------------------------------

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        updated_before: datetime | None = None,
        limit: int = 100,
    ) -> list[RunSummary]:
        """Runs by last activity, newest first (a scan: this store is for tests)."""
        wanted = RunFilter(status=status, agent=agent, updated_before=updated_before)
        runs = (decode(stored.run, RunRecord) for stored in self._runs.values())
        out = [record_summary(run) for run in runs if wanted.admits(run)]
        out.sort(key=lambda r: (r.updated_at or _EPOCH, r.run_id), reverse=True)
        return out[:limit]

    async def close(self) -> None:
        """Nothing to release."""

    # -- inspection ------------------------------------------------------------------------

    def run_ids(self) -> list[str]:
        """Ids of the stored runs, in creation order."""
        return list(self._runs)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _merged(old: tuple[bytes, int | None] | None, call: CallRecord) -> tuple[bytes, int | None]:
    """The stored form of ``merge_call`` of ``call`` over ``old``, and its ``whole`` rev.

    ``old``: the stored bytes and their ``whole`` rev (``_stored_call``). The rev returned is
    the one to keep in ``whole`` for the result (``None``: it is not replaced whole).
    """
    if old is None or merges_whole(old[1], call):
        merged = call  # what merge_call gives: nothing of the stored record survives
    else:
        merged = merge_call(decode(old[0], CallRecord), call)
    return encode(merged), whole_rev(merged)


def _stored_call(stored: StoredRun, call_id: str) -> tuple[bytes, int | None] | None:
    """A call's stored bytes and, when they are replaced whole, their rev (see ``StoredRun``)."""
    data = stored.calls.get(call_id)
    if data is None:
        return None
    whole = stored.whole.get(call_id)
    return data, whole[0] if whole is not None and whole[1] is data else None


def _put_call(stored: StoredRun, call_id: str, data: bytes, whole: int | None) -> None:
    stored.calls[call_id] = data
    if whole is None:
        stored.whole.pop(call_id, None)
    else:
        stored.whole[call_id] = (whole, data)


def _append_at(log: list[bytes], base: list[bytes] | None, start: int | None) -> int:
    """Where a step's appended messages go in ``log`` (after its new base, if it has one)."""
    if base is not None:
        return len(base)
    at = len(log) if start is None else start
    if at > len(log):
        raise StoreError(f"context append at position {at} leaves a gap after {len(log)} messages")
    return at
