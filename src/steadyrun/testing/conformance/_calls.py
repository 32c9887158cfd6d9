"""Checks of call records: ``merge_call`` on every write path, ``update_call``, concurrency."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from dataclasses import replace

from steadyrun._errors import CallNotFoundError, StoreError
from steadyrun.chat import MediaRef
from steadyrun.records import (
    CallCompletion,
    CallDecision,
    CallRecord,
    CallUpdate,
    Checkpoint,
    ContextChange,
    InputRequest,
    merge_call,
)
from steadyrun.stores import Store
from steadyrun.testing.conformance._expect import expect_equal, expect_raises
from steadyrun.testing.conformance._records import (
    RUN,
    at,
    block,
    by_id,
    call,
    load,
    run_row,
    step,
    user,
)
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("journal")
"""The journal checks of call records, in order."""

_REF = MediaRef(key="media/2", mime="text/csv", size=10)


async def _only_call(store: Store, call_id: str = "c1") -> CallRecord:
    calls = by_id((await load(store)).calls)
    if call_id not in calls:
        raise AssertionError(f"call {call_id!r} is missing after it was saved")
    return calls[call_id]


def _fold(writes: Iterable[CallRecord]) -> dict[str, CallRecord]:
    # What a store holds after these snapshots, applied in rev order.
    out: dict[str, CallRecord] = {}
    for write in sorted(writes, key=lambda c: c.rev):
        out[write.id] = merge_call(out.get(write.id), write)
    return out


def _progress(call_id: str, rev: int, settle_at: int) -> CallRecord:
    # Snapshot ``rev`` of a call that is queued, runs, and settles at ``settle_at`` for good.
    # Applied in any order, such snapshots leave the one with the highest rev.
    notes = {"rev": str(rev)}
    if rev == 1:
        return call(call_id, rev=1, status="queued", notes=notes)
    if rev < settle_at:
        return call(call_id, rev=rev, status="running", started_at=at(1), notes=notes)
    return call(
        call_id,
        rev=rev,
        status="succeeded",
        result=f"{call_id} done",
        started_at=at(1),
        completed_at=at(60),
        notes=notes,
    )


@CHECKS.rule("save_call_ignores_older_rev")
async def save_call_ignores_older_rev(store: Store) -> None:
    """A snapshot whose rev is not above the stored one changes nothing."""
    stored = call(rev=3, status="running", started_at=at(1), notes={"n": "3"})
    await store.save_step(RUN, step(calls=[stored]))
    await store.save_call(RUN, call(rev=2, status="succeeded", result="late", notes={"n": "2"}))
    await store.save_call(RUN, call(rev=3, status="failed", error="same rev", arguments="{}"))
    expect_equal(await _only_call(store), stored, "call after save_call of rev 2 and rev 3")
    await store.save_step(RUN, step(calls=[call(rev=1, status="cancelled")]))
    expect_equal(await _only_call(store), stored, "call after a step carrying rev 1")


@CHECKS.rule("save_call_applies_newer_snapshot")
async def save_call_applies_newer_snapshot(store: Store) -> None:
    """A newer snapshot of an unsettled call replaces it; a new call id adds a record."""
    await store.save_step(RUN, step(calls=[call(rev=1)]))
    running = call(
        rev=2,
        status="running",
        started_at=at(1),
        arguments='{"q": 1}',
        model_call_id="mc1",
        provider_call_id="p1",
        replayable=True,
        notes={"progress": "half"},
    )
    await store.save_call(RUN, running)
    expect_equal(await _only_call(store), running, "call after a newer running snapshot")
    done = replace(
        running,
        rev=3,
        status="succeeded",
        result="ok",
        media=[_REF],
        completed_at=at(2),
        completion=CallCompletion(value={"total": 3}),
        notes={},
    )
    await store.save_call(RUN, done)
    added = call("c2", status="queued", parent_id="c1")
    await store.save_call(RUN, added)
    calls = by_id((await load(store)).calls)
    expect_equal(calls, {"c1": done, "c2": added}, "calls after a settling snapshot and a new call")


@CHECKS.rule("settled_outcome_is_final")
async def settled_outcome_is_final(store: Store) -> None:
    """Once settled (by the runtime or the host), newer snapshots change only descriptive fields."""
    await store.save_step(RUN, step(calls=[call(rev=1, status="running", started_at=at(1))]))
    failed = call(rev=2, status="failed", error="boom", started_at=at(1), completed_at=at(2))
    await store.save_call(RUN, failed)
    later = call(
        rev=3,
        status="running",
        result="late",
        started_at=at(5),
        arguments='{"changed": true}',
        notes={"n": "3"},
    )
    await store.save_step(RUN, step(calls=[later]))
    expected = replace(failed, rev=3, arguments='{"changed": true}', notes={"n": "3"})
    expect_equal(await _only_call(store), expected, "a failed call after a newer running step")
    # A status the runtime does not know is the host's own, and final too.
    await store.save_call(RUN, call("c2", rev=1, status="waiting", handover="await"))
    await store.update_call(RUN, "c2", CallUpdate(status="refunded", result="host result"))
    await store.save_call(RUN, call("c2", rev=2, status="running", handover="await"))
    expect_equal(
        await _only_call(store, "c2"),
        call("c2", rev=2, status="refunded", result="host result", handover="await"),
        "a host-settled call after a newer running snapshot",
    )


@CHECKS.rule("host_handover_is_kept")
async def host_handover_is_kept(store: Store) -> None:
    """After a host handover, newer snapshots only fill a missing payload and receipt."""
    await store.save_step(
        RUN, step(calls=[call(rev=1, status="running", started_at=at(1), side_effects=True)])
    )
    await store.update_call(RUN, "c1", CallUpdate(status="waiting", handover="detached"))
    for rev, job in ((2, 7), (3, 8)):
        snapshot = call(
            rev=rev,
            status="running",
            handover="detached",
            result=f"receipt-{job}",
            payload={"job": job},
            started_at=at(rev),
            completed_at=at(30),
            side_effects=True,
        )
        await store.save_call(RUN, snapshot)
    await store.save_call(RUN, call(rev=4, status="succeeded", result="x", side_effects=True))
    expected = call(
        rev=4,
        status="waiting",
        handover="detached",
        result="receipt-7",
        payload={"job": 7},
        started_at=at(1),
        side_effects=True,
    )
    expect_equal(await _only_call(store), expected, "a host-handed-over call after snapshots")


@CHECKS.rule("stored_decision_stays")
async def stored_decision_stays(store: Store) -> None:
    """A stored decision is never replaced by a snapshot; a snapshot's is taken only if none is."""
    await store.save_step(RUN, step(calls=[call(rev=1, status="awaiting_decision")]))
    decided = CallDecision(approve=True, reason="ok", decided_by="ops", decided_at=at(2))
    await store.update_call(RUN, "c1", CallUpdate(decision=decided))
    other = CallDecision(approve=False, reason="from a snapshot")
    await store.save_call(RUN, call(rev=2, status="running", decision=other))
    await store.save_call(RUN, call(rev=3, status="running"))
    expect_equal(
        await _only_call(store),
        call(rev=3, status="running", decision=decided),
        "a decided call after snapshots with another decision and none",
    )
    auto = CallDecision(approve=False, reason="auto")
    await store.save_call(RUN, call("c2", rev=1, status="awaiting_decision"))
    await store.save_call(RUN, call("c2", rev=2, status="rejected", decision=auto))
    await store.save_call(RUN, call("c2", rev=3, status="rejected", decision=other))
    expect_equal(
        (await _only_call(store, "c2")).decision, auto, "decision taken from the first snapshot"
    )


@CHECKS.rule("host_input_response_is_kept")
async def host_input_response_is_kept(store: Store) -> None:
    """A snapshot of the same wait without a response keeps the host's answer."""
    request = InputRequest(wait_id="w1", prompt="which?", state={"s": 1})
    await store.save_step(
        RUN, step(calls=[call(rev=1, status="awaiting_input", input_request=request)])
    )
    await store.update_call(RUN, "c1", CallUpdate(input_response={"choice": "a"}))
    await store.save_call(RUN, call(rev=2, status="running", input_request=request))
    expect_equal(
        (await _only_call(store)).input_request,
        replace(request, response={"choice": "a"}),
        "input request after a snapshot of the same wait",
    )
    fresh = InputRequest(wait_id="w2", prompt="and then?")
    await store.save_call(RUN, call(rev=3, status="awaiting_input", input_request=fresh))
    expect_equal((await _only_call(store)).input_request, fresh, "input request of a new wait")


@CHECKS.rule("older_step_snapshot_does_not_beat_save_call")
async def older_step_snapshot_does_not_beat_save_call(store: Store) -> None:
    """A step carrying an older snapshot of a call does not undo a newer ``save_call``."""
    await store.save_step(RUN, step(calls=[call(rev=1, status="running")]))
    newer = call(rev=3, status="succeeded", result="done", notes={"by": "save_call"})
    await store.save_call(RUN, newer)
    await store.save_step(
        RUN,
        step(
            run=run_row(steps=2),
            calls=[call(rev=2, status="running", notes={"by": "step"})],
            blocks=[block("b1", 0)],
        ),
    )
    snap = await load(store)
    expect_equal(snap.calls, [newer], "calls after a step with an older snapshot")
    expect_equal(snap.run, run_row(steps=2), "run row of that step (the rest of it applies)")


@CHECKS.rule("same_call_snapshot_twice_is_idempotent")
async def same_call_snapshot_twice_is_idempotent(store: Store) -> None:
    """Saving the same call snapshot twice (by ``save_call`` or in a step) changes nothing more."""
    await store.save_step(RUN, step(calls=[call(rev=1)]))
    snapshot = call(rev=2, status="running", started_at=at(1), notes={"a": "b"})
    await store.save_call(RUN, snapshot)
    once = await load(store)
    await store.save_call(RUN, snapshot)
    expect_equal(await load(store), once, "state after the same save_call twice")
    await store.save_step(RUN, step(calls=[snapshot]))
    expect_equal(await load(store), once, "state after a step with the same snapshot")


@CHECKS.rule("save_call_unknown_run_is_store_error")
async def save_call_unknown_run_is_store_error(store: Store) -> None:
    """``save_call`` for a run that was never saved raises StoreError and creates nothing."""
    with expect_raises(StoreError, "save_call for an unknown run"):
        await store.save_call("never-saved", call())
    expect_equal(await store.load("never-saved"), None, "load after that save_call")


@CHECKS.rule("update_call_overlays_host_write")
async def update_call_overlays_host_write(store: Store) -> None:
    """``update_call`` applies ``overlay_external``, keeps rev and the rest, returns the record."""
    request = InputRequest(wait_id="w1", prompt="?")
    submitted = call(
        rev=4,
        status="awaiting_decision",
        handover="submitted",
        arguments='{"a": 1}',
        started_at=at(1),
        replayable=True,
        notes={"k": "v"},
    )
    asking = call("c2", rev=2, status="awaiting_input", input_request=request)
    await store.save_step(RUN, step(calls=[submitted, asking]))
    decision = CallDecision(approve=True, decided_by="ops")
    out = await store.update_call(
        RUN,
        "c1",
        CallUpdate(
            status="succeeded",
            result="r",
            error=None,
            media=[_REF],
            completed_at=at(7),
            handover="detached",
            payload={"receipt": "x"},
            decision=decision,
        ),
    )
    expected = replace(
        submitted,
        status="succeeded",
        result="r",
        media=[_REF],
        completed_at=at(7),
        handover="detached",
        payload={"receipt": "x"},
        decision=decision,
    )
    expect_equal(out, expected, "record returned by update_call")
    expect_equal(await _only_call(store), expected, "record loaded after update_call")
    cleared = await store.update_call(RUN, "c1", CallUpdate(result=None, media=[]))
    expected = replace(expected, result=None, media=[])
    expect_equal(cleared, expected, "record after an update that clears result and media")
    expect_equal(await _only_call(store), expected, "record loaded after that update")
    answered = await store.update_call(
        RUN, "c2", CallUpdate(input_response={"answer": 1}, wait_id="w1")
    )
    asked = replace(asking, input_request=replace(request, response={"answer": 1}))
    expect_equal(answered, asked, "record returned for an answer")
    expect_equal(await _only_call(store, "c2"), asked, "record loaded after the answer")


@CHECKS.rule("update_call_unknown_is_call_not_found")
async def update_call_unknown_is_call_not_found(store: Store) -> None:
    """``update_call`` of an unknown run or call raises ``CallNotFoundError`` (a ``KeyError``)."""
    with expect_raises(CallNotFoundError, "update_call on an unknown run"):
        await store.update_call("never-saved", "c1", CallUpdate(status="succeeded"))
    await store.save_step(RUN, step(calls=[call()]))
    with expect_raises(CallNotFoundError, "update_call of an unknown call"):
        await store.update_call(RUN, "c9", CallUpdate(status="succeeded"))
    expect_equal((await load(store)).calls, [call()], "calls after those updates")


@CHECKS.rule("failed_call_write_keeps_record")
async def failed_call_write_keeps_record(store: Store) -> None:
    """A call write that cannot be encoded raises StoreError and leaves the record as it was."""
    await store.save_step(RUN, step(calls=[call(rev=1, status="waiting")]))
    before = await load(store)
    with expect_raises(StoreError, "save_call of a payload with no JSON form"):
        await store.save_call(RUN, call(rev=2, status="waiting", payload=object()))
    with expect_raises(StoreError, "update_call of a payload with no JSON form"):
        await store.update_call(RUN, "c1", CallUpdate(payload=object()))
    expect_equal(await load(store), before, "state after the failed writes")


@CHECKS.rule("concurrent_save_calls_of_different_calls")
async def concurrent_save_calls_of_different_calls(store: Store) -> None:
    """Concurrent ``save_call``s of different calls all land."""
    await store.save_step(RUN, step())
    writes = [call(f"c{i}", rev=i + 1, status="running", notes={"i": str(i)}) for i in range(20)]
    await asyncio.gather(*(store.save_call(RUN, w) for w in writes))
    expect_equal(by_id((await load(store)).calls), by_id(writes), "calls after concurrent writes")


@CHECKS.rule("concurrent_save_calls_of_one_call")
async def concurrent_save_calls_of_one_call(store: Store) -> None:
    """Concurrent snapshots of a call in any order leave ``merge_call`` folded in rev order."""
    await store.save_step(RUN, step())
    writes = [_progress(c, rev, settle_at=8) for c in ("c1", "c2", "c3") for rev in range(1, 13)]
    random.Random(20250102).shuffle(writes)
    await asyncio.gather(*(store.save_call(RUN, w) for w in writes))
    expect_equal(by_id((await load(store)).calls), _fold(writes), "calls after concurrent writes")


@CHECKS.rule("save_calls_race_with_steps")
async def save_calls_race_with_steps(store: Store) -> None:
    """``save_call``s racing with a run's steps lose nothing: calls fold, steps apply in order."""
    ids = ["c1", "c2", "c3", "c4"]
    first = [_progress(c, 1, settle_at=6) for c in ids]
    await store.save_step(RUN, step(calls=first, context=ContextChange(append=[user("start")])))
    rng = random.Random(7)
    writes = [_progress(c, rev, settle_at=6) for c in ids for rev in range(2, 11)]
    rng.shuffle(writes)
    steps = [
        step(
            run=run_row(steps=i + 2, updated_at=at(i + 1)),
            checkpoint=Checkpoint(turn=1, next_position=i + 1),
            context=ContextChange(append=[user(f"step {i}")]),
            blocks=[block(f"b{i}", i)],
            calls=[_progress(c, rng.randint(1, 10), settle_at=6) for c in rng.sample(ids, 2)],
        )
        for i in range(6)
    ]
    step_calls = [c for s in steps for c in s.calls]

    async def save_steps() -> None:
        for s in steps:
            await store.save_step(RUN, s)

    await asyncio.gather(save_steps(), *(store.save_call(RUN, w) for w in writes))
    snap = await load(store)
    expected = _fold([*first, *writes, *step_calls])
    expect_equal(by_id(snap.calls), expected, "calls after writes racing with steps")
    expect_equal(snap.context, [user("start"), *(user(f"step {i}") for i in range(6))], "context")
    expect_equal(snap.blocks, [block(f"b{i}", i) for i in range(6)], "blocks")
    expect_equal(snap.run, steps[-1].run, "run row (from the last step)")
    expect_equal(snap.checkpoint, steps[-1].checkpoint, "checkpoint (from the last step)")
