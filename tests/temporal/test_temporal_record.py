"""The record activity mirrors a run's writes to the app's store; a retry replays them all.

Host answers are final in a store, so replaying an answer the mirrored record has already
moved past must not fail the activity forever: the workflow decided it, the store has it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pgkit  # noqa: E402
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
from steadyrun.stores import MemoryStore, PostgresStore, SqliteStore, Store  # noqa: E402
from steadyrun.temporal import TemporalApp  # noqa: E402
from steadyrun.temporal._activities import Activities  # noqa: E402
from steadyrun.temporal._payloads import RecordInput, RecordOp, update_to_plain  # noqa: E402

DATA = Path(__file__).with_name("data")


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


pg_dsn = pgkit.database_fixture(prefix="steadyrun_record")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_replayed_batch_of_a_recorded_run_lands_on_sql_stores(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``order-00079`` (scale.py, Temporal, 1 worker, a SIGKILL every 5 s, every second run
    approved; 4 of 100 runs stuck so): the record activity's inputs from its history. The
    third batch (the suspended step, the decision, the charge and its result) was applied once
    by a worker that was then killed; its retry replays every write and fails at the update of
    the approved call: "the result of call 'm2.c1' lie in part 0 of message 4 of segment 0 of
    the log, which does not hold them": the retry of an earlier step deleted the log after it
    while a later call row still referred there."""
    batches = json.loads((DATA / "scale_record_batches_00079.json").read_text())
    store: Store = (
        SqliteStore(tmp_path / "runs.db")
        if kind == "sqlite"
        else PostgresStore(request.getfixturevalue("pg_dsn"))
    )
    activities = Activities(TemporalApp(agents=[], store=store))

    def batch(plain: dict[str, Any]) -> RecordInput:
        return RecordInput(run_id=plain["run_id"], ops=[RecordOp(**op) for op in plain["ops"]])

    try:
        for plain in batches:
            await activities.record(batch(plain))
        run_id = batches[-1]["run_id"]
        once = await store.load(run_id)
        await activities.record(batch(batches[-1]))  # a retry replays every write
        assert await store.load(run_id) == once
    finally:
        await store.close()


class _CountedLeases:
    """The store's leases, counting ``holder`` reads (one round trip each on PostgreSQL)."""

    def __init__(self, leases: Any) -> None:
        self.inner = leases
        self.reads = 0

    async def holder(self, run_id: str) -> Any:
        self.reads += 1
        return await self.inner.holder(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_the_claim_is_read_once_per_run_and_taken_again_when_lost() -> None:
    store = MemoryStore()
    await store.save_step("r", Step(run=RunRecord(run_id="r", agent="a"), checkpoint=Checkpoint()))
    counted = _CountedLeases(store.leases)
    store.leases = counted  # type: ignore[assignment]
    activities = Activities(TemporalApp(agents=[], store=store))

    def save(rev: int) -> RecordInput:
        call = CallRecord(id="c1", name="pay", rev=rev, status="running")
        return RecordInput(run_id="r", ops=[_save(call)])

    for rev in (1, 2, 3):
        await activities.record(save(rev))
    assert counted.reads == 1  # the run's claim is the workflow's for good: read once
    # Someone else takes the run (a delete and a new start, a built-in worker that should
    # not have): the cached fence is refused, the claim is taken again, the write lands.
    await store.leases.revoke("r", "worker:elsewhere", 60.0)
    await activities.record(save(4))
    snap = await store.load("r")
    assert snap is not None and snap.calls[0].rev == 4
    assert counted.reads == 2
