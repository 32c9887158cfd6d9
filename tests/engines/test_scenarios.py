"""S1-S7: the crash and approval scenarios, the same on both engines (see README.md).

Each drives a run through worker processes from the outside and checks what a user sees:
how the run ended, what it waited for, and the side effects in the ledger (each once).
"""

from __future__ import annotations

import time

from engine_agents import HOOK_LIMIT, mark
from enginekit import Driver, Scenario


async def test_s1_an_approved_call_runs_once_after_the_decision(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 300.")
    item = await run.waits_for("decision")
    assert (item.name, item.prompt, item.blocking) == ("wire", "Wire 300?", True)
    assert "wire300" not in run.effects()  # nothing ran before the decision

    await engine.decide(run.run_id, item.call_id, approve=True)
    ended = await run.ended()

    assert (ended.status, ended.text) == ("completed", "ended: wired 300")
    assert run.effects().count("wire300") == 1
    (call,) = (await run.snapshot()).calls
    assert call.status == "succeeded" and call.decision is not None and call.decision.approve


async def test_s2_a_rejected_call_never_runs_and_the_model_hears_why(engine: Driver) -> None:
    run = Scenario(engine, "wire")
    await run.start("Wire 700.")
    item = await run.waits_for("decision")
    await engine.decide(run.run_id, item.call_id, approve=False, reason="not this month")
    ended = await run.ended()

    assert ended.status == "completed"
    assert ended.text is not None and "not this month" in ended.text
    assert "wire700" not in run.effects()
    (call,) = (await run.snapshot()).calls
    assert call.status == "rejected"


async def test_s3_an_input_request_goes_on_with_the_answer(engine: Driver) -> None:
    run = Scenario(engine, "pay")
    await run.start("Pay P-1.")
    item = await run.waits_for("input")
    assert item.prompt == "Which card?" and item.wait_id is not None

    await engine.answer(run.run_id, item.wait_id, "visa")
    ended = await run.ended()

    assert (ended.status, ended.text) == ("completed", "ended: paid P-1 with visa")
    assert run.effects().count("pay-visa") == 1


async def test_s4_an_awaited_result_is_settled_by_the_host(engine: Driver) -> None:
    run = Scenario(engine, "bank")
    await run.start("Any chargeback on B-1?")
    item = await run.waits_for("result")
    assert item.payload == {"order": "B-1", "ask": "chargeback status"}

    await engine.settle(run.run_id, item.call_id, result="no chargeback")
    ended = await run.ended()

    assert (ended.status, ended.text) == ("completed", "ended: no chargeback")
    (call,) = (await run.snapshot()).calls
    assert (call.status, call.result) == ("succeeded", "no chargeback")


async def test_s5_a_completed_run_takes_new_input_as_a_new_turn(engine: Driver) -> None:
    run = Scenario(engine, "chat")
    await run.start("Hello.")
    assert (await run.ended()).text == "turn 1: Hello."

    await engine.send(run.run_id, "And again.")
    ended = await run.ended(turn=2)

    assert (ended.status, ended.text) == ("completed", "turn 2: And again.")
    snap = await run.snapshot()
    assert [m.role for m in snap.context] == ["user", "assistant", "user", "assistant"]
    assert run.effects() == ["model0", "model0"]  # one model call per turn, none repeated


async def test_a_failed_run_is_resumed_from_its_last_step(engine: Driver) -> None:
    run = Scenario(engine, "flaky")
    await run.start("Charge C-1.")
    assert (await run.ended()).text == "all done"
    await engine.send(run.run_id, "Again?")  # the model is down for this turn
    failed = await run.ended(turn=2)
    assert (failed.status, failed.error_kind) == ("failed", "ModelCallFailed")

    mark(engine.ledger, "mended", run.run_id)
    await engine.resume(run.run_id)
    ended = await run.ended(turn=2)

    assert (ended.status, ended.text) == ("completed", "all done")
    assert run.effects().count("charge") == 1  # the first turn's charge is not run again
    snap = await run.snapshot()
    assert [m.text for m in snap.context if m.role == "user"][1:] == ["Again?"]


async def test_s6_a_worker_killed_in_a_side_effecting_tool_is_replaced_and_it_runs_once(
    engine: Driver,
) -> None:
    run = Scenario(engine, "tool-kill")
    await run.start("Charge K-1.")
    charge = await run.written("charge")
    run.kill(charge.pid)  # SIGKILL in the tool body, after its side effect
    killed = time.monotonic()
    after = await run.written("model1")  # the model hears how the call ended, elsewhere
    print(
        f"\n{engine.name}: run went on {time.monotonic() - killed:.1f} s after a SIGKILL in a tool"
    )
    ended = await run.ended()

    assert ended.status == "completed"
    assert after.pid != charge.pid
    # The cut call is not run again: it needs review, and the model was told so.
    assert run.effects().count("charge") == 1
    (call,) = (await run.snapshot()).calls
    assert call.status == "needs_review"
    assert ended.text is not None and call.result is not None and call.result in ended.text


async def test_s7_a_worker_killed_in_a_model_call_is_replaced_and_the_call_asked_again(
    engine: Driver,
) -> None:
    run = Scenario(engine, "model-kill")
    await run.start("Think it over.")
    first = await run.written("model0")
    run.kill(first.pid)  # SIGKILL while the model is answering
    killed = time.monotonic()
    again = await run.ledger_shows(lambda e: len(e) == 2)
    print(f"\n{engine.name}: model asked again {time.monotonic() - killed:.1f} s after a SIGKILL")
    ended = await run.ended()

    assert (ended.status, ended.text) == ("completed", "thought it over")
    assert again[1].pid != first.pid and len(run.ledger()) == 2  # once more, by another worker


async def test_a_suspended_run_outlives_every_worker_it_had(engine: Driver) -> None:
    """Nothing of a waiting run lives in a worker: all killed, new ones carry it on."""
    run = Scenario(engine, "wire")
    await run.start(f"Wire {HOOK_LIMIT}.")
    item = await run.waits_for("decision")
    for pid in engine.workers.pids:
        run.kill(pid)
    await engine.decide(run.run_id, item.call_id, approve=True)
    ended = await run.ended()

    assert (ended.status, ended.text) == ("completed", f"ended: wired {HOOK_LIMIT}")
    assert run.effects().count(f"wire{HOOK_LIMIT}") == 1
