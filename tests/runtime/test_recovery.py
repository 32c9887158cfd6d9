"""Crash and resume: started calls settle by their traits, side effects never run twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.records import (
    ACTIVE_STATUSES,
    SETTLED_STATUSES,
    CallDecision,
    CallRecord,
    Checkpoint,
    InputRequest,
    RunRecord,
    RunSnapshot,
)
from steadyrun.runtime import Texts, interrupted_outcome, needs_recovery, settle_interrupted
from steadyrun.runtime._recovery import ORIGINAL_ARGUMENTS, apply_answers, end_child_run
from steadyrun.testing import ScriptedModel, text, tool_calls


def build(crash: asyncio.Event | None, ledger: list[str], model: ScriptedModel) -> sr.Agent:
    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order_id"])
    async def refund(order_id: str) -> str:
        """Refund (side effects, not replayable)."""
        ledger.append(f"refund {order_id}")
        if crash is not None and order_id == "A":
            crash.set()
            await hang()
        return f"refunded {order_id}"

    @sr.tool(replayable=True, side_effects=True, concurrency_key="")
    async def notify(order_id: str) -> str:
        """Notify (side effects, but safe to repeat)."""
        ledger.append(f"notify {order_id}")
        if crash is not None:
            crash.set()
            await hang()
        return "sent"

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order_id: str) -> str:
        """Read only."""
        ledger.append(f"lookup {order_id}")
        if crash is not None:
            await hang()
        return "ok"

    @sr.tool
    async def archive(order_id: str) -> str:
        """Runs alone, after the others: still queued at the crash."""
        ledger.append(f"archive {order_id}")
        return "archived"

    return sr.Agent(
        name="support",
        model=model,
        tools=[refund, notify, lookup, archive],
        limits=sr.Limits(max_concurrent_tool_calls=4),
    )


BATCH = tool_calls(
    ("refund", {"order_id": "A"}),
    ("notify", {"order_id": "A"}),
    ("lookup", {"order_id": "A"}),
    ("archive", {"order_id": "A"}),
)


async def test_crash_mid_batch_resumes_with_started_calls_settled_by_traits() -> None:
    store = sr.MemoryStore()
    ledger: list[str] = []
    crash = asyncio.Event()
    first = ScriptedModel([BATCH])
    runtime = sr.Runtime(store)
    await crash_when(runtime.run(build(crash, ledger, first), run_id="t", input="x"), crash)

    # Give the other started calls a chance to be mid-body as well.
    snap = await store.load("t")
    assert snap is not None and snap.run.status == "running"
    statuses = {c.name: c.status for c in snap.calls}
    assert statuses["refund"] == "running" and statuses["archive"] == "queued"

    # A new process: a new runtime, a new agent, the same store.
    second = ScriptedModel([text("Checked.")])
    resumed = await sr.Runtime(store).resume("t", agent=build(None, ledger, second))
    assert resumed.status == "completed"
    by_name = {c.name: c for c in resumed.calls}
    assert by_name["refund"].status == "needs_review"
    assert "may or may not have taken effect" in (by_name["refund"].result or "")
    assert by_name["notify"].status == "interrupted"  # replayable
    assert by_name["lookup"].status in ("interrupted", "succeeded")
    assert by_name["archive"].status == "succeeded"  # queued, never started: it runs
    assert ledger.count("refund A") == 1  # the side effect ran exactly once
    assert ledger.count("archive A") == 1
    assert ledger.count("notify A") == 1
    results = second.requests[0].messages[-1].parts
    assert [p.call_id for p in results] == ["call_1", "call_2", "call_3", "call_4"]  # type: ignore[union-attr]


async def test_crash_after_the_model_response_saved_never_runs_its_started_call() -> None:
    # The response's step carries the start of its call (one commit for both), so a crash
    # after it finds the call started: settled by its traits, never run (again).
    store = sr.MemoryStore()
    ledger: list[str] = []
    crashed = asyncio.Event()

    class SaveThenDie(sr.MemoryStore):
        async def save_step(self, run_id: str, step: object) -> None:  # type: ignore[override]
            await store.save_step(run_id, step)  # type: ignore[arg-type]
            if step.checkpoint.phase == "batch":  # type: ignore[attr-defined]
                crashed.set()
                await hang()

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

    wrapper = SaveThenDie()
    names = ("save_call", "update_call", "load", "append", "pending", "claim", "consume", "leases")
    for name in names:
        setattr(wrapper, name, getattr(store, name))
    model = ScriptedModel([tool_calls(("refund", {"order_id": "B"}))])
    await crash_when(
        sr.Runtime(wrapper).run(build(None, ledger, model), run_id="t", input="x"), crashed
    )
    assert ledger == []
    resumed = await sr.Runtime(store).resume(
        "t", agent=build(None, ledger, ScriptedModel([text("done")]))
    )
    assert resumed.status == "completed"
    assert ledger == []
    assert resumed.calls[0].status == "needs_review"


async def test_resume_after_all_calls_settled_but_before_the_step() -> None:
    store = sr.MemoryStore()
    ledger: list[str] = []
    crashed = asyncio.Event()
    runtime: sr.Runtime

    class Stop(sr.Observer):
        async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
            crashed.set()
            await hang()  # observers run on the loop: dropping here loses the batch step

    model = ScriptedModel([tool_calls(("refund", {"order_id": "C"}))])
    runtime = sr.Runtime(store, observers=[Stop()])
    await crash_when(runtime.run(build(None, ledger, model), run_id="t", input="x"), crashed)
    second = ScriptedModel([text("done")])
    resumed = await sr.Runtime(store).resume("t", agent=build(None, ledger, second))
    assert resumed.status == "completed"
    assert resumed.calls[0].status == "succeeded"  # the settled outcome is kept
    assert ledger == ["refund C"]
    assert second.requests[0].messages[-1].parts[0].content == "refunded C"  # type: ignore[union-attr]


async def test_a_tool_that_declares_no_traits_is_needs_review_after_a_crash() -> None:
    # Safe by default: an undeclared tool may have changed the world (a send_email, say), so
    # the model must not be told to call it again; only side_effects=False earns that.
    store = sr.MemoryStore()
    started, peeked = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    @sr.tool(concurrency_key="")  # concurrency is not a side-effect trait
    async def send_email(to: str) -> str:
        """Send an email (traits not declared)."""
        sent.append(to)
        await peeked.wait()  # both calls are mid-body at the crash
        started.set()
        await hang()
        return "sent"

    @sr.tool(side_effects=False, concurrency_key="")
    async def peek(to: str) -> str:
        """Read only, declared so."""
        peeked.set()
        await hang()
        return "ok"

    def agent(model: ScriptedModel) -> sr.Agent:
        return sr.Agent(name="mail", model=model, tools=[send_email, peek])

    batch = tool_calls(("peek", {"to": "a@x"}), ("send_email", {"to": "a@x"}))
    await crash_when(
        sr.Runtime(store).run(agent(ScriptedModel([batch])), run_id="m", input="x"), started
    )
    second = ScriptedModel([text("Checked.")])
    resumed = await sr.Runtime(store).resume("m", agent=agent(second))
    by_name = {c.name: c for c in resumed.calls}
    assert by_name["send_email"].status == "needs_review"
    assert "may or may not have taken effect" in (by_name["send_email"].result or "")
    assert "call it again" not in (by_name["send_email"].result or "").lower()
    assert by_name["peek"].status == "interrupted"
    assert "call it again" in (by_name["peek"].result or "").lower()
    assert sent == ["a@x"]


NOW = datetime(2026, 11, 29, tzinfo=UTC)

_UNDECLARED = "undeclared"


@given(
    status=st.sampled_from(sorted(ACTIVE_STATUSES | SETTLED_STATUSES | {"expired"})),
    replayable=st.sampled_from([True, False, _UNDECLARED]),
    side_effects=st.sampled_from([True, False, _UNDECLARED]),
    handover=st.sampled_from(["", "await", "detached", "submitted"]),
    rev=st.integers(min_value=0, max_value=10**6),
)
def test_recovery_settlement_rules(
    status: str, replayable: object, side_effects: object, handover: str, rev: int
) -> None:
    # A trait left out of the record (as of the tool) takes its default: the rule must then
    # treat the call as possibly having taken effect.
    traits = {
        k: v
        for k, v in (("replayable", replayable), ("side_effects", side_effects))
        if v != _UNDECLARED
    }
    call = CallRecord(id="c", name="t", status=status, handover=handover, rev=rev, **traits)  # type: ignore[arg-type]
    out = settle_interrupted(call, NOW, Texts())
    if status != "running" or handover:
        assert out == call  # only started calls the runtime owns are settled
        return
    assert out.rev == rev + 1
    assert out.settled and out.completed_at == NOW and out.result
    if replayable is True or side_effects is False:
        assert out.status == "interrupted"
        assert out.result != Texts().needs_review.format(name="t", call_id="c")
    else:
        assert out.status == "needs_review"
        assert out.result == Texts().needs_review.format(name="t", call_id="c")
    assert interrupted_outcome(call, Texts())[0] == out.status


@given(
    replayable=st.sampled_from([True, False, _UNDECLARED]),
    side_effects=st.sampled_from([True, False, _UNDECLARED]),
)
def test_tool_declarations_map_to_recovery_outcomes(
    replayable: object, side_effects: object
) -> None:
    # From the declaration a tool author writes to the outcome recovery gives its started call.
    traits = {
        k: v
        for k, v in (("replayable", replayable), ("side_effects", side_effects))
        if v != _UNDECLARED
    }

    async def act(x: int) -> int:
        """Act."""
        return x

    declared = sr.tool(**traits)(act)  # type: ignore[arg-type]
    call = CallRecord(
        id="c",
        name="act",
        status="running",
        replayable=declared.replayable,
        side_effects=declared.side_effects,
    )
    status, _ = interrupted_outcome(call, Texts())
    safe_to_repeat = replayable is True or side_effects is False
    assert status == ("interrupted" if safe_to_repeat else "needs_review")


async def test_observers_see_the_calls_recovery_settles() -> None:
    store = sr.MemoryStore()
    ledger: list[str] = []
    crash = asyncio.Event()
    await crash_when(
        sr.Runtime(store).run(
            build(crash, ledger, ScriptedModel([tool_calls(("refund", {"order_id": "A"}))])),
            run_id="t",
            input="x",
        ),
        crash,
    )
    settled: list[tuple[str, str]] = []

    class Watch(sr.Observer):
        def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
            settled.append((call.id, call.status))

    await sr.Runtime(store, observers=[Watch()]).resume(
        "t", agent=build(None, ledger, ScriptedModel([text("ok")]))
    )
    assert settled == [("m1.c1", "needs_review")]


_CALL_STATUSES = sorted(ACTIVE_STATUSES | SETTLED_STATUSES)


@given(
    run_status=st.sampled_from(["running", "failed", "completed", "cancelled"]),
    calls=st.lists(
        st.tuples(
            st.sampled_from(_CALL_STATUSES),
            st.booleans(),  # replayable
            st.booleans(),  # side effects
            st.integers(min_value=0, max_value=50),  # rev
        ),
        max_size=6,
    ),
    steps=st.integers(min_value=0, max_value=1000),
)
def test_ending_a_child_run_settles_every_open_call_and_the_run(
    run_status: str, calls: list[tuple[str, bool, bool, int]], steps: int
) -> None:
    records = [
        CallRecord(
            id=f"m1.c{i}",
            name=f"t{i}",
            status=status,  # type: ignore[arg-type]
            replayable=replayable,
            side_effects=effects,
            rev=rev,
        )
        for i, (status, replayable, effects, rev) in enumerate(calls)
    ]
    child = RunSnapshot(
        run=RunRecord(run_id="r/m1.c1", agent="sub", status=run_status, steps=steps),  # type: ignore[arg-type]
        checkpoint=Checkpoint(phase="batch", batch=[c.id for c in records], context_length=3),
        context=[],
        calls=records,
        blocks=[],
    )
    step = end_child_run(child, NOW, Texts(), "why")
    if run_status != "running":
        assert step is None  # ended already: ending again changes nothing
        return
    assert step is not None
    assert (step.run.status, step.run.error_kind, step.run.error) == (
        "failed",
        "SubAgentInterrupted",
        "why",
    )
    assert step.run.steps == steps + 1 and step.run.updated_at == NOW
    assert (step.checkpoint.phase, step.checkpoint.batch) == ("done", [])
    assert step.checkpoint.context_length == 3  # the log is what it was
    written = {c.id: c for c in step.calls}
    for before in records:
        after = written.get(before.id)
        if needs_recovery(before):
            assert after == settle_interrupted(before, NOW, Texts())
        elif before.status == "queued":
            assert after is not None and after.status == "cancelled" and after.rev == before.rev + 1
            assert after.completed_at == NOW and after.error == "why"
        else:
            assert after is None  # settled, or waiting on someone else: not the run's to end
    # Nothing the run owned is left running or queued.
    final = [written.get(c.id, c) for c in records]
    assert not any(c.status in ("running", "queued") and not c.handover for c in final)


decisions = st.none() | st.builds(
    CallDecision,
    approve=st.booleans(),
    reason=st.none() | st.sampled_from(["too much", ""]),
    arguments=st.none() | st.sampled_from(['{"a": 1}', '{"a": 2}']),
)
requests = st.none() | st.builds(
    InputRequest,
    wait_id=st.just("m1.c1.w1"),
    prompt=st.just("Which?"),
    response=st.none() | st.sampled_from(["x", 0, {"k": 1}]),
)


@given(
    status=st.sampled_from(_CALL_STATUSES),
    handover=st.sampled_from(["", "await", "detached", "submitted"]),
    decision=decisions,
    request=requests,
    rev=st.integers(min_value=0, max_value=10**6),
)
def test_answers_advance_a_waiting_call_one_rev_and_change_nothing_else(
    status: str,
    handover: str,
    decision: CallDecision | None,
    request: InputRequest | None,
    rev: int,
) -> None:
    call = CallRecord(
        id="m1.c1",
        name="refund",
        arguments='{"a": 1}',
        status=status,  # type: ignore[arg-type]
        handover=handover,  # type: ignore[arg-type]
        decision=decision,
        input_request=request,
        rev=rev,
    )
    out = apply_answers(call, NOW, Texts())
    decided = status == "awaiting_decision" and not handover and decision is not None
    answered = status == "awaiting_input" and request is not None and request.response is not None
    if not (decided or answered):
        assert out is None  # still waiting (or not waiting at all): nothing to apply
        return
    assert out is not None
    assert out.rev == rev + 1  # a new snapshot: a store's merge keeps only a higher rev
    assert (out.decision, out.input_request, out.id, out.name) == (
        decision,
        request,
        call.id,
        call.name,
    )
    if decided and decision is not None and not decision.approve:
        assert out.status == "rejected" and out.completed_at == NOW and out.result
        assert out.arguments == call.arguments
        return
    assert out.status == "queued" and out.completed_at is None and out.result is None
    edited = decided and decision is not None and decision.arguments not in (None, call.arguments)
    if edited:
        assert decision is not None and out.arguments == decision.arguments
        assert out.notes == {ORIGINAL_ARGUMENTS: call.arguments}
    else:
        assert out.arguments == call.arguments and out.notes == {}
