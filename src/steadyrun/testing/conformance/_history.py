"""Checks of ``StepHistory``: every step listed, the context after each, and forks from them.

The first checks write steps directly, as the runtime does; the last runs a real run with a
side-effecting tool on the store and forks it (``Runtime.fork`` reads the store's history,
the run's snapshot and its context at the step, and writes the fork as one step).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from steadyrun._errors import StoreError
from steadyrun.chat import Message, ModelRequest, ModelResponse, TextPart, ToolResultPart, Usage
from steadyrun.records import Checkpoint, ContextChange, Step
from steadyrun.records._history import StepCall, StepEntry
from steadyrun.runtime import Agent, Runtime
from steadyrun.stores import LeaseLostError, Store
from steadyrun.stores._history import StepHistory
from steadyrun.stores._leases import fenced
from steadyrun.stores._lifecycle import RunLifecycle
from steadyrun.testing._models import FunctionModel, text, tool_calls
from steadyrun.testing.conformance._expect import expect, expect_equal, expect_raises, fail
from steadyrun.testing.conformance._records import RUN, at, call, load, run_row, step, user
from steadyrun.testing.conformance._registry import CheckList
from steadyrun.tools import ToolContext, tool

__all__ = ["CHECKS"]

CHECKS = CheckList("history")
"""The history checks, in order."""

_TTL = 30.0


def _numbered(n: int, run: dict[str, Any] | None = None, **fields: Any) -> Step:
    """A step of ``RUN`` numbered ``n``, saved at ``at(n)``; ``run``: more run row fields."""
    return step(run=run_row(steps=n, updated_at=at(n), **(run or {})), **fields)


def _history(store: Store) -> StepHistory:
    if not isinstance(store, StepHistory):  # the runner checks the port; mypy cannot know
        fail("the store does not implement StepHistory")
    return store


async def _context(store: Store, number: int, run_id: str = RUN) -> list[Message] | None:
    return await _history(store).context_at(run_id, number)


@CHECKS.rule("every_step_is_listed")
async def every_step_is_listed(store: Store) -> None:
    """Each saved step has an entry: number, time, status, checkpoint, usage, its calls."""
    a, b, c = user("a"), Message(role="assistant", parts=[TextPart(text="b")]), user("c")
    first = Checkpoint(phase="model", turn=1, context_length=1, seen_inputs=["i@1"])
    second = Checkpoint(phase="batch", turn=1, model_calls=1, batch=["c1"], context_length=2)
    third = Checkpoint(phase="model", turn=1, model_calls=1, context_length=3, extra={"k": [1]})
    usage = Usage(requests=1, input_tokens=7)
    await store.save_step(RUN, _numbered(1, checkpoint=first, context=_append(a)))
    await store.save_step(
        RUN,
        _numbered(
            2,
            run={"usage": usage},
            checkpoint=second,
            context=_append(b),
            calls=[call("c1", status="queued"), call("c2", status="failed", error="no")],
        ),
    )
    await store.save_call(RUN, call("c1", rev=2, status="succeeded", result="ok"))
    await store.save_step(
        RUN, _numbered(3, run={"usage": usage}, checkpoint=third, context=_append(c))
    )
    entries = await _history(store).history(RUN)
    expected = [
        StepEntry(step=1, at=at(1), segment=0, start=0, checkpoint=first),
        StepEntry(
            step=2,
            at=at(2),
            start=1,
            calls=[StepCall(id="c1", status="queued"), StepCall(id="c2", status="failed")],
            usage=usage,
            checkpoint=second,
        ),
        StepEntry(step=3, at=at(3), start=2, usage=usage, checkpoint=third),
    ]
    expect_equal(entries, expected, "history of three steps")
    expect_equal(await _context(store, 1), [a], "context after step 1")
    expect_equal(await _context(store, 2), [a, b], "context after step 2")
    expect_equal(await _context(store, 3), [a, b, c], "context after step 3")


@CHECKS.rule("context_of_a_step_survives_rewrites")
async def context_of_a_step_survives_rewrites(store: Store) -> None:
    """A rewrite keeps the contexts of earlier steps; each step reads its own segment."""
    a, b, c, d, e = (user(x) for x in "abcde")
    s = Message(role="system", parts=[TextPart(text="summary of a, b, c")])
    t = Message(role="system", parts=[TextPart(text="summary of s, d, e")])
    plan = [
        (ContextChange(append=[a, b]), [a, b]),
        (ContextChange(append=[c]), [a, b, c]),
        (ContextChange(base=[s], append=[d]), [s, d]),
        (ContextChange(append=[e]), [s, d, e]),
        (ContextChange(base=[t]), [t]),
        (ContextChange(), [t]),
    ]
    for n, (change, after) in enumerate(plan, start=1):
        cp = Checkpoint(context_length=len(after))
        await store.save_step(RUN, _numbered(n, checkpoint=cp, context=change))
    for n, (_, after) in enumerate(plan, start=1):
        expect_equal(await _context(store, n), after, f"context after step {n}")
    entries = await _history(store).history(RUN)
    expect_equal([e.rewrote for e in entries], [False, False, True, False, True, False], "rewrote")
    expect_equal([e.segment for e in entries], [0, 0, 1, 1, 2, 2], "segments")
    expect_equal([e.start for e in entries], [0, 2, 0, 2, 0, 1], "first positions")
    expect_equal((await load(store)).context, [t], "the current context")


@CHECKS.rule("step_saved_again_replaces_its_entry")
async def step_saved_again_replaces_its_entry(store: Store) -> None:
    """A step saved again (a retry) has one entry, and a rewrite saved again archives once."""
    a, b, s = user("a"), user("b"), user("s")
    await store.save_step(
        RUN, _numbered(1, checkpoint=Checkpoint(context_length=1), context=_append(a))
    )
    again = _numbered(
        2,
        checkpoint=Checkpoint(context_length=2),
        context=ContextChange(append=[b], start=1),
    )
    await store.save_step(RUN, again)
    await store.save_step(RUN, replace(again, run=run_row(steps=2, updated_at=at(9))))
    rewrite = _numbered(3, checkpoint=Checkpoint(context_length=1), context=ContextChange(base=[s]))
    await store.save_step(RUN, rewrite)
    await store.save_step(RUN, rewrite)
    entries = await _history(store).history(RUN)
    expect_equal([(e.step, e.at) for e in entries], [(1, at(1)), (2, at(9)), (3, at(3))], "steps")
    expect_equal(await _context(store, 2), [a, b], "context of step 2 after the retries")
    expect_equal(await _context(store, 3), [s], "context of the rewrite saved twice")


@CHECKS.rule("unknown_runs_and_steps")
async def unknown_runs_and_steps(store: Store) -> None:
    """An unknown run has an empty history; the context of a step not listed is ``None``."""
    expect_equal(await _history(store).history("never-saved"), [], "history of an unknown run")
    expect_equal(await _context(store, 1, "never-saved"), None, "context_at of an unknown run")
    await store.save_step(RUN, _numbered(1, context=_append(user("a"))))
    expect_equal(await _context(store, 2), None, "context_at of a step not saved")


@CHECKS.rule("a_refused_step_leaves_no_entry")
async def a_refused_step_leaves_no_entry(store: Store) -> None:
    """A step refused (a lost claim) or failed (a gap in the log) writes no entry."""
    leases = store.leases
    old = await leases.acquire(RUN, "old", _TTL)
    assert old is not None
    with fenced(old.fence):
        await store.save_step(
            RUN, _numbered(1, checkpoint=Checkpoint(context_length=1), context=_append())
        )
    await leases.revoke(RUN, "new", _TTL)
    with fenced(old.fence), expect_raises(LeaseLostError, "save_step of a lost claim"):
        await store.save_step(RUN, _numbered(2, context=_append(user("late"))))
    gap = ContextChange(append=[user("far")], start=5)
    with expect_raises(StoreError, "save_step leaving a gap in the log"):
        await store.save_step(RUN, _numbered(3, context=gap))
    entries = await _history(store).history(RUN)
    expect_equal([e.step for e in entries], [1], "entries after a refused and a failed step")


@CHECKS.rule("runs_are_kept_apart")
async def runs_are_kept_apart(store: Store) -> None:
    """The history of a run holds its own steps only, whatever the neighbours' ids."""
    for run_id in (RUN, "run-10", "run_1"):
        for n in (1, 2):
            await store.save_step(run_id, step(run_id, run=run_row(run_id, steps=n)))
    await store.save_step(RUN, step(run=run_row(steps=3)))
    entries = await _history(store).history(RUN)
    expect_equal([e.step for e in entries], [1, 2, 3], "steps of run-1")
    expect_equal(len(await _history(store).history("run-10")), 2, "steps of run-10")


@CHECKS.rule("an_ending_is_kept")
async def an_ending_is_kept(store: Store) -> None:
    """A step that completes or fails the run keeps the run row's text or error with it."""
    await store.save_step(RUN, _numbered(1))
    await store.save_step(RUN, _numbered(2, run={"status": "completed", "text": "all done"}))
    failed = run_row(steps=3, status="failed", error_kind="ModelCallFailed", error="boom")
    await store.save_step(RUN, step(run=failed))
    entries = await _history(store).history(RUN)
    expect(entries[0].ending is None, "an entry of a running step has no ending")
    ending = entries[1].ending
    expect(ending is not None and ending.text == "all done", f"completed step: {ending!r}")
    ending = entries[2].ending
    expect(ending is not None and ending.error == "boom", f"failed step: {ending!r}")
    expect_equal([e.status for e in entries], ["running", "completed", "failed"], "statuses")


@CHECKS.rule("deleted_with_its_run")
async def deleted_with_its_run(store: Store) -> None:
    """Deleting a run (``RunLifecycle``) deletes its history; a new run of that id starts anew."""
    if not isinstance(store, RunLifecycle):
        return  # nothing deletes runs in this store
    one = Checkpoint(context_length=1)
    await store.save_step(RUN, _numbered(1, checkpoint=one, context=_append()))
    await store.save_step(
        RUN, _numbered(2, checkpoint=one, context=ContextChange(base=[user("s")]))
    )
    await store.delete_run(RUN)
    expect_equal(await _history(store).history(RUN), [], "history of a deleted run")
    expect_equal(await _context(store, 1), None, "context_at of a deleted run")
    await store.save_step(RUN, _numbered(1, checkpoint=one, context=_append(user("b"))))
    expect_equal([e.step for e in await _history(store).history(RUN)], [1], "steps of the new run")
    expect_equal(await _context(store, 1), [user("b")], "context of the new run's step")


@CHECKS.rule("a_fork_starts_from_a_step")
async def a_fork_starts_from_a_step(store: Store) -> None:
    """``Runtime.fork`` at a step: the original's context then, its effects not run again."""
    ledger: list[tuple[str, int]] = []

    @tool(side_effects=True)
    def ship(order: int, ctx: ToolContext) -> str:
        """Ship an order.

        Args:
            order: The order.
            ctx: The call's context: its run.
        """
        ledger.append((ctx.run_id, order))
        return f"shipped {order}"

    def respond(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages for p in m.parts if isinstance(p, ToolResultPart))
        return tool_calls(("ship", {"order": done + 1})) if done < 3 else text("done")

    agent = Agent(name="shipper", model=FunctionModel(respond), tools=[ship])
    runtime = Runtime(store, agents=[agent])
    await runtime.run(agent, run_id=RUN, input="Ship three orders.")
    original = await load(store)
    expect_equal(original.run.steps, 8, "steps of the run (input, 3 x 2, answer)")
    # Step 4: the model asked for order 2; the original shipped it after that step.
    forked = await runtime.fork(RUN, at=4, new_run_id="fork-1")
    expect_equal((forked.status, forked.created), ("suspended", True), "the fork made")
    expect_equal(await load(store), original, "the original after the fork")
    fork = await load(store, "fork-1")
    expect_equal(fork.context, await _context(store, 4), "the fork's context")
    expect_equal([c.status for c in fork.calls], ["succeeded", "cancelled"], "its calls")
    result = await runtime.resume("fork-1")
    expect_equal(result.text, "done", "the fork's answer")
    shipped = [(RUN, 1), (RUN, 2), (RUN, 3), ("fork-1", 3)]
    expect_equal(ledger, shipped, "every shipment (the fork's model counts the cancelled call)")
    expect_equal(await load(store), original, "the original after the fork ran")


def _append(*messages: Message) -> ContextChange:
    return ContextChange(append=list(messages) or [user("a")])
