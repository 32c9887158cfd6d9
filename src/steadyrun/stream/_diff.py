"""Display snapshots from stored runs, and the deltas between two snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from steadyrun._errors import RunNotFoundError
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.records._copy import copied
from steadyrun.runtime._calls import CONFIRM_PROMPT
from steadyrun.runtime._extset import EXT_STATE
from steadyrun.runtime._host import pending_items as host_pending
from steadyrun.runtime._recovery import ORIGINAL_ARGUMENTS
from steadyrun.stores import Store
from steadyrun.stream._model import (
    BlockAdded,
    BlockRemoved,
    BlockUpdated,
    CallRemoved,
    CallStatusChanged,
    Delta,
    DisplayBlock,
    DisplayCall,
    DisplayDecision,
    DisplayInput,
    DisplayPending,
    DisplaySnapshot,
    PendingChanged,
    PlanChanged,
    RunStatusChanged,
    TextFragment,
    ThinkingFragment,
    ToolArgumentsFragment,
    UsageChanged,
)

__all__ = [
    "RESULT_LIMIT",
    "diff",
    "display_call",
    "display_from_run",
    "pending_items",
    "snapshot_from_store",
    "stored_plan",
]

RESULT_LIMIT = 4000
"""Characters of a call's result or error a display keeps; the rest is cut."""


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= RESULT_LIMIT:
        return text
    return text[:RESULT_LIMIT] + f"… ({len(text) - RESULT_LIMIT} more characters)"


def display_call(record: CallRecord) -> DisplayCall:
    """What a display shows of a call record."""
    decision = None
    if record.decision is not None:
        d = record.decision
        original = None
        if d.arguments is not None:
            # Decisions stored before they kept the model's arguments: those are in a note once
            # the call ran with the edit, and still the record's own before.
            original = d.original_arguments or record.notes.get(
                ORIGINAL_ARGUMENTS, record.arguments
            )
        decision = DisplayDecision(
            approve=d.approve,
            reason=d.reason,
            decided_by=d.decided_by,
            edited=d.arguments is not None,
            arguments=d.arguments,
            original_arguments=original,
            decided_at=d.decided_at,
        )
    asked = None
    if record.input_request is not None:
        r = record.input_request
        asked = DisplayInput(
            wait_id=r.wait_id,
            prompt=r.prompt,
            response_schema=r.response_schema,
            response=r.response,
            # The answer is written with the call's next status: a call still awaiting
            # input has none yet, whatever its response field holds.
            answered=record.status != "awaiting_input" and r.response is not None,
            answered_by=r.answered_by,
            answered_at=r.answered_at,
        )
    return DisplayCall(
        id=record.id,
        name=record.name,
        arguments=record.arguments,
        status=record.status,
        result=_cut(record.result),
        error=_cut(record.error),
        handover=record.handover,
        parent_id=record.parent_id,
        decision=decision,
        model_call_id=record.model_call_id,
        started_at=record.started_at,
        completed_at=record.completed_at,
        settled_by=record.settled_by,
        input=asked,
        prompt=record.notes.get(CONFIRM_PROMPT) or None,
    )


def pending_items(
    calls: Iterable[CallRecord], *, strict_settlement: bool = False
) -> tuple[DisplayPending, ...]:
    """What the run waits for and what its host owns, in call order.

    The same classification as ``Runtime.pending``, from records already loaded.
    """
    items = host_pending(calls, strict_settlement=strict_settlement)
    return tuple(
        DisplayPending(
            kind=i.kind,
            blocking=i.blocking,
            call_id=i.call_id,
            name=i.name,
            arguments=i.arguments,
            prompt=i.prompt,
            wait_id=i.wait_id,
            response_schema=i.response_schema,
            payload=i.payload,
        )
        for i in items
    )


def stored_plan(snap: RunSnapshot) -> Any:
    """The plan the ``planning`` extension saved with the run's checkpoint, as plain data."""
    states = snap.checkpoint.extra.get(EXT_STATE)
    state = states.get("planning") if isinstance(states, dict) else None
    items = state.get("items") if isinstance(state, dict) else None
    return items or None


def display_from_run(
    snap: RunSnapshot, *, strict_settlement: bool = False, seq: int = 0
) -> DisplaySnapshot:
    """The display snapshot of a loaded run."""
    run = snap.run
    error = None
    if run.status == "failed":
        error = f"{run.error_kind}: {run.error}" if run.error_kind else run.error
    blocks = tuple(
        DisplayBlock(
            id=b.id,
            kind=b.kind,
            position=b.position,
            text=b.text,
            call_id=b.call_id,
            turn=b.turn,
            model_call_id=b.model_call_id,
            role=b.role,
            message_id=b.message_id,
            by=b.by,
            at=b.at,
            usage=b.usage,
        )
        for b in snap.blocks
    )
    return DisplaySnapshot(
        run_id=run.run_id,
        agent=run.agent,
        status=run.status,
        text=run.text if run.status == "completed" else None,
        error=error,
        usage=run.usage,
        plan=run.plan if run.plan is not None else stored_plan(snap),
        blocks=blocks,
        calls=tuple(display_call(c) for c in snap.calls),
        pending=pending_items(snap.calls, strict_settlement=strict_settlement),
        seq=seq,
        cancelled_by=run.cancelled_by if run.status == "cancelled" else None,
    ).normalized()


async def snapshot_from_store(
    store: Store, run_id: str, *, strict_settlement: bool = False
) -> DisplaySnapshot:
    """The display snapshot of a stored run, at sequence number 0.

    Raises:
        RunNotFoundError: The store has no such run.
    """
    snap = await store.load(run_id)
    if snap is None:
        raise RunNotFoundError(run_id)
    return display_from_run(snap, strict_settlement=strict_settlement)


def diff(old: DisplaySnapshot, new: DisplaySnapshot) -> list[Delta]:
    """The deltas that turn ``old`` into ``new`` (numbered from ``old.seq + 1``).

    Applying them in order to ``old`` gives ``new`` with ``seq`` set to the last delta's
    (or ``old`` itself when nothing changed). ``new.seq`` is ignored.
    """
    out: list[Delta] = []
    seq = old.seq

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq

    new = new.normalized()
    # Blocks first (a call's block before its status), then calls, then the rest.
    old_blocks = {b.id: b for b in old.blocks}
    new_ids = {b.id for b in new.blocks}
    for b in old.blocks:
        if b.id not in new_ids:
            out.append(BlockRemoved(seq=next_seq(), block_id=b.id))
    for b in new.blocks:
        before = old_blocks.get(b.id)
        if before is None:
            out.append(BlockAdded(seq=next_seq(), block=b))
        elif before != b:
            out.append(_block_change(before, b, next_seq()))
    for delta in _call_changes(old.calls, new.calls):
        out.append(copied(delta, seq=next_seq()))
    if old.plan != new.plan:
        out.append(PlanChanged(seq=next_seq(), plan=new.plan))
    if old.usage != new.usage:
        out.append(UsageChanged(seq=next_seq(), usage=new.usage))
    if old.pending != new.pending:
        out.append(PendingChanged(seq=next_seq(), items=new.pending))
    if (old.status, old.text, old.error, old.cancelled_by) != (
        new.status,
        new.text,
        new.error,
        new.cancelled_by,
    ):
        out.append(
            RunStatusChanged(
                seq=next_seq(),
                status=new.status,
                text=new.text,
                error=new.error,
                cancelled_by=new.cancelled_by,
            )
        )
    return out


def _block_change(
    before: DisplayBlock, after: DisplayBlock, seq: int
) -> BlockUpdated | TextFragment | ThinkingFragment | ToolArgumentsFragment:
    grown = (
        copied(before, text=after.text) == after
        and after.text.startswith(before.text)
        and (after.kind in ("content", "thinking") or after.live)
    )
    if not grown:
        return BlockUpdated(seq=seq, block=after)
    more = after.text[len(before.text) :]
    if after.kind == "thinking":
        return ThinkingFragment(seq=seq, block_id=after.id, text=more)
    if after.kind == "tool_call":
        return ToolArgumentsFragment(seq=seq, block_id=after.id, text=more)
    return TextFragment(seq=seq, block_id=after.id, text=more)


def _call_changes(
    old: Sequence[DisplayCall], new: Sequence[DisplayCall]
) -> list[CallStatusChanged | CallRemoved]:
    """Removals and upserts (``seq`` 0, numbered by the caller) that keep ``new``'s order.

    ``apply`` appends a new call at the end, so calls are re-added from the first place where
    the order of the kept calls differs from ``new``'s.
    """
    out: list[CallStatusChanged | CallRemoved] = []
    new_by_id = {c.id: c for c in new}
    kept = [c for c in old if c.id in new_by_id]
    for c in old:
        if c.id not in new_by_id:
            out.append(CallRemoved(seq=0, call_id=c.id))
    same = 0
    while same < len(kept) and same < len(new) and kept[same].id == new[same].id:
        same += 1
    for c in kept[same:]:  # out of order: removed here, added again below in order
        out.append(CallRemoved(seq=0, call_id=c.id))
    for before, after in zip(kept[:same], new[:same], strict=True):
        if before != after:
            out.append(CallStatusChanged(seq=0, call=after))
    for c in new[same:]:
        out.append(CallStatusChanged(seq=0, call=c))
    return out
