"""Confirmations: a person approves or rejects a call before it runs (every store)."""

from __future__ import annotations

import asyncio

import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.control import CallRejected, CallView, Confirm
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls


def confirm_refunds(call: CallView) -> Confirm | None:
    if call.arguments["amount_cents"] > 1000:
        return Confirm(prompt=f"Refund {call.arguments['amount_cents']} cents?")
    return None


class Bank:
    def __init__(self) -> None:
        self.refunds: list[tuple[str, int]] = []
        self.crash: asyncio.Event | None = None

    def agent(self, model: ScriptedModel) -> sr.Agent:
        bank = self

        @sr.tool(side_effects=True, policy=confirm_refunds, concurrency_key="")
        async def refund(order_id: str, amount_cents: int) -> str:
            """Refund an order.

            Args:
                order_id: The order.
                amount_cents: Cents to refund.
            """
            bank.refunds.append((order_id, amount_cents))
            if bank.crash is not None:
                bank.crash.set()
                await hang()
            return f"refunded {amount_cents} on {order_id}"

        @sr.tool(concurrency_key="")
        def lookup(order_id: str) -> str:
            """Look up an order."""
            bank.refunds.append(("lookup", 0))
            return f"{order_id}: paid"

        return sr.Agent(name="support", model=model, tools=[refund, lookup])


def refund(order: str, cents: int) -> tuple[str, dict[str, object]]:
    return ("refund", {"order_id": order, "amount_cents": cents})


async def test_a_confirmed_call_waits_then_runs_once_when_approved(store: Store) -> None:
    bank = Bank()
    model = ScriptedModel(
        [tool_calls(refund("A", 5000), ("lookup", {"order_id": "A"})), text("Done.")]
    )
    runtime = sr.Runtime(store)
    result = await runtime.run(bank.agent(model), run_id="t", input="refund A")
    assert result.status == "suspended"
    assert result.call("m1.c1").status == "awaiting_decision"
    assert result.call("m1.c2").status == "succeeded"  # the rest of the batch ran
    assert bank.refunds == [("lookup", 0)]
    (item,) = await runtime.pending("t")
    assert (item.kind, item.blocking, item.call_id, item.prompt) == (
        "decision",
        True,
        "m1.c1",
        "Refund 5000 cents?",
    )
    await runtime.decide("t", "m1.c1", approve=True, decided_by="dana")
    done = await runtime.resume("t")
    assert done.status == "completed" and done.text == "Done."
    assert bank.refunds == [("lookup", 0), ("A", 5000)]
    assert done.call("m1.c1").decision.decided_by == "dana"  # type: ignore[union-attr]
    # Same turn: the results enter the context in call order, one model call later.
    assert [p.content for p in model.requests[1].messages[-1].parts] == [  # type: ignore[union-attr]
        "refunded 5000 on A",
        "A: paid",
    ]
    assert await runtime.pending("t") == []


async def test_peer_failure_approved_call_then_crash_then_resume_runs_it_once(
    store: Store,
) -> None:
    bank = Bank()
    runtime = sr.Runtime(store)
    await runtime.run(
        bank.agent(ScriptedModel([tool_calls(refund("A", 5000))])), run_id="t", input="x"
    )
    await runtime.decide("t", "m1.c1", approve=True)
    bank.crash = asyncio.Event()
    await crash_when(sr.Runtime(store).resume("t", agent=bank.agent(ScriptedModel([]))), bank.crash)
    bank.crash = None
    result = await sr.Runtime(store).resume("t", agent=bank.agent(ScriptedModel([text("ok")])))
    assert result.status == "completed"
    assert bank.refunds == [("A", 5000)]  # ran once; never again on its own
    assert result.call("m1.c1").status == "needs_review"


async def test_peer_failure_rejected_call_never_executes(store: Store) -> None:
    bank = Bank()
    model = ScriptedModel([tool_calls(refund("A", 5000)), text("I could not refund it.")])
    runtime = sr.Runtime(store)
    await runtime.run(bank.agent(model), run_id="t", input="x")
    await runtime.decide("t", "m1.c1", approve=False, reason="over the limit")
    result = await runtime.resume("t")
    assert result.status == "completed"
    assert bank.refunds == []
    call = result.call("m1.c1")
    assert call.status == "rejected" and call.started_at is None
    part = model.requests[1].messages[-1].parts[0]
    assert part.is_error and "over the limit" in part.content  # type: ignore[union-attr]
    again = await sr.Runtime(store).resume("t", agent=bank.agent(ScriptedModel([])))
    assert again.status == "completed" and bank.refunds == []


async def test_peer_failure_two_approvals_answered_in_reverse_order_go_to_their_calls(
    store: Store,
) -> None:
    bank = Bank()
    model = ScriptedModel([tool_calls(refund("A", 5000), refund("B", 7000)), text("Both.")])
    runtime = sr.Runtime(store)
    await runtime.run(bank.agent(model), run_id="t", input="x")
    pending = await runtime.pending("t")
    assert [p.call_id for p in pending] == ["m1.c1", "m1.c2"]
    await runtime.decide(
        "t", "m1.c2", approve=True, arguments={"order_id": "B", "amount_cents": 6500}
    )
    assert (await runtime.resume("t")).status == "suspended"  # one still waits
    assert bank.refunds == []  # nothing runs until every decision is in
    await runtime.decide("t", "m1.c1", approve=False, reason="duplicate")
    result = await runtime.resume("t")
    assert result.status == "completed"
    assert bank.refunds == [("B", 6500)]
    c1, c2 = result.call("m1.c1"), result.call("m1.c2")
    assert c1.status == "rejected" and "duplicate" in (c1.result or "")
    assert c2.status == "succeeded" and "changed the arguments" in (c2.result or "")
    assert c2.arguments == '{"order_id": "B", "amount_cents": 6500}'
    assert c2.notes["steadyrun.original_arguments"] == '{"order_id": "B", "amount_cents": 7000}'


async def test_peer_failure_answering_one_pending_call_does_not_rerun_the_other(
    store: Store,
) -> None:
    bank = Bank()
    model = ScriptedModel(
        [tool_calls(refund("A", 5000), refund("B", 7000), refund("C", 10)), text("ok")]
    )
    runtime = sr.Runtime(store)
    await runtime.run(bank.agent(model), run_id="t", input="x")
    assert bank.refunds == [("C", 10)]  # below the limit: ran at once
    await runtime.decide("t", "m1.c1", approve=True)
    await runtime.resume("t")
    await runtime.resume("t")  # resuming again while B waits changes nothing
    assert bank.refunds == [("C", 10)]
    await runtime.decide("t", "m1.c2", approve=True)
    result = await runtime.resume("t")
    assert result.status == "completed"
    assert sorted(bank.refunds) == [("A", 5000), ("B", 7000), ("C", 10)]


async def test_decisions_written_while_no_process_runs_are_carried_out(store: Store) -> None:
    bank = Bank()
    await sr.Runtime(store).run(
        bank.agent(ScriptedModel([tool_calls(refund("A", 5000))])), run_id="t", input="x"
    )
    # Another process (a web page) decides; nothing is running.
    ui = sr.Runtime(store, agents=[bank.agent(ScriptedModel([]))])
    await ui.decide("t", "m1.c1", approve=True)
    later = sr.Runtime(store, agents=[bank.agent(ScriptedModel([text("done")]))])
    result = await later.resume("t")
    assert result.status == "completed" and bank.refunds == [("A", 5000)]


async def test_bad_decisions_are_typed_errors_that_change_nothing(store: Store) -> None:
    bank = Bank()
    runtime = sr.Runtime(store)
    await runtime.run(
        bank.agent(ScriptedModel([tool_calls(refund("A", 5000), ("lookup", {"order_id": "A"}))])),
        run_id="t",
        input="x",
    )
    before = await store.load("t")
    with pytest.raises(sr.UnknownCallError):
        await runtime.decide("t", "m9.c9", approve=True)
    with pytest.raises(sr.RunNotFoundError):
        await runtime.decide("nope", "m1.c1", approve=True)
    with pytest.raises(sr.NotPendingError, match="not waiting for a decision"):
        await runtime.decide("t", "m1.c2", approve=True)  # a call that already ran
    with pytest.raises(sr.InvalidResponseError, match="amount_cents"):
        await runtime.decide("t", "m1.c1", approve=True, arguments={"order_id": "A"})
    with pytest.raises(sr.InvalidResponseError):
        await runtime.decide("t", "m1.c1", approve=True, arguments="{not json")
    with pytest.raises(sr.UsageError, match="approval"):
        await runtime.decide("t", "m1.c1", approve=False, arguments={"order_id": "A"})
    assert await store.load("t") == before  # nothing changed
    await runtime.decide("t", "m1.c1", approve=True, reason="ok")
    await runtime.decide("t", "m1.c1", approve=True, reason="ok")  # the same: idempotent
    with pytest.raises(sr.ConflictError, match="final"):
        await runtime.decide("t", "m1.c1", approve=False, reason="changed my mind")
    result = await runtime.resume("t")
    assert result.call("m1.c1").decision.approve  # type: ignore[union-attr]


async def test_the_host_may_refuse_a_pending_confirmation_as_it_is_created(store: Store) -> None:
    bank = Bank()
    seen: list[str] = []

    async def on_handover(run_id: str, call: sr.CallRecord) -> None:
        seen.append(call.status)
        raise CallRejected("the approval queue is closed today")

    model = ScriptedModel([tool_calls(refund("A", 5000)), text("Sorry.")])
    result = await sr.Runtime(store, on_handover=on_handover).run(
        bank.agent(model), run_id="t", input="x"
    )
    assert seen == ["awaiting_decision"]
    assert result.status == "completed" and bank.refunds == []
    assert result.call("m1.c1").status == "rejected"
    assert "queue is closed" in model.requests[1].messages[-1].parts[0].content  # type: ignore[union-attr]


async def test_an_approved_call_still_runs_when_new_input_arrived_meanwhile(store: Store) -> None:
    # New input cancels calls that had not started, but not one a person approved: the
    # approval was given to it, for this resume.
    bank = Bank()
    model = ScriptedModel([tool_calls(refund("A", 5000)), text("Refunded; and noted.")])
    agent = bank.agent(model)
    runtime = sr.Runtime(store, agents=[agent])
    assert (await runtime.run(agent, run_id="t", input="x")).status == "suspended"
    await runtime.decide("t", "m1.c1", approve=True)
    await runtime.send("t", "also, send me the invoice", id="later")
    result = await runtime.resume("t")
    assert bank.refunds == [("A", 5000)]
    assert result.call("m1.c1").status == "succeeded"
    assert [m.role for m in model.requests[-1].messages[-2:]] == ["tool", "user"]
