"""The record activity mirrors a run's writes to the app's store; a retry replays them all.

Host answers are final in a store, so replaying an answer the mirrored record has already
moved past must not fail the activity forever: the workflow decided it, the store has it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from steadyrun._codec import to_plain  # noqa: E402
from steadyrun.records import (  # noqa: E402
    CallDecision,
    CallRecord,
    CallUpdate,
    Checkpoint,
    InputRequest,
    RunRecord,
    Step,
)
from steadyrun.stores import MemoryStore  # noqa: E402
from steadyrun.temporal import TemporalApp  # noqa: E402
from steadyrun.temporal._activities import Activities  # noqa: E402
from steadyrun.temporal._payloads import RecordInput, RecordOp, update_to_plain  # noqa: E402


def _op(update: CallUpdate) -> RecordOp:
    return RecordOp(op="update_call", call_id="c1", data=update_to_plain(update))


def _save(call: CallRecord) -> RecordOp:
    return RecordOp(op="save_call", data=to_plain(call, CallRecord))


async def test_a_replayed_batch_of_writes_lands_once_and_does_not_fail() -> None:
    store = MemoryStore()
    await store.save_step("r", Step(run=RunRecord(run_id="r", agent="a"), checkpoint=Checkpoint()))
    wait1 = InputRequest(wait_id="c1.w1", prompt="card?")
    ops = [
        _save(CallRecord(id="c1", name="pay", rev=1, status="awaiting_input", input_request=wait1)),
        _op(CallUpdate(input_response="visa", wait_id="c1.w1")),
        _save(CallRecord(id="c1", name="pay", rev=2, status="awaiting_decision")),
        _op(CallUpdate(decision=CallDecision(approve=True))),
        _save(CallRecord(id="c1", name="pay", rev=3, status="waiting", handover="await")),
        _op(CallUpdate(status="succeeded", result="paid")),
        _save(CallRecord(id="c1", name="pay", rev=4, status="succeeded", result="paid")),
    ]
    activities = Activities(TemporalApp(agents=[], store=store))
    await activities.record(RecordInput(run_id="r", ops=ops))
    once = await store.load("r")
    await activities.record(RecordInput(run_id="r", ops=ops))  # a retry replays every write
    assert await store.load("r") == once
    assert once is not None
    (call,) = once.calls
    assert (call.status, call.result, call.decision) == (
        "succeeded",
        "paid",
        CallDecision(approve=True),
    )
