"""Checks of host answers: the first decision, input response or outcome of a call wins.

``update_call`` applies ``overlay_external`` inside the store's write, so two hosts answering at
once cannot both win: the second sees the first's answer and gets ``ConflictError`` (or, for the
same answer again, the stored record unchanged).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from steadyrun._errors import ConflictError, NotPendingError
from steadyrun.records import CallDecision, CallRecord, CallUpdate, InputRequest
from steadyrun.stores import Store
from steadyrun.testing.conformance._expect import expect_equal, expect_raises, fail
from steadyrun.testing.conformance._records import RUN, at, by_id, call, load, step
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("journal")
"""The journal checks of host answers, in order."""

_APPROVE = CallDecision(approve=True, reason="fine", decided_by="ann", decided_at=at(5))
_REJECT = CallDecision(approve=False, reason="too much", decided_by="bob", decided_at=at(5))
_ROUNDS = 8
"""Races per check: a store that serialises host writes wrongly loses some of them."""


async def _race(
    first: Awaitable[CallRecord], second: Awaitable[CallRecord], what: str
) -> tuple[int, CallRecord]:
    """Run two host writes at once: which one won (0 or 1) and the record it returned."""
    results = await asyncio.gather(first, second, return_exceptions=True)
    won = [i for i, r in enumerate(results) if isinstance(r, CallRecord)]
    lost = [r for r in results if isinstance(r, BaseException)]
    if len(won) != 1 or not isinstance(lost[0], ConflictError):
        fail(
            f"{what}: expected one write to win and the other to raise ConflictError, got "
            + ", ".join(repr(r) if isinstance(r, BaseException) else "a record" for r in results)
        )
    record = results[won[0]]
    assert isinstance(record, CallRecord)
    return won[0], record


@CHECKS.rule("racing_decisions_one_wins")
async def racing_decisions_one_wins(store: Store) -> None:
    """Of two different decisions written at once, exactly one is stored; the other conflicts."""
    ids = [f"c{i}" for i in range(_ROUNDS)]
    await store.save_step(RUN, step(calls=[call(c, status="awaiting_decision") for c in ids]))
    for call_id in ids:
        won, record = await _race(
            store.update_call(RUN, call_id, CallUpdate(decision=_APPROVE)),
            store.update_call(RUN, call_id, CallUpdate(decision=_REJECT)),
            f"two decisions on {call_id}",
        )
        expect_equal(record.decision, (_APPROVE, _REJECT)[won], f"decision {call_id} returned")
    calls = by_id((await load(store)).calls)
    for call_id in ids:
        stored = calls[call_id].decision
        if stored not in (_APPROVE, _REJECT):
            fail(f"decision stored on {call_id}: expected one of the two, got {stored!r}")


@CHECKS.rule("same_decision_again_changes_nothing")
async def same_decision_again_changes_nothing(store: Store) -> None:
    """The same decision again returns the stored record unchanged (who and when included)."""
    await store.save_step(RUN, step(calls=[call(status="awaiting_decision")]))
    first = await store.update_call(RUN, "c1", CallUpdate(decision=_APPROVE))
    again = CallDecision(approve=True, reason="fine", decided_by="cid", decided_at=at(9))
    expect_equal(
        await store.update_call(RUN, "c1", CallUpdate(decision=again)),
        first,
        "record returned for the same decision again",
    )
    expect_equal((await load(store)).calls, [first], "calls after the same decision again")
    with expect_raises(ConflictError, "a different decision after the first"):
        await store.update_call(RUN, "c1", CallUpdate(decision=_REJECT))
    await store.save_call(RUN, call("c2", status="running"))
    with expect_raises(NotPendingError, "a decision on a call that is not waiting for one"):
        await store.update_call(RUN, "c2", CallUpdate(decision=_APPROVE))
    expect_equal(by_id((await load(store)).calls)["c2"], call("c2", status="running"), "c2")


@CHECKS.rule("racing_answers_one_wins")
async def racing_answers_one_wins(store: Store) -> None:
    """Of two different answers to one wait written at once, one is stored; the other conflicts."""
    ids = [f"c{i}" for i in range(_ROUNDS)]
    waits = {c: InputRequest(wait_id=f"{c}.w1", prompt="which card?") for c in ids}
    await store.save_step(
        RUN, step(calls=[call(c, status="awaiting_input", input_request=waits[c]) for c in ids])
    )
    for call_id in ids:
        wait = waits[call_id].wait_id
        won, record = await _race(
            store.update_call(RUN, call_id, CallUpdate(input_response="visa", wait_id=wait)),
            store.update_call(RUN, call_id, CallUpdate(input_response="amex", wait_id=wait)),
            f"two answers to {wait}",
        )
        request = record.input_request
        expect_equal(request and request.response, ("visa", "amex")[won], f"answer to {wait}")
    answer = CallUpdate(input_response="visa", wait_id="c0.w2")
    with expect_raises(NotPendingError, "an answer to a wait the call does not have"):
        await store.update_call(RUN, "c0", answer)


@CHECKS.rule("racing_outcomes_one_wins")
async def racing_outcomes_one_wins(store: Store) -> None:
    """Of two different outcomes of a handed-over call written at once, one is stored."""
    ids = [f"c{i}" for i in range(_ROUNDS)]
    await store.save_step(
        RUN, step(calls=[call(c, status="waiting", handover="await") for c in ids])
    )
    done = CallUpdate(status="succeeded", result="paid", completed_at=at(7))
    failed = CallUpdate(status="failed", error="declined", completed_at=at(8))
    for call_id in ids:
        won, record = await _race(
            store.update_call(RUN, call_id, done),
            store.update_call(RUN, call_id, failed),
            f"two outcomes of {call_id}",
        )
        expect_equal(record.status, ("succeeded", "failed")[won], f"status of {call_id}")
    record = by_id((await load(store)).calls)["c0"]
    again = CallUpdate(status=record.status, result=record.result, error=record.error)
    expect_equal(
        await store.update_call(RUN, "c0", again), record, "the same outcome again (no change)"
    )
    await store.save_call(RUN, call("q", status="queued"))
    with expect_raises(NotPendingError, "an outcome of a call the host does not own"):
        await store.update_call(RUN, "q", done)
