"""Checks of claims: one executor per run, fenced writes, expiry and takeover, wake-ups.

A store's ``leases`` hold, per run, the claim of the one executor allowed to execute it. The
checks take claims directly and write under their fences (``fenced``), as ``Runtime`` and the
worker do.
"""

from __future__ import annotations

import asyncio

from steadyrun.chat import Message
from steadyrun.records import CallDecision, CallUpdate, Checkpoint, ContextChange
from steadyrun.stores import FeedMessage, LeaseLostError, Store
from steadyrun.stores._leases import fenced
from steadyrun.testing.conformance._expect import expect_equal, expect_raises, fail
from steadyrun.testing.conformance._records import RUN, call, load, run_row, step
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("claims")
"""The claims checks, in order."""

_TTL = 30.0
_SHORT = 0.2
"""A ttl that runs out within a check (seconds)."""


@CHECKS.rule("one_holder_at_a_time")
async def one_holder_at_a_time(store: Store) -> None:
    """While a claim is held and unexpired, nobody else acquires it; its holder is reported."""
    leases = store.leases
    first = await leases.acquire(RUN, "a", _TTL)
    if first is None:
        fail("acquiring the claim of a run nobody holds gave None")
    expect_equal(await leases.acquire(RUN, "b", _TTL), None, "a second acquire while held")
    holder = await leases.holder(RUN)
    if holder is None or holder.owner != "a" or holder.token != first.token:
        fail(f"holder() while 'a' holds token {first.token}: got {holder!r}")
    await leases.release(first)
    expect_equal(await leases.holder(RUN), None, "holder() after release")
    second = await leases.acquire(RUN, "b", _TTL)
    if second is None or second.token <= first.token:
        fail(f"the next holder's token must grow past {first.token}: got {second!r}")


@CHECKS.rule("racing_acquires_one_wins")
async def racing_acquires_one_wins(store: Store) -> None:
    """Of many executors acquiring one claim at once, exactly one gets it."""
    leases = store.leases
    for round_ in range(5):
        run_id = f"race-{round_}"
        got = await asyncio.gather(*(leases.acquire(run_id, f"e{i}", _TTL) for i in range(6)))
        held = [lease for lease in got if lease is not None]
        expect_equal(len(held), 1, f"acquires of {run_id} that succeeded")


@CHECKS.rule("expired_claim_is_taken_over")
async def expired_claim_is_taken_over(store: Store) -> None:
    """A claim not renewed within its ttl can be acquired; the old holder can no longer renew."""
    leases = store.leases
    old = await leases.acquire(RUN, "dead", _SHORT)
    assert old is not None
    await asyncio.sleep(_SHORT * 2)
    new = await leases.acquire(RUN, "next", _TTL)
    if new is None:
        fail(f"a claim expired {_SHORT} s ago could not be acquired")
    expect_equal(await leases.renew(old, _TTL), False, "renewing the taken-over claim")
    expect_equal(await leases.renew(new, _TTL), True, "renewing the live claim")


@CHECKS.rule("fenced_writes_of_a_lost_claim_are_refused")
async def fenced_writes_of_a_lost_claim_are_refused(store: Store) -> None:
    """save_step and save_call under a fence whose claim was taken raise and change nothing."""
    leases = store.leases
    old = await leases.acquire(RUN, "old", _TTL)
    assert old is not None
    with fenced(old.fence):
        await store.save_step(RUN, step(calls=[call("c1", status="queued")]))
    before = (await load(store)).run.steps
    await leases.revoke(RUN, "new", _TTL)
    started = call("c1", rev=2, status="running")
    with fenced(old.fence):
        with expect_raises(LeaseLostError, "save_call of a lost claim"):
            await store.save_call(RUN, started)
        later = step(run=run_row(steps=before + 1), calls=[call("c2", status="queued")])
        with expect_raises(LeaseLostError, "save_step of a lost claim"):
            await store.save_step(RUN, later)
    snap = await load(store)
    expect_equal([(c.id, c.status) for c in snap.calls], [("c1", "queued")], "calls after")
    expect_equal(snap.run.steps, before, "steps after the refused step")


@CHECKS.rule("a_step_with_call_starts_of_a_lost_claim_writes_nothing")
async def a_step_with_call_starts_of_a_lost_claim_writes_nothing(store: Store) -> None:
    """A step appending at a known position with call starts, under a lost fence: refused whole."""
    leases = store.leases
    old = await leases.acquire(RUN, "old", _TTL)
    assert old is not None
    first = ContextChange(append=[Message.user("hi")], start=0)
    with fenced(old.fence):
        await store.save_step(RUN, step(context=first, checkpoint=Checkpoint(context_length=1)))
    before = await load(store)
    await leases.revoke(RUN, "new", _TTL)
    later = step(
        run=run_row(steps=before.run.steps + 1),
        checkpoint=Checkpoint(context_length=2),
        context=ContextChange(append=[Message.user("asks")], start=1),
        calls=[call("c1", rev=2, status="running"), call("c2", rev=2, status="succeeded")],
    )
    with fenced(old.fence), expect_raises(LeaseLostError, "the step of a lost claim"):
        await store.save_step(RUN, later)
    expect_equal(await load(store), before, "the run after the refused step")


@CHECKS.rule("a_lost_claim_may_record_how_a_body_ended")
async def a_lost_claim_may_record_how_a_body_ended(store: Store) -> None:
    """save_call of a settled snapshot passes a lost fence: it starts nothing, it tells a fact."""
    leases = store.leases
    old = await leases.acquire(RUN, "old", _TTL)
    assert old is not None
    with fenced(old.fence):
        await store.save_step(RUN, step(calls=[call("c1", status="running")]))
    await leases.revoke(RUN, "canceller", _TTL)
    with fenced(old.fence):
        await store.save_call(RUN, call("c1", rev=2, status="succeeded", result="done"))
    calls = (await load(store)).calls
    expect_equal([(c.status, c.result) for c in calls], [("succeeded", "done")], "the outcome")


@CHECKS.rule("fence_covers_sub_agent_runs")
async def fence_covers_sub_agent_runs(store: Store) -> None:
    """A claim's fence also guards the writes of its sub-agent runs (``<run>/<call>``)."""
    leases = store.leases
    child = f"{RUN}/c1"
    old = await leases.acquire(RUN, "old", _TTL)
    assert old is not None
    with fenced(old.fence):
        await store.save_step(child, step(run=run_row(child)))
    await leases.revoke(RUN, "new", _TTL)
    what = "a sub-agent run's step under a lost claim"
    with fenced(old.fence), expect_raises(LeaseLostError, what):
        await store.save_step(child, step(run=run_row(child, steps=2)))


@CHECKS.rule("host_writes_wake_the_run")
async def host_writes_wake_the_run(store: Store) -> None:
    """Input and host answers written outside a run's execution make it runnable."""
    leases = store.leases
    await store.append(RUN, FeedMessage(id="m1", content="hi"))
    if RUN not in await leases.runnable(limit=100):
        fail("a run with new input is not runnable")
    lease = await leases.acquire(RUN, "w", _TTL)
    assert lease is not None
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable while claimed")
    with fenced(lease.fence):  # its own writes do not wake it again
        await store.save_step(RUN, step(calls=[call("c1", status="awaiting_decision")]))
        await store.append(RUN, FeedMessage(id="m2", content="own"))
    await leases.release(lease)
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable after release")
    await store.update_call(RUN, "c1", _decision())
    if RUN not in await leases.runnable(limit=100):
        fail("a decision written by the host does not make the run runnable")


@CHECKS.rule("a_dead_holders_run_stays_runnable")
async def a_dead_holders_run_stays_runnable(store: Store) -> None:
    """A claim taken with a wake-up leaves the run runnable once it expires unreleased."""
    leases = store.leases
    lease = await leases.acquire(RUN, "dies", _SHORT, wake=True)
    assert lease is not None
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable while held")
    await asyncio.sleep(_SHORT * 2)
    if RUN not in await leases.runnable(limit=100):
        fail("the run of an executor that died (its claim expired) is not runnable")
    other = await leases.acquire(RUN, "w", _TTL)
    assert other is not None
    await leases.release(other)
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable once handled")


@CHECKS.rule("dead_token_takes_only_that_claim")
async def dead_token_takes_only_that_claim(store: Store) -> None:
    """``acquire(dead_token=t)`` takes a live claim only while it still has token ``t``."""
    leases = store.leases
    first = await leases.acquire(RUN, "a", _TTL)
    assert first is not None
    second = await leases.revoke(RUN, "b", _TTL)
    stale = await leases.acquire(RUN, "c", _TTL, dead_token=first.token)
    expect_equal(stale, None, "acquire with the token of a claim already replaced")
    taken = await leases.acquire(RUN, "c", _TTL, dead_token=second.token)
    if taken is None or taken.token <= second.token:
        fail(f"acquire with the holder's own token {second.token} gave {taken!r}")


def _decision() -> CallUpdate:
    return CallUpdate(decision=CallDecision(approve=True))
