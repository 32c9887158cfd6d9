"""Arguments a reviewer edits: checked strictly against the tool of the run's own agent, and
kept beside the model's own arguments (every store)."""

from __future__ import annotations

import json

import pytest

import steadyrun as sr
from steadyrun.control import Confirm
from steadyrun.stores import Store
from steadyrun.stream import display_call
from steadyrun.testing import ScriptedModel, text, tool_calls


def _confirm(call: object) -> Confirm:
    return Confirm(prompt="go?")


@sr.tool(side_effects=True, policy=_confirm, concurrency_key="")
def pay(account: str, amount: float, times: int = 1) -> str:
    """Pay an account.

    Args:
        account: Who gets paid.
        amount: How much.
        times: How many payments.
    """
    return f"paid {amount} to {account} x{times}"


@sr.tool(side_effects=True, policy=_confirm, concurrency_key="", name="pay")
def pay_by_reference(reference: int) -> str:
    """Pay by a reference number (another agent's tool of the same name).

    Args:
        reference: The payment reference.
    """
    return f"paid reference {reference}"


async def _suspended(store: Store, tool: sr.Tool, args: dict[str, object]) -> sr.Runtime:
    agent = sr.Agent(
        name="payer", model=ScriptedModel([tool_calls(("pay", args)), text("done")]), tools=[tool]
    )
    runtime = sr.Runtime(store, agents=[agent])
    assert (await runtime.run(agent, run_id="r", input="pay")).status == "suspended"
    return runtime


async def test_edits_are_checked_against_the_tool_of_the_runs_own_agent(store: Store) -> None:
    other = sr.Agent(name="clerk", model=ScriptedModel([]), tools=[pay_by_reference])
    own = sr.Agent(
        name="payer",
        model=ScriptedModel([tool_calls(("pay", {"account": "A", "amount": 5})), text("ok")]),
        tools=[pay],
    )
    runtime = sr.Runtime(store, agents=[other, own])  # the other agent's "pay" comes first
    assert (await runtime.run(own, run_id="r", input="pay")).status == "suspended"
    with pytest.raises(sr.InvalidResponseError, match="account"):
        await runtime.decide("r", "m1.c1", approve=True, arguments={"reference": 7})
    edited = {"account": "B", "amount": 2.5}
    record = await runtime.decide("r", "m1.c1", approve=True, arguments=edited)
    assert record.decision is not None and json.loads(record.decision.arguments or "") == edited
    assert (await runtime.resume("r")).call("m1.c1").result == (
        '(A reviewer changed the arguments before approving: {"account": "B", "amount": 2.5}) '
        "paid 2.5 to B x1"
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"account": "A", "amount": 5, "times": True}, "times"),  # a boolean is no integer
        ({"account": "A", "amount": "15"}, "amount"),  # a string is no number
        ({"account": "A", "amount": 5, "times": "2"}, "times"),
        ({"account": 7, "amount": 5}, "account"),  # a number is no string
        ({"account": "A", "amount": 5, "tip": 1}, "tip"),  # no such argument
    ],
)
async def test_edits_are_checked_strictly_against_the_schema(
    store: Store, arguments: dict[str, object], problem: str
) -> None:
    runtime = await _suspended(store, pay, {"account": "A", "amount": 5})
    before = await store.load("r")
    with pytest.raises(sr.InvalidResponseError, match=problem):
        await runtime.decide("r", "m1.c1", approve=True, arguments=arguments)
    assert await store.load("r") == before  # nothing stored


async def test_the_decision_keeps_the_models_arguments_beside_the_edited_ones(
    store: Store,
) -> None:
    model_args = {"account": "A", "amount": 5}
    runtime = await _suspended(store, pay, model_args)
    edited = '{"account": "A", "amount": 4.5, "times": 2}'
    await runtime.decide("r", "m1.c1", approve=True, arguments=edited, decided_by="dana")
    done = await runtime.resume("r")
    call = done.call("m1.c1")
    assert call.result is not None and call.result.endswith("paid 4.5 to A x2")
    decision = call.decision
    assert decision is not None
    assert (decision.arguments, decision.decided_by) == (edited, "dana")
    assert json.loads(decision.original_arguments or "") == model_args
    shown = display_call(call).decision
    assert shown is not None and shown.edited
    assert (shown.arguments, json.loads(shown.original_arguments or "")) == (edited, model_args)
    # The same edit again is the same decision (JSON compared as values); another is refused.
    same = {"times": 2, "amount": 4.5, "account": "A"}
    assert (await runtime.decide("r", "m1.c1", approve=True, arguments=same)).decision == decision
    with pytest.raises(sr.ConflictError):
        await runtime.decide("r", "m1.c1", approve=True, arguments={"account": "A", "amount": 1})


async def test_an_approval_without_edits_stores_no_arguments(store: Store) -> None:
    runtime = await _suspended(store, pay, {"account": "A", "amount": 5})
    record = await runtime.decide("r", "m1.c1", approve=True)
    assert record.decision is not None
    assert (record.decision.arguments, record.decision.original_arguments) == (None, None)
    shown = display_call(record).decision
    assert shown is not None and not shown.edited and shown.original_arguments is None
