"""Who: every host write takes ``by=`` and the store keeps it, on every store.

The first answer's ``by`` stays: a repeat (by anyone) changes nothing, not even who.
"""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun._errors import RunCancelledError, UsageError
from steadyrun.control import CallView, Confirm, await_external, require_input
from steadyrun.service import Operations
from steadyrun.stores import Store
from steadyrun.testing import FunctionModel, text, tool_calls


@sr.tool(side_effects=True)
def charge(amount: int) -> str:
    """Charge a card (the payment system answers later).

    Args:
        amount: Cents.
    """
    await_external({"amount": amount})


def confirm(call: CallView) -> Confirm:
    return Confirm(prompt="Ship it?")


@sr.tool(side_effects=True, policy=confirm)
def ship(order_id: str) -> str:
    """Ship an order.

    Args:
        order_id: The order.
    """
    return f"shipped {order_id}"


@sr.tool(side_effects=True)
def ask(question: str, ctx: sr.ToolContext) -> str:
    """Ask the customer.

    Args:
        question: What to ask.
    """
    if ctx.input_response is None:
        require_input(question, {"type": "string"})
    return f"they said {ctx.input_response}"


def agent() -> sr.Agent:
    """Calls the tool the input names, then answers."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        last = request.messages[-1]
        if last.role != "user":
            return text("Done.")
        if "charge" in last.text:
            return tool_calls(("charge", {"amount": 5}))
        if "ship" in last.text:
            return tool_calls(("ship", {"order_id": "A-1"}))
        return tool_calls(("ask", {"question": "Which card?"}))

    return sr.Agent(name="shop", model=FunctionModel(respond), tools=[charge, ship, ask])


async def test_settle_decide_answer_send_and_cancel_keep_who(store: Store) -> None:
    shop = agent()
    runtime = sr.Runtime(store, agents=[shop])

    assert (await runtime.run(shop, run_id="c", input="charge")).status == "suspended"
    settled = await runtime.settle("c", "m1.c1", result="paid", by="erin")
    assert settled.settled_by == "erin"
    again = await runtime.settle("c", "m1.c1", result="paid", by="frank")
    assert again.settled_by == "erin"  # a repeat changes nothing, not even who
    assert (await runtime.resume("c")).status == "completed"
    loaded = await store.load_call("c", "m1.c1")
    assert loaded is not None and loaded.settled_by == "erin"

    await runtime.run(shop, run_id="s", input="ship")
    decided = await runtime.decide("s", "m1.c1", approve=True, by="erin")
    assert decided.decision is not None and decided.decision.decided_by == "erin"
    try:
        await runtime.decide("s", "m1.c1", approve=True, by="erin", decided_by="frank")
        raise AssertionError("two names for who decided were taken")
    except UsageError as exc:
        assert "give one" in str(exc)

    await runtime.run(shop, run_id="a", input="ask")
    (item,) = await runtime.pending("a")
    assert item.wait_id is not None
    answered = await runtime.answer("a", item.wait_id, "visa", by="gail")
    assert answered.input_request is not None and answered.input_request.answered_by == "gail"
    assert (await runtime.resume("a")).status == "completed"
    done = await store.load_call("a", "m1.c1")
    assert done is not None and done.input_request is not None
    assert done.input_request.answered_by == "gail"  # the run's own later writes keep it

    sent = await runtime.send("a", "thanks", id="n1", by="gail")
    assert (sent.meta or {}).get("steadyrun.by") == "gail"

    await runtime.run(shop, run_id="x", input="charge")
    cancelled = await Operations(runtime).cancel("x", by="hal")
    assert cancelled.runs == ["x"]
    snap = await store.load("x")
    assert snap is not None and snap.run.cancelled_by == "hal"
    assert [(c.status, c.error) for c in snap.calls] == [
        ("cancelled", "the run was cancelled by hal")
    ]
    assert await Operations(runtime).cancelled("x") == cancelled
    with pytest.raises(RunCancelledError):  # nothing would ever take it
        await runtime.send("x", "one more thing", by="hal")
