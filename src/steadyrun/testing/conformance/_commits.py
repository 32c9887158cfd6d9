"""Checks of a step that carries call records: the two writes of a loop iteration.

The runtime writes each iteration as two steps: the one after the model response, carrying the
starts of its calls (records the store has never seen), and the one after the calls, carrying
their settled records. A step and its calls are one atomic write; a step that fails part way
leaves neither.
"""

from __future__ import annotations

from typing import Any

from steadyrun._errors import StoreError
from steadyrun.chat import Message
from steadyrun.records import Checkpoint, ContextChange, Step
from steadyrun.stores import Store
from steadyrun.testing.conformance._expect import expect_equal, expect_raises
from steadyrun.testing.conformance._records import RUN, at, by_id, call, load, run_row, step, user
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("journal")
"""The checks of steps with call records, in order."""


def _step(steps: int, start: int, messages: list[Message], **fields: Any) -> Step:
    """Step number ``steps`` appending ``messages`` at ``start`` (a known context position)."""
    return step(
        run=run_row(steps=steps),
        checkpoint=Checkpoint(context_length=start + len(messages)),
        context=ContextChange(append=messages, start=start),
        **fields,
    )


@CHECKS.rule("step_carries_call_starts_and_settles")
async def step_carries_call_starts_and_settles(store: Store) -> None:
    """A step writes new call records (starts) and settled ones with its context, in one write."""
    await store.save_step(RUN, _step(1, 0, [user("hi")]))
    starts = [call("c1", rev=2, status="running", started_at=at(1)), call("c2", rev=1)]
    await store.save_step(RUN, _step(2, 1, [user("asks")], calls=starts))
    snap = await load(store)
    expect_equal(by_id(snap.calls), by_id(starts), "calls after the step with their starts")
    expect_equal([m.text for m in snap.context], ["hi", "asks"], "context after it")
    settled = [
        call("c1", rev=3, status="succeeded", result="ok", started_at=at(1), completed_at=at(2)),
        call("c2", rev=2, status="failed", error="no", completed_at=at(2)),
    ]
    await store.save_step(RUN, _step(3, 2, [user("results")], calls=settled))
    snap = await load(store)
    expect_equal(by_id(snap.calls), by_id(settled), "calls after the step that settles them")
    expect_equal(len(snap.context), 3, "context length after it")
    expect_equal(snap.run.steps, 3, "steps")


@CHECKS.rule("failed_step_writes_none_of_its_calls")
async def failed_step_writes_none_of_its_calls(store: Store) -> None:
    """A step that fails part way (a context gap) writes neither its run row nor its calls."""
    await store.save_step(RUN, _step(1, 0, [user("hi")], calls=[call("c1")]))
    before = await load(store)
    broken = _step(
        2,
        5,  # the log holds one message: position 5 leaves a gap
        [user("late")],
        calls=[call("c1", rev=2, status="running"), call("c2", rev=2, status="running")],
    )
    with expect_raises(StoreError, "a step whose context append leaves a gap"):
        await store.save_step(RUN, broken)
    expect_equal(await load(store), before, "the run after the failed step")
    expect_equal(await store.load_call(RUN, "c2"), None, "a call only that step carried")


@CHECKS.rule("step_at_a_known_position_again_replaces_itself")
async def step_at_a_known_position_again_replaces_itself(store: Store) -> None:
    """The same step saved twice (a retry) leaves its messages and calls once."""
    await store.save_step(RUN, _step(1, 0, [user("hi")]))
    again = _step(2, 1, [user("a"), user("b")], calls=[call("c1", rev=2, status="running")])
    await store.save_step(RUN, again)
    once = await load(store)
    await store.save_step(RUN, again)
    expect_equal(await load(store), once, "the run after the same step twice")
    expect_equal([m.text for m in once.context], ["hi", "a", "b"], "context")
