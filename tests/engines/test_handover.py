"""Handover to people and the host's other writes, the same on both engines: the
``on_handover`` hook, edited arguments, final decisions, the typed errors of writes that do not
apply, input while a run waits, and cancel.
"""

from __future__ import annotations

import pytest
from engine_agents import HOOK_LIMIT
from enginekit import Driver, Scenario

from steadyrun import (
    ConflictError,
    InvalidResponseError,
    NotPendingError,
    RunCancelledError,
    UnknownCallError,
)


async def test_a_handover_refused_by_the_hook_rejects_the_call(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 5000.")
    ended = await run.ended()

    assert ended.status == "completed"
    assert ended.text is not None and f"wires above {HOOK_LIMIT} need a second bank" in ended.text
    # The hook ran in a worker (it wrote its line); the wire never did; nobody was asked.
    assert run.effects() == ["model0", "handover-wire-awaiting_decision", "model1"]
    (call,) = (await run.snapshot()).calls
    assert call.status == "rejected" and call.decision is None


async def test_a_handover_accepted_by_the_hook_waits_for_the_edited_approval(
    engine: Driver,
) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 300.")
    item = await run.waits_for("decision")
    assert run.effects() == ["model0", "handover-wire-awaiting_decision"]

    await engine.decide(run.run_id, item.call_id, approve=True, arguments={"amount": 250})
    ended = await run.ended()

    edited = 'A reviewer changed the arguments before approving: {"amount": 250}'
    assert (ended.status, ended.text) == ("completed", f"ended: ({edited}) wired 250")
    assert run.effects()[2:] == ["wire250", "model1"]
    (call,) = (await run.snapshot()).calls
    assert call.decision is not None and call.decision.original_arguments == '{"amount": 300}'


async def test_the_first_decision_is_final(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 40.")
    item = await run.waits_for("decision")
    await engine.decide(run.run_id, item.call_id, approve=False, reason="no")
    await engine.decide(run.run_id, item.call_id, approve=False, reason="no")  # the same: fine
    with pytest.raises(ConflictError):
        await engine.decide(run.run_id, item.call_id, approve=True)
    ended = await run.ended()

    assert ended.status == "completed" and "wire40" not in run.effects()


async def test_decisions_after_the_run_ended_are_answered_as_before_it(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 41.")
    item = await run.waits_for("decision")
    await engine.decide(run.run_id, item.call_id, approve=False, reason="no")
    await run.ended()

    await engine.decide(run.run_id, item.call_id, approve=False, reason="no")  # a repeat
    with pytest.raises(ConflictError):
        await engine.decide(run.run_id, item.call_id, approve=True)


async def test_writes_that_do_not_apply_are_refused_with_typed_errors(engine: Driver) -> None:
    run = Scenario(engine, "pay")
    await run.start("Pay P-1.")
    item = await run.waits_for("input")
    assert item.wait_id is not None

    with pytest.raises(InvalidResponseError):  # the schema asks for a string
        await engine.answer(run.run_id, item.wait_id, 5)
    with pytest.raises(UnknownCallError):
        await engine.answer(run.run_id, "nope.w1", "visa")
    with pytest.raises(NotPendingError):  # it waits for an answer, not a decision
        await engine.decide(run.run_id, item.call_id, approve=True)
    assert [i.kind for i in await engine.pending(run.run_id)] == ["input"]  # nothing changed

    await engine.answer(run.run_id, item.wait_id, "amex")
    assert (await run.ended()).text == "ended: paid P-1 with amex"


async def test_input_sent_while_a_run_waits_is_taken_once_it_goes_on(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 60.")
    item = await run.waits_for("decision")
    await engine.send(run.run_id, "Tell me when it is done.")
    await engine.decide(run.run_id, item.call_id, approve=True)
    ended = await run.ended(turn=2)

    assert (ended.status, ended.text) == ("completed", "ended: wired 60")
    snap = await run.snapshot()
    said = [m.text for m in snap.context if m.role == "user"]
    assert said[1:] == ["Tell me when it is done."]
    assert run.effects().count("wire60") == 1


async def test_a_cancelled_waiting_run_never_runs_its_call(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 70.")
    await run.waits_for("decision")
    await engine.cancel(run.run_id, by="alice")
    ended = await run.ended()

    assert ended.status == "cancelled"
    snap = await run.snapshot()
    assert snap.run.cancelled_by == "alice"  # who cancelled, recorded on both engines
    (call,) = snap.calls
    assert call.status == "cancelled" and "by alice" in (call.error or "")
    await engine.cancel(run.run_id)  # again: nothing changes
    assert "wire70" not in run.effects()


async def test_a_cancel_records_who_cancelled_on_the_sub_agent_runs_it_ends(
    engine: Driver,
) -> None:
    run = Scenario(engine, "lead")
    await run.start("Charge L-1 through the charger.")
    await run.written("charge")  # the sub-agent's tool runs (and would for an hour)
    await engine.cancel(run.run_id, by="alice")
    ended = await run.ended()

    assert ended.status == "cancelled"
    snap = await run.snapshot()
    assert snap.run.cancelled_by == "alice"
    (delegation,) = snap.calls
    assert delegation.status == "cancelled" and "by alice" in (delegation.error or "")
    child = await engine.snapshot(f"{run.run_id}/{delegation.id}")
    assert child.run.status == "cancelled"
    assert child.run.cancelled_by == "alice"  # on each run the cancel ends, on both engines


async def test_a_decision_on_a_cancelled_run_is_refused_as_not_pending(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 71.")
    item = await run.waits_for("decision")
    await engine.cancel(run.run_id)
    assert (await run.ended()).status == "cancelled"

    with pytest.raises(NotPendingError):
        await engine.decide(run.run_id, item.call_id, approve=True)


async def test_a_run_cancelled_inside_a_tool_ends_cancelled(engine: Driver) -> None:
    run = Scenario(engine, "tool-kill")
    await run.start("Charge K-2.")
    await run.written("charge")  # the tool body runs (and would for an hour)
    await engine.cancel(run.run_id)
    ended = await run.ended()

    assert ended.status == "cancelled"
    (call,) = (await run.snapshot()).calls
    assert call.status == "cancelled"
    assert "model1" not in run.effects()  # the model was not asked again


async def test_a_failed_run_is_cancelled_and_never_resumed(engine: Driver) -> None:
    run = Scenario(engine, "flaky")
    await run.start("Charge C-3.")
    await run.ended()
    await engine.send(run.run_id, "Again?")  # the model is down for this turn
    assert (await run.ended(turn=2)).status == "failed"

    await engine.cancel(run.run_id, by="alice")
    await engine.cancel(run.run_id)  # again: nothing changes

    assert (await run.snapshot()).run.status == "cancelled"
    assert (await run.snapshot()).run.cancelled_by == "alice"
    assert (await run.ended(turn=2)).status == "cancelled"
    with pytest.raises(RunCancelledError):
        await engine.resume(run.run_id)
    assert run.effects().count("charge") == 1
