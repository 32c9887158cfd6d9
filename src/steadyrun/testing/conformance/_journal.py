"""Checks of ``Journal.save_step`` and ``Journal.load``: what a step writes and what loads back."""

from __future__ import annotations

import copy
from dataclasses import replace

from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import (
    MediaRef,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from steadyrun.records import (
    CallCompletion,
    CallDecision,
    Checkpoint,
    ContextChange,
    InputRequest,
    Step,
)
from steadyrun.stores import Store
from steadyrun.testing.conformance._expect import expect, expect_equal, expect_raises
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
"""The journal checks of steps and loads, in order."""

_REF = MediaRef(key="media/1", mime="image/png", size=3, sha256="ab12")


def _rich_step() -> Step:
    # A step that exercises every field a store has to keep.
    return step(
        run=run_row(
            status="suspended",
            usage=Usage(requests=2, input_tokens=30, output_tokens=7, cache_read_tokens=4),
            plan={"todo": ["look up", "answer"], "done": 1},
            created_at=at(0),
            updated_at=at(5),
            steps=1,
        ),
        checkpoint=Checkpoint(
            phase="batch",
            turn=1,
            iteration=2,
            model_calls=2,
            corrections=1,
            claimed_through=1,
            batch=["c1", "c2"],
            next_position=3,
            context_length=3,
            seen_inputs=["m1@1"],
            extra={"planning": {"items": [1, 2]}, "flag": True, "none": None},
        ),
        context=ContextChange(
            append=[
                Message.user("hello", id="m1", revision="1"),
                Message(
                    role="assistant",
                    parts=[
                        ThinkingPart(text="hmm", signature="sig"),
                        TextPart(text="let me look"),
                        ToolCallPart(call_id="p1", name="tool", arguments='{"q": "x"}'),
                    ],
                ),
                Message(
                    role="tool",
                    parts=[ToolResultPart(call_id="p1", name="tool", content="ok", media=[_REF])],
                ),
            ]
        ),
        blocks=[
            block("b3", 2, kind="tool_call", call_id="c2", model_call_id="mc1", turn=1),
            block("b1", 0, kind="thinking", text="hmm", model_call_id="mc1", turn=1),
            block("b2", 1, text="let me look", model_call_id="mc1", turn=1),
        ],
        calls=[
            call(
                "c1",
                rev=4,
                parent_id="d0",
                model_call_id="mc1",
                provider_call_id="p1",
                arguments='{"q": "x"}',
                status="awaiting_input",
                media=[_REF],
                started_at=at(1),
                replayable=True,
                side_effects=True,
                payload={"nested": [1, "two", {"three": 3.5}], "empty": []},
                decision=CallDecision(approve=True, reason="fine", decided_by="ops"),
                input_request=InputRequest(
                    wait_id="w1",
                    prompt="which one?",
                    response_schema={"type": "string"},
                    state={"page": 2},
                ),
                notes={"guard": "checked"},
            ),
            call(
                "c2",
                rev=2,
                status="succeeded",
                result="done",
                completed_at=at(3),
                completion=CallCompletion(value={"answer": 42}, fixed=True),
            ),
        ],
    )


@CHECKS.rule("load_unknown_run_is_none")
async def load_unknown_run_is_none(store: Store) -> None:
    """``load`` of a run that was never saved returns ``None``."""
    expect_equal(await store.load("never-saved"), None, "load of an unknown run")


@CHECKS.rule("save_step_round_trip")
async def save_step_round_trip(store: Store) -> None:
    """A saved step loads back as run row, checkpoint, context, blocks by position, and calls."""
    saved = _rich_step()
    await store.save_step(RUN, copy.deepcopy(saved))
    snap = await load(store)
    expect_equal(snap.run, saved.run, "loaded run row")
    expect_equal(snap.checkpoint, saved.checkpoint, "loaded checkpoint")
    expect_equal(snap.context, saved.context.append, "loaded context")
    by_position = sorted(saved.blocks, key=lambda b: b.position)
    expect_equal(snap.blocks, by_position, "loaded blocks (ordered by position)")
    expect_equal(len(snap.calls), len(saved.calls), "number of loaded calls")
    expect_equal(by_id(snap.calls), by_id(saved.calls), "loaded calls")


@CHECKS.rule("calls_load_in_creation_order")
async def calls_load_in_creation_order(store: Store) -> None:
    """``load`` lists calls in the order they were first saved (not sorted by id)."""
    await store.save_step(RUN, step(calls=[call("c10"), call("c9"), call("c2")]))
    await store.save_call(RUN, call("a1"))
    await store.save_step(RUN, step(calls=[call("c9", rev=2), call("b5")]))
    await store.save_call(RUN, call("c10", rev=3))
    snap = await load(store)
    expect_equal([c.id for c in snap.calls], ["c10", "c9", "c2", "a1", "b5"], "call order")


@CHECKS.rule("loaded_values_are_copies")
async def loaded_values_are_copies(store: Store) -> None:
    """Mutating what was saved, or what was loaded, does not change what the store holds."""
    saved = _rich_step()
    expected = copy.deepcopy(saved)
    await store.save_step(RUN, saved)
    first = await load(store)
    saved.run.steps = 99
    saved.checkpoint.batch.append("zzz")
    saved.calls[0].notes["x"] = "y"
    saved.context.append.clear()
    first.run.plan = None
    first.checkpoint.extra.clear()
    first.calls[0].status = "failed"
    first.calls.clear()
    first.context.clear()
    first.blocks[0].text = "changed"
    again = await load(store)
    expect_equal(again.run, expected.run, "run row after mutating saved and loaded values")
    expect_equal(again.checkpoint, expected.checkpoint, "checkpoint after mutations")
    expect_equal(again.context, expected.context.append, "context after mutations")
    expect_equal(by_id(again.calls), by_id(expected.calls), "calls after mutations")
    blocks = sorted(expected.blocks, key=lambda b: b.position)
    expect_equal(again.blocks, blocks, "blocks after mutations")


@CHECKS.rule("context_is_append_only")
async def context_is_append_only(store: Store) -> None:
    """Each step's ``context.append`` is added after the messages saved before."""
    a, b, c = user("a"), user("b"), user("c")
    await store.save_step(RUN, step(context=ContextChange(append=[a])))
    await store.save_step(RUN, step(context=ContextChange(append=[b, c])))
    await store.save_step(RUN, step())
    expect_equal((await load(store)).context, [a, b, c], "context after three steps")


@CHECKS.rule("context_base_replaces_log")
async def context_base_replaces_log(store: Store) -> None:
    """``ContextChange(base=...)`` replaces the whole log, then its ``append`` follows."""
    a, b, d, e = user("a"), user("b"), user("d"), user("e")
    summary = Message(role="system", parts=[TextPart(text="summary of a and b")])
    await store.save_step(RUN, step(context=ContextChange(append=[a, b])))
    await store.save_step(RUN, step(context=ContextChange(base=[summary], append=[d])))
    expect_equal((await load(store)).context, [summary, d], "context after a new base")
    await store.save_step(RUN, step(context=ContextChange(append=[e])))
    expect_equal((await load(store)).context, [summary, d, e], "context appended after a base")
    await store.save_step(RUN, step(context=ContextChange(base=[])))
    expect_equal((await load(store)).context, [], "context after an empty base")


@CHECKS.rule("removed_blocks_and_calls")
async def removed_blocks_and_calls(store: Store) -> None:
    """``removed_blocks`` and ``removed_calls`` delete them; unknown ids are ignored."""
    await store.save_step(
        RUN,
        step(blocks=[block("b1", 0), block("b2", 1)], calls=[call("c1"), call("c2")]),
    )
    await store.save_step(
        RUN, step(removed_blocks=["b1", "unknown"], removed_calls=["c2", "unknown"])
    )
    snap = await load(store)
    expect_equal([b.id for b in snap.blocks], ["b2"], "blocks left after removal")
    expect_equal([c.id for c in snap.calls], ["c1"], "calls left after removal")


@CHECKS.rule("removals_apply_before_calls")
async def removals_apply_before_calls(store: Store) -> None:
    """A call removed and saved in the same step starts afresh (removals apply first)."""
    await store.save_step(
        RUN, step(calls=[call("c1", rev=5, status="succeeded")], blocks=[block("b1", 0)])
    )
    await store.save_step(
        RUN,
        step(
            removed_calls=["c1"],
            calls=[call("c1", rev=1)],
            removed_blocks=["b1"],
            blocks=[block("b1", 3, text="again")],
        ),
    )
    snap = await load(store)
    expect_equal(snap.calls, [call("c1", rev=1)], "call removed and re-added in one step")
    expect_equal(snap.blocks, [block("b1", 3, text="again")], "block removed and re-added")


@CHECKS.rule("step_replaces_run_row")
async def step_replaces_run_row(store: Store) -> None:
    """Each step's run row replaces the stored one whole: usage, plan, completion, status."""
    first = run_row(usage=Usage(requests=1, input_tokens=5), plan={"todo": ["a"]}, steps=1)
    await store.save_step(RUN, step(run=first))
    done = run_row(
        status="completed",
        text="all done",
        completion={"value": [1, 2]},
        usage=Usage(requests=3, input_tokens=50, output_tokens=9),
        plan={"todo": [], "done": ["a"]},
        updated_at=at(30),
        steps=2,
    )
    await store.save_step(RUN, step(run=done))
    expect_equal((await load(store)).run, done, "run row after a second step")
    failed = run_row(status="failed", error_kind="ModelCallFailed", error="boom", steps=3)
    await store.save_step(RUN, step(run=failed))
    expect_equal((await load(store)).run, failed, "run row after a step clearing fields")


@CHECKS.rule("step_replaces_checkpoint")
async def step_replaces_checkpoint(store: Store) -> None:
    """Each step's checkpoint replaces the stored one whole."""
    await store.save_step(
        RUN, step(checkpoint=Checkpoint(phase="batch", batch=["c1"], extra={"ext": {"a": 1}}))
    )
    later = Checkpoint(phase="done", turn=2, claimed_through=4, seen_inputs=["m1@1", "m2@1"])
    await store.save_step(RUN, step(checkpoint=later))
    expect_equal((await load(store)).checkpoint, later, "checkpoint after a second step")


@CHECKS.rule("blocks_replaced_by_id")
async def blocks_replaced_by_id(store: Store) -> None:
    """A block saved again under its id replaces the stored one; other blocks stay."""
    await store.save_step(RUN, step(blocks=[block("b1", 0, text="draft"), block("b2", 1)]))
    await store.save_step(RUN, step(blocks=[block("b1", 0, text="final"), block("b0", 2)]))
    expect_equal(
        (await load(store)).blocks,
        [block("b1", 0, text="final"), block("b2", 1), block("b0", 2)],
        "blocks after a step that changes one",
    )


@CHECKS.rule("same_step_twice_is_idempotent")
async def same_step_twice_is_idempotent(store: Store) -> None:
    """Saving the same step twice leaves the state of saving it once (base rewrites)."""
    first = step(
        context=ContextChange(base=[user("a")], append=[user("b")]),
        blocks=[block("b1", 0), block("b2", 1)],
        calls=[call("c1"), call("c2", status="running")],
    )
    await store.save_step(RUN, copy.deepcopy(first))
    once = await load(store)
    await store.save_step(RUN, copy.deepcopy(first))
    expect_equal(await load(store), once, "state after saving the first step twice")
    second = step(
        run=run_row(steps=2, updated_at=at(9)),
        checkpoint=Checkpoint(turn=1),
        context=ContextChange(base=[user("summary")], append=[user("c")]),
        blocks=[block("b3", 2)],
        calls=[call("c2", rev=2, status="succeeded", result="ok"), call("c3")],
        removed_blocks=["b1"],
        removed_calls=["c1"],
    )
    await store.save_step(RUN, copy.deepcopy(second))
    once = await load(store)
    await store.save_step(RUN, copy.deepcopy(second))
    expect_equal(await load(store), once, "state after saving a later step twice")


@CHECKS.rule("appended_step_twice_is_idempotent")
async def appended_step_twice_is_idempotent(store: Store) -> None:
    """A step appending at a position writes its messages there.

    Saving it twice (a retry) leaves them once; an append that would leave a gap is refused.
    """
    await store.save_step(RUN, step(context=ContextChange(append=[user("a")], start=0)))
    appended = step(
        run=run_row(steps=2, updated_at=at(2)),
        context=ContextChange(append=[user("b"), user("c")], start=1),
    )
    await store.save_step(RUN, copy.deepcopy(appended))
    once = await load(store)
    await store.save_step(RUN, copy.deepcopy(appended))
    expect_equal(await load(store), once, "state after saving an appending step twice")
    expect_equal([m.text for m in once.context], ["a", "b", "c"], "context log")
    gap = step(run=run_row(steps=3), context=ContextChange(append=[user("x")], start=5))
    with expect_raises(StoreError, "save_step appending at position 5 of a 3-message log"):
        await store.save_step(RUN, gap)
    expect_equal(await load(store), once, "state after a refused append")


@CHECKS.rule("unknown_checkpoint_format_is_refused")
async def unknown_checkpoint_format_is_refused(store: Store) -> None:
    """A checkpoint of a format unknown to this release makes ``load`` raise FormatVersionError."""
    await store.save_step(RUN, step(checkpoint=Checkpoint(format=99)))
    with expect_raises(FormatVersionError, "load of a checkpoint with format 99"):
        await store.load(RUN)


@CHECKS.rule("failed_step_keeps_saved_state")
async def failed_step_keeps_saved_state(store: Store) -> None:
    """A step that cannot be encoded raises StoreError and changes nothing (steps are atomic)."""
    await store.save_step(
        RUN,
        step(
            context=ContextChange(append=[user("a")]),
            blocks=[block("b1", 0), block("b2", 1)],
            calls=[call("c1"), call("c2")],
        ),
    )
    before = await load(store)
    bad = step(
        run=run_row(steps=2, status="completed"),
        checkpoint=Checkpoint(turn=5),
        context=ContextChange(base=[user("new base")], append=[user("b")]),
        blocks=[block("b3", 2)],
        calls=[call("c1", rev=2, status="succeeded"), call("c3", payload=object())],
        removed_blocks=["b1"],
        removed_calls=["c2"],
    )
    with expect_raises(StoreError, "save_step of a call whose payload has no JSON form"):
        await store.save_step(RUN, bad)
    expect_equal(await load(store), before, "state after a failed step")
    good = replace(bad, calls=[call("c1", rev=2, status="succeeded"), call("c3")])
    await store.save_step(RUN, good)
    after = await load(store)
    expect_equal(sorted(c.id for c in after.calls), ["c1", "c3"], "calls after a later good step")
    expect_equal(after.context, [user("new base"), user("b")], "context after the good step")


@CHECKS.rule("failed_first_step_creates_no_run")
async def failed_first_step_creates_no_run(store: Store) -> None:
    """A first step that cannot be encoded raises StoreError and leaves no run behind."""
    with expect_raises(StoreError, "save_step of a call whose payload has no JSON form"):
        await store.save_step(RUN, step(calls=[call(payload=object())]))
    expect_equal(await store.load(RUN), None, "load after a failed first step")
    await store.save_step(RUN, step(calls=[call()]))
    expect_equal((await load(store)).calls, [call()], "calls after a good first step")


@CHECKS.rule("runs_are_independent")
async def runs_are_independent(store: Store) -> None:
    """Runs share no state: the same block and call ids in two runs are distinct records."""
    for run_id in ("run-a", "run-b"):
        await store.save_step(
            run_id,
            step(
                run_id,
                context=ContextChange(append=[user(f"hello from {run_id}")]),
                blocks=[block("b1", 0, text=run_id)],
                calls=[call("c1", status="running", arguments=f'{{"run": "{run_id}"}}')],
            ),
        )
    done = call("c1", rev=2, status="succeeded", result="a", arguments='{"run": "run-a"}')
    await store.save_call("run-a", done)
    await store.save_step("run-b", step("run-b", context=ContextChange(base=[user("b base")])))
    await store.save_step("run-b", step("run-b", removed_blocks=["b1"]))
    a, b = await load(store, "run-a"), await load(store, "run-b")
    expect_equal(a.run.run_id, "run-a", "run id of run-a's row")
    expect_equal(a.context, [user("hello from run-a")], "run-a's context")
    expect_equal(a.blocks, [block("b1", 0, text="run-a")], "run-a's blocks")
    expect_equal(a.calls, [done], "run-a's calls")
    expect_equal(b.context, [user("b base")], "run-b's context")
    expect_equal(b.blocks, [], "run-b's blocks")
    expect_equal(
        b.calls, [call("c1", status="running", arguments='{"run": "run-b"}')], "run-b's calls"
    )
    expect(await store.load("run-c") is None, "a run that was never saved loads as None")


@CHECKS.rule("load_call_reads_one_record")
async def load_call_reads_one_record(store: Store) -> None:
    """``load_call`` returns the current (merged) record, and ``None`` for unknown ids."""
    await store.save_step(RUN, step(calls=[call("c1"), call("c2")]))
    await store.save_call(RUN, call("c1", rev=2, status="succeeded", result="ok"))
    found = await store.load_call(RUN, "c1")
    expect(found is not None and found.status == "succeeded", "load_call sees the merged record")
    expect(await store.load_call(RUN, "nope") is None, "an unknown call is None")
    expect(await store.load_call("no-such-run", "c1") is None, "an unknown run is None")
