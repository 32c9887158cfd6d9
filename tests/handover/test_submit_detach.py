"""Submissions and detached calls: the model gets a receipt and the run carries on."""

from __future__ import annotations

from typing import Any

import pytest

import steadyrun as sr
from steadyrun.control import CallRejected, CallView, Submit, detach
from steadyrun.records import CallRecord, CallUpdate
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls


def submit_purchases(call: CallView) -> Submit:
    return Submit(
        receipt=f"Purchase request PR-{call.arguments['item']} submitted for approval",
        payload={"item": call.arguments["item"]},
    )


def agent(model: ScriptedModel, ran: list[str]) -> sr.Agent:
    @sr.tool(side_effects=True, policy=submit_purchases)
    def purchase(item: str) -> str:
        """Buy an item (needs a manager's approval)."""
        ran.append(item)
        return "bought"

    @sr.tool(side_effects=True)
    async def ship(order_id: str) -> str:
        """Ship an order; the warehouse confirms later."""
        detach(
            f"Shipment for {order_id} handed to the warehouse (ticket W-{order_id})",
            {"order_id": order_id},
        )

    return sr.Agent(name="ops", model=model, tools=[purchase, ship])


async def test_a_submission_returns_a_receipt_and_never_runs_the_body(store: Store) -> None:
    ran: list[str] = []
    model = ScriptedModel([tool_calls(("purchase", {"item": "laptop"})), text("Submitted.")])
    runtime = sr.Runtime(store)
    result = await runtime.run(agent(model, ran), run_id="r", input="buy a laptop")
    assert result.status == "completed" and ran == []
    call = result.call("m1.c1")
    assert (call.status, call.handover, call.payload) == (
        "awaiting_decision",
        "submitted",
        {"item": "laptop"},
    )
    part = model.requests[1].messages[-1].parts[0]
    assert not part.is_error and part.content.startswith("Purchase request PR-laptop")  # type: ignore[union-attr]
    (item,) = await runtime.pending("r")
    assert (item.kind, item.blocking) == ("submission", False)
    # The host owns the decision and the outcome.
    await runtime.decide("r", "m1.c1", approve=True, decided_by="manager")
    await runtime.settle("r", "m1.c1", result="ordered from the supplier")
    snap = await store.load("r")
    assert snap is not None and snap.calls[0].status == "succeeded"
    assert snap.calls[0].decision.decided_by == "manager"  # type: ignore[union-attr]
    assert await runtime.pending("r") == []


async def test_the_host_refuses_a_submission_and_the_model_sees_why(store: Store) -> None:
    ran: list[str] = []

    async def budget(run_id: str, call: CallRecord) -> None:
        if call.handover == "submitted":
            raise CallRejected("the purchasing budget is spent")

    model = ScriptedModel([tool_calls(("purchase", {"item": "laptop"})), text("No budget.")])
    result = await sr.Runtime(store, on_handover=budget).run(
        agent(model, ran), run_id="r", input="x"
    )
    assert ran == [] and result.call("m1.c1").status == "rejected"
    part = model.requests[1].messages[-1].parts[0]
    assert part.is_error and "budget is spent" in part.content  # type: ignore[union-attr]


async def test_a_plain_function_works_as_the_handover_hook(store: Store) -> None:
    # Hooks may be sync or async, as observers may: a sync hook is called, not awaited.
    ran: list[str] = []
    seen: list[str] = []

    def budget(run_id: str, call: CallRecord) -> None:
        seen.append(call.id)
        if call.arguments == '{"item": "yacht"}':
            raise CallRejected("the purchasing budget is spent")

    model = ScriptedModel(
        [
            tool_calls(("purchase", {"item": "laptop"})),
            tool_calls(("purchase", {"item": "yacht"})),
            text("One submitted, one refused."),
        ]
    )
    runtime = sr.Runtime(store, on_handover=budget)
    result = await runtime.run(agent(model, ran), run_id="r", input="x")
    assert result.status == "completed" and ran == []
    assert seen == ["m1.c1", "m2.c1"]
    assert result.call("m1.c1").handover == "submitted"
    assert result.call("m2.c1").status == "rejected"
    assert "budget is spent" in (result.call("m2.c1").result or "")


class RefusingJournal:
    """A journal that creates submissions in the same write, and refuses some (no saving)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        if call.handover == "submitted" and call.status == "awaiting_decision":
            raise CallRejected("supplier blocked")
        await self.inner.save_call(run_id, call)


async def test_a_journal_may_refuse_a_submission_in_its_write(store: Store) -> None:
    ran: list[str] = []
    model = ScriptedModel([tool_calls(("purchase", {"item": "laptop"})), text("Blocked.")])
    result = await sr.Runtime(RefusingJournal(store)).run(
        agent(model, ran),
        run_id="r",  # type: ignore[arg-type]
        input="x",
    )
    assert result.call("m1.c1").status == "rejected" and ran == []
    snap = await store.load("r")
    assert snap is not None and snap.calls[0].status == "rejected"


async def test_a_detached_call_gives_a_receipt_and_is_settled_later_undisturbed(
    store: Store,
) -> None:
    ran: list[str] = []
    model = ScriptedModel([tool_calls(("ship", {"order_id": "7"})), text("It is on its way.")])
    runtime = sr.Runtime(store)
    result = await runtime.run(agent(model, ran), run_id="r", input="ship 7")
    assert result.status == "completed" and result.text == "It is on its way."
    call = result.call("m1.c1")
    assert (call.status, call.handover) == ("waiting", "detached")
    part = model.requests[1].messages[-1].parts[0]
    assert not part.is_error and "ticket W-7" in part.content  # type: ignore[union-attr]
    (item,) = await runtime.pending("r")
    assert (item.kind, item.blocking, item.payload) == ("detached", False, {"order_id": "7"})
    await runtime.settle("r", "m1.c1", result="delivered")
    after = await runtime.resume("r")  # nothing to do: the run stays completed
    assert after.status == "completed" and after.text == "It is on its way."
    assert after.call("m1.c1").status == "succeeded"
    again = await runtime.settle("r", "m1.c1", result="delivered")  # the same: no change
    assert (again.status, again.result) == ("succeeded", "delivered")
    with pytest.raises(sr.ConflictError, match="final"):
        await runtime.settle("r", "m1.c1", result="delivered twice")


async def test_a_host_result_recorded_before_the_runtime_saved_the_handover_wins(
    store: Store,
) -> None:
    """The host's write is authoritative: a later runtime snapshot never undoes it."""
    ran: list[str] = []
    runtime = sr.Runtime(store)
    await runtime.run(
        agent(ScriptedModel([tool_calls(("ship", {"order_id": "7"})), text("ok")]), ran),
        run_id="r",
        input="x",
    )
    snap = await store.load("r")
    assert snap is not None
    call = snap.calls[0]
    await store.update_call("r", call.id, CallUpdate(status="succeeded", result="delivered"))
    # A stale runtime snapshot (a slow writer) arrives afterwards with a higher rev.
    from dataclasses import replace

    await store.save_call("r", replace(call, rev=call.rev + 5, status="waiting", result="receipt"))
    again = await store.load("r")
    assert again is not None
    assert (again.calls[0].status, again.calls[0].result) == ("succeeded", "delivered")


async def test_a_result_the_host_records_before_the_handover_is_saved_wins(store: Store) -> None:
    runtime: sr.Runtime

    @sr.tool(side_effects=True)
    async def bank(amount: int, ctx: sr.ToolContext) -> str:
        """The bank answers faster than the runtime records the handover."""
        await runtime.settle(ctx.run_id, ctx.call_id, result="wire #9 sent")
        from steadyrun.control import await_external

        await_external({"amount": amount})

    model = ScriptedModel([tool_calls(("bank", {"amount": 5})), text("Sent.")])
    runtime = sr.Runtime(store)
    result = await runtime.run(sr.Agent(name="b", model=model, tools=[bank]), run_id="r", input="x")
    if result.status == "suspended":  # it saw its own (older) snapshot; the store knows better
        result = await runtime.resume("r")
    assert result.status == "completed"
    call = result.call("m1.c1")
    assert (call.status, call.result) == ("succeeded", "wire #9 sent")
    assert model.requests[1].messages[-1].parts[0].content == "wire #9 sent"  # type: ignore[union-attr]
