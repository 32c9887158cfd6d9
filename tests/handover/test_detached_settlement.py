"""A detached (or submitted) call's later settlement reaches the model only when the host asks.

By default the host's ``settle`` is recorded for the host and the model never hears of it; with
``Runtime(post_settlements=True)`` it is posted to the run's feed, so the model learns it at its
next turn.
"""

from __future__ import annotations

import steadyrun as sr
from steadyrun.control import CallView, Submit, await_external, detach
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls

EN = sr.Texts()


@sr.tool(side_effects=True)
def ship(order_id: str) -> str:
    """Hand an order to the warehouse, which ships it later.

    Args:
        order_id: The order.
    """
    detach(f"warehouse ticket for {order_id}", {"order_id": order_id})


def to_finance(call: CallView) -> Submit:
    return Submit(receipt="sent to finance for approval", payload=call.arguments)


@sr.tool(side_effects=True, policy=to_finance)
def refund(order_id: str) -> str:
    """Refund an order (finance decides).

    Args:
        order_id: The order.
    """
    raise AssertionError("a submitted call never runs here")


def agent(model: ScriptedModel) -> sr.Agent:
    return sr.Agent(name="shop", model=model, tools=[ship, refund])


async def test_by_default_the_model_never_hears_of_a_later_settlement(store: Store) -> None:
    model = ScriptedModel([tool_calls(("ship", {"order_id": "A-1"})), text("It is on its way.")])
    runtime = sr.Runtime(store)
    first = await runtime.run(agent(model), run_id="r", input="ship A-1")
    assert first.status == "completed"
    settled = await runtime.settle("r", "m1.c1", result="delivered on Monday")
    assert settled.status == "succeeded"
    assert await store.pending("r", 0) == 0  # nothing for the run to take
    again = await runtime.resume("r")
    assert again.status == "completed" and again.text == "It is on its way."
    assert len(model.requests) == 2


async def test_with_the_opt_in_the_settlement_is_posted_and_the_model_answers_it(
    store: Store,
) -> None:
    model = ScriptedModel(
        [
            tool_calls(("ship", {"order_id": "A-1"}), ("refund", {"order_id": "B-2"})),
            text("Both are under way."),
            text("A-1 was delivered on Monday."),
            text("Finance declined the refund of B-2."),
        ]
    )
    runtime = sr.Runtime(store, post_settlements=True)
    first = await runtime.run(agent(model), run_id="r", input="ship A-1, refund B-2")
    assert first.status == "completed"
    ship_call, refund_call = first.call("m1.c1"), first.call("m1.c2")

    await runtime.settle("r", "m1.c1", result="delivered on Monday")
    assert await store.pending("r", 0) > 0
    done = await runtime.resume("r")
    assert done.text == "A-1 was delivered on Monday."
    posted = model.requests[2].messages[-1]
    assert posted.role == "system"
    assert posted.text == EN.settled_result.format(
        call_id=ship_call.provider_call_id, name="ship", result="delivered on Monday"
    )

    await runtime.settle("r", "m1.c2", error="declined: outside the refund window")
    done = await runtime.resume("r")
    assert done.text == "Finance declined the refund of B-2."
    assert model.requests[3].messages[-1].text == EN.settled_error.format(
        call_id=refund_call.provider_call_id,
        name="refund",
        error="declined: outside the refund window",
    )
    # Posted once: settling is final, and the feed drops a repeated message.
    assert sum(m.role == "system" for m in done.messages) == 2


async def test_settling_a_call_the_run_waits_for_posts_nothing(store: Store) -> None:
    @sr.tool(side_effects=True)
    def wire(amount: int) -> str:
        """Wire money (the bank answers later).

        Args:
            amount: How much.
        """
        await_external({"amount": amount})

    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("Sent.")])
    runtime = sr.Runtime(store, post_settlements=True)
    agent = sr.Agent(name="bank", model=model, tools=[wire])
    assert (await runtime.run(agent, run_id="r", input="pay")).status == "suspended"
    await runtime.settle("r", "m1.c1", result="wire #7 sent")
    done = await runtime.resume("r")
    assert done.text == "Sent."
    assert not any(m.role == "system" for m in done.messages)  # the result is in its batch
