"""Checks of ``RunLifecycle``: deleting a run tree, and dumping and restoring it whole.

The tree every check builds: ``run-1`` with two calls, the sub-agent run ``run-1/c1`` (with a
call of its own and the sub-agent run ``run-1/c1/k1`` under it), input in ``run-1``'s feed
(some of it consumed), and neighbours whose ids a prefix match would confuse with it:
``run-10`` (and its ``run-10/c1``) and ``run_1`` (``_`` matches any character in ``LIKE``).
"""

from __future__ import annotations

import asyncio

from steadyrun._errors import ConflictError, ForeignEngineError, RunBusyError, UsageError
from steadyrun.chat import Message, TextPart
from steadyrun.records import ContextChange, RunSnapshot
from steadyrun.stores import FeedMessage, Store
from steadyrun.stores._leases import fenced
from steadyrun.stores._lifecycle import RunDump, RunLifecycle
from steadyrun.testing.conformance._expect import expect, expect_equal, expect_raises, fail
from steadyrun.testing.conformance._journal import _rich_step
from steadyrun.testing.conformance._records import (
    RUN,
    at,
    block,
    call,
    load,
    msg,
    run_row,
    step,
    user,
)
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS", "expect_same_run"]

CHECKS = CheckList("lifecycle")
"""The lifecycle checks, in order."""

CHILD = f"{RUN}/c1"
GRANDCHILD = f"{CHILD}/k1"
NEIGHBOURS = ("run-10", "run-10/c1", "run_1")
"""Runs a prefix match on ``run-1`` would wrongly take with it."""

_TTL = 30.0
_SHORT = 0.2


async def _build(store: Store) -> None:
    """The tree of the module docstring, and its neighbours."""
    await store.append(RUN, msg("m1"))
    await store.append(RUN, msg("m2"))
    await store.consume(RUN, 1)
    await store.save_step(
        RUN,
        step(
            run=run_row(status="suspended", steps=2, updated_at=at(3)),
            context=ContextChange(
                append=[user("hello"), Message(role="assistant", parts=[TextPart(text="on it")])]
            ),
            blocks=[block("b1", 0, text="on it"), block("b2", 1, kind="tool_call", call_id="c1")],
            calls=[
                call("c1", status="succeeded", result="delegated", started_at=at(1)),
                call("c2", rev=3, status="awaiting_decision", side_effects=True),
            ],
        ),
    )
    await store.save_step(
        CHILD,
        step(
            CHILD,
            run=run_row(CHILD, status="completed", text="child done", steps=1),
            context=ContextChange(append=[user("sub task")]),
            calls=[call("k1", status="succeeded", parent_id="c1")],
        ),
    )
    await store.save_step(
        GRANDCHILD, step(GRANDCHILD, run=run_row(GRANDCHILD, status="completed", steps=1))
    )
    await store.append(GRANDCHILD, msg("g1"))
    for other in NEIGHBOURS:
        await store.save_step(other, step(other, run=run_row(other), calls=[call("c1")]))
        await store.append(other, msg(f"{other}-m"))


def _lifecycle(store: Store) -> RunLifecycle:
    if not isinstance(store, RunLifecycle):
        fail("the store does not implement RunLifecycle")
    return store


async def _state(store: Store, run_id: str) -> tuple[RunSnapshot | None, int, list[str]]:
    """What a run looks like from outside: its snapshot, pending input and its messages."""
    snap = await store.load(run_id)
    last = await store.pending(run_id, 0)
    texts = [m.content for m in (await store.claim(run_id, last)).messages] if last else []
    return snap, last, texts


async def expect_same_run(left: Store, right: Store, run_id: str) -> None:
    """Raise ``AssertionError`` unless both stores hold the same run tree, field by field.

    It compares the trees as ``dump_run`` reads them (every run's row, checkpoint, context,
    calls in order and blocks; every feed's messages, numbers and consumed boundary) and, to
    check the dumps themselves, what ``load`` and the feed give for each run of the tree.
    """
    a = await _lifecycle(left).dump_run(run_id)
    b = await _lifecycle(right).dump_run(run_id)
    expect_equal(b, a, f"the dump of run {run_id!r}")
    if a is None:
        return
    for run_id_ in sorted({s.run.run_id for s in a.runs} | {f.run_id for f in a.feeds}):
        expect_equal(await _state(right, run_id_), await _state(left, run_id_), f"run {run_id_!r}")


@CHECKS.rule("delete_removes_the_run_tree_and_its_input")
async def delete_removes_the_run_tree_and_its_input(store: Store) -> None:
    """delete_run removes the run, its sub-agent runs and their feeds, and nothing else."""
    await _build(store)
    before = {other: await _state(store, other) for other in NEIGHBOURS}
    deleted = await _lifecycle(store).delete_run(RUN)
    expect_equal(deleted.runs, sorted([RUN, CHILD, GRANDCHILD]), "runs deleted")
    expect_equal(
        deleted.messages, 3, "input messages deleted (two of run-1, one of its grandchild)"
    )
    for gone in (RUN, CHILD, GRANDCHILD):
        expect_equal(await store.load(gone), None, f"load({gone!r}) after the delete")
        expect_equal(await store.pending(gone, 0), 0, f"input of {gone!r} after the delete")
        expect_equal(await store.load_call(gone, "c1"), None, f"a call of {gone!r} after")
    listed = [r.run_id for r in await store.list_runs(limit=100)]
    expect_equal(sorted(listed), sorted(NEIGHBOURS), "runs listed after the delete")
    for other in NEIGHBOURS:
        expect_equal(await _state(store, other), before[other], f"run {other!r} after the delete")
    # The id is free again: a new run of that id starts from nothing, input numbered from 1.
    again = await store.append(RUN, msg("m1"))
    expect_equal(again.seq, 1, "seq of the first input appended after the delete")


@CHECKS.rule("delete_of_nothing_changes_nothing")
async def delete_of_nothing_changes_nothing(store: Store) -> None:
    """delete_run of an id the store holds nothing of deletes nothing and raises nothing."""
    await _build(store)
    deleted = await _lifecycle(store).delete_run("nobody")
    expect_equal((deleted.runs, deleted.messages, deleted.found), ([], 0, False), "the result")
    expect_equal(len(await store.list_runs(limit=100)), 6, "runs left")


@CHECKS.rule("delete_of_a_run_not_started_yet")
async def delete_of_a_run_not_started_yet(store: Store) -> None:
    """A run that has input and no row yet (never executed) is deleted: its input goes."""
    await store.append(RUN, msg("m1"))
    await store.append(RUN, msg("m2"))
    deleted = await _lifecycle(store).delete_run(RUN)
    expect_equal((deleted.runs, deleted.messages, deleted.found), ([], 2, True), "the result")
    expect_equal(await store.pending(RUN, 0), 0, "input after the delete")


@CHECKS.rule("delete_of_a_claimed_run_is_refused")
async def delete_of_a_claimed_run_is_refused(store: Store) -> None:
    """While another executor holds the run's claim, delete_run raises RunBusyError: no change."""
    await _build(store)
    held = await store.leases.acquire(RUN, "executor-a", _TTL)
    assert held is not None
    for target in (RUN, CHILD):  # the root's claim covers its sub-agent runs
        with expect_raises(RunBusyError, f"delete_run({target!r}) of a claimed run"):
            await _lifecycle(store).delete_run(target)
    expect(await store.load(RUN) is not None, "the run survives a refused delete")
    expect(await store.load(CHILD) is not None, "the sub-agent run survives a refused delete")
    expect_equal(await store.pending(RUN, 0), 2, "the input survives a refused delete")
    holder = await store.leases.holder(RUN)
    expect_equal(holder.owner if holder else None, "executor-a", "the claim's holder after")
    await store.leases.release(held)
    deleted = await _lifecycle(store).delete_run(RUN)
    expect_equal(deleted.runs, sorted([RUN, CHILD, GRANDCHILD]), "runs deleted once released")


@CHECKS.rule("delete_after_the_claim_expired")
async def delete_after_the_claim_expired(store: Store) -> None:
    """A claim whose holder stopped renewing it no longer holds a delete back."""
    await _build(store)
    await store.leases.acquire(RUN, "dead", _SHORT)
    await asyncio.sleep(_SHORT * 2)
    deleted = await _lifecycle(store).delete_run(RUN)
    expect_equal(RUN in deleted.runs, True, "the run of an expired claim is deleted")


@CHECKS.rule("delete_under_the_runs_own_claim")
async def delete_under_the_runs_own_claim(store: Store) -> None:
    """The executor holding a run's claim may delete it (its fence is not another's claim)."""
    await _build(store)
    lease = await store.leases.acquire(RUN, "me", _TTL)
    assert lease is not None
    with fenced(lease.fence):
        deleted = await _lifecycle(store).delete_run(RUN)
    expect_equal(RUN in deleted.runs, True, "the run deleted under its own claim")
    await store.leases.release(lease)  # the claim went with the run: a no-op
    expect_equal(await store.leases.holder(RUN), None, "the claim after the delete")


@CHECKS.rule("delete_forgets_the_claim_wake_ups_and_step_log")
async def delete_forgets_the_claim_wake_ups_and_step_log(store: Store) -> None:
    """After delete_run the run is neither claimed nor runnable, and its step log is gone."""
    leases = store.leases
    await store.append(RUN, msg("m1"))
    lease = await leases.acquire(RUN, "w", _TTL, wake=True)
    assert lease is not None
    with fenced(lease.fence):
        await store.save_step(RUN, step(run=run_row(steps=1)))
    expect_equal(len(await leases.writers(RUN)), 1, "step log before the delete")
    await leases.release(lease, handled=False)
    expect(RUN in await leases.runnable(limit=100), "the run is runnable before the delete")
    await _lifecycle(store).delete_run(RUN)
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable after the delete")
    expect_equal(await leases.writers(RUN), [], "step log after the delete")
    expect_equal(await leases.holder(RUN), None, "holder after the delete")
    again = await leases.acquire(RUN, "next", _TTL)
    expect(again is not None, "the id of a deleted run can be claimed again")


@CHECKS.rule("delete_of_another_engines_run_is_refused")
async def delete_of_another_engines_run_is_refused(store: Store) -> None:
    """A run another engine (Temporal) holds for good is refused with ForeignEngineError."""
    await _build(store)
    await store.leases.acquire(RUN, "engine:temporal:wf-1", _TTL)
    with expect_raises(ForeignEngineError, "delete_run of a run Temporal executes"):
        await _lifecycle(store).delete_run(RUN)
    expect(await store.load(RUN) is not None, "the run survives")


@CHECKS.rule("dump_and_restore_round_trip")
async def dump_and_restore_round_trip(store: Store) -> None:
    """A dumped tree, deleted and restored, loads and feeds back exactly as it was."""
    await _build(store)
    runs = (RUN, CHILD, GRANDCHILD)
    before = {run_id: await _state(store, run_id) for run_id in runs}
    dump = await _lifecycle(store).dump_run(RUN)
    if dump is None:
        fail("dump_run of a stored run returned None")
    expect_equal([s.run.run_id for s in dump.runs], list(runs), "runs of the dump, in order")
    expect_equal([f.run_id for f in dump.feeds], [RUN, GRANDCHILD], "feeds of the dump")
    feed = dump.feeds[0]
    expect_equal(([m.seq for m in feed.messages], feed.consumed), ([1, 2], 1), "run-1's feed")
    await _lifecycle(store).delete_run(RUN)
    await _lifecycle(store).restore_run(dump)
    for run_id in runs:
        expect_equal(await _state(store, run_id), before[run_id], f"run {run_id!r} restored")
    expect_equal(await _lifecycle(store).dump_run(RUN), dump, "the dump of the restored tree")
    snap = await load(store)
    expect_equal([c.id for c in snap.calls], ["c1", "c2"], "call order after the restore")
    # The restored feed goes on where it stopped: numbers, deduplication, consumed boundary.
    expect_equal((await store.append(RUN, msg("m2"))).seq, 2, "a restored message sent again")
    expect_equal((await store.append(RUN, msg("m3"))).seq, 3, "the next new message")
    expect_equal(await store.pending(RUN, 0), 3, "pending after the restore")
    claim = await store.claim(RUN, 3)
    expect_equal([m.id for m in claim.messages], ["m2", "m3"], "unconsumed input after it")


@CHECKS.rule("dump_and_restore_keep_every_field")
async def dump_and_restore_keep_every_field(store: Store) -> None:
    """Every field of a run's row, checkpoint, context, calls and blocks survives the trip."""
    await store.save_step(RUN, _rich_step())
    before = await load(store)
    dump = await _lifecycle(store).dump_run(RUN)
    assert dump is not None
    expect_equal(dump.runs, [before], "the dump's run, as load returns it")
    await _lifecycle(store).delete_run(RUN)
    await _lifecycle(store).restore_run(dump)
    expect_equal(await load(store), before, "the restored run")


@CHECKS.rule("restore_carries_unhandled_wake_ups")
async def restore_carries_unhandled_wake_ups(store: Store) -> None:
    """A run with wake-ups no executor handled is runnable again once restored; others not."""
    leases = store.leases
    await _build(store)  # its input woke it
    dump = await _lifecycle(store).dump_run(RUN)
    assert dump is not None
    expect_equal(dump.woken, True, "woken, in the dump of a run with input nobody handled")
    await _lifecycle(store).delete_run(RUN)
    await _lifecycle(store).restore_run(dump)
    expect(RUN in await leases.runnable(limit=100), "the restored run is runnable")
    lease = await leases.acquire(RUN, "w", _TTL)
    assert lease is not None
    await leases.release(lease)  # handled
    handled = await _lifecycle(store).dump_run(RUN)
    assert handled is not None
    expect_equal(handled.woken, False, "woken, in the dump of a run whose wake-ups were handled")
    await _lifecycle(store).delete_run(RUN)
    await _lifecycle(store).restore_run(handled)
    expect_equal(RUN in await leases.runnable(limit=100), False, "runnable once restored")


@CHECKS.rule("dump_of_a_run_not_started_yet")
async def dump_of_a_run_not_started_yet(store: Store) -> None:
    """A run with input and no row dumps as its feed alone, and restores as such."""
    await store.append(RUN, FeedMessage(id="m1", content="start", meta={"k": "v"}))
    dump = await _lifecycle(store).dump_run(RUN)
    if dump is None:
        fail("dump_run of a run with input only returned None")
    expect_equal((dump.runs, [f.run_id for f in dump.feeds]), ([], [RUN]), "the dump")
    await _lifecycle(store).delete_run(RUN)
    await _lifecycle(store).restore_run(dump)
    claim = await store.claim(RUN, await store.pending(RUN, 0))
    expect_equal([(m.id, m.meta) for m in claim.messages], [("m1", {"k": "v"})], "input")


@CHECKS.rule("dump_of_nothing_is_none")
async def dump_of_nothing_is_none(store: Store) -> None:
    """dump_run of an id the store holds nothing of returns None."""
    await _build(store)
    expect_equal(await _lifecycle(store).dump_run("nobody"), None, "dump_run('nobody')")


@CHECKS.rule("restore_refuses_runs_that_exist")
async def restore_refuses_runs_that_exist(store: Store) -> None:
    """restore_run raises ConflictError when a run of the tree exists, and writes nothing."""
    await _build(store)
    dump = await _lifecycle(store).dump_run(RUN)
    assert dump is not None
    with expect_raises(ConflictError, "restore_run over the stored tree"):
        await _lifecycle(store).restore_run(dump)
    await _lifecycle(store).delete_run(GRANDCHILD)  # the rest of the tree is still there
    with expect_raises(ConflictError, "restore_run over part of the tree"):
        await _lifecycle(store).restore_run(dump)
    expect_equal(await store.load(GRANDCHILD), None, "the missing run after a refused restore")
    await _lifecycle(store).delete_run(RUN)
    await store.append(RUN, msg("other"))  # input of a new run under that id
    with expect_raises(ConflictError, "restore_run over a run with input"):
        await _lifecycle(store).restore_run(dump)
    expect_equal(await store.load(RUN), None, "the run after a refused restore")


@CHECKS.rule("restore_keeps_to_its_tree")
async def restore_keeps_to_its_tree(store: Store) -> None:
    """A dump naming a run outside its own tree is refused before anything is written."""
    await _build(store)
    dump = await _lifecycle(store).dump_run(RUN)
    assert dump is not None
    await _lifecycle(store).delete_run(RUN)
    stray = RunDump(run_id="run-1", runs=list(dump.runs), feeds=list(dump.feeds))
    stray.runs[1].run.run_id = "run-2/c1"
    with expect_raises(UsageError, "restore_run of a dump holding another tree's run"):
        await _lifecycle(store).restore_run(stray)
    expect_equal(await store.load(RUN), None, "the run after the refused restore")
