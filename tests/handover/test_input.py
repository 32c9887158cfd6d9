"""Input requests: a tool asks a person, the answer is validated and re-enters the tool."""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun.control import require_input
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls

CARD = {
    "type": "object",
    "properties": {"card": {"type": "string", "pattern": "^[0-9]{4}$"}},
    "required": ["card"],
    "additionalProperties": False,
}


def agent(model: ScriptedModel, log: list[object], **kw: object) -> sr.Agent:
    @sr.tool(side_effects=True)
    def pay(amount: int, ctx: sr.ToolContext) -> str:
        """Pay, asking which card and then for a confirmation code."""
        log.append(("enter", ctx.input_state, ctx.input_response))
        if ctx.input_response is None:
            require_input("Which card (last 4 digits)?", CARD, state={"amount": amount})
        if isinstance(ctx.input_response, dict):
            require_input(
                "Enter the code we texted you",
                {"type": "integer"},
                state={**ctx.input_state, "card": ctx.input_response["card"]},
            )
        return f"paid {ctx.input_state['amount']} with card {ctx.input_state['card']}"

    return sr.Agent(name="pay", model=model, tools=[pay], **kw)  # type: ignore[arg-type]


async def test_two_questions_then_the_tool_finishes_with_both_answers(store: Store) -> None:
    log: list[object] = []
    model = ScriptedModel([tool_calls(("pay", {"amount": 30})), text("Paid.")])
    runtime = sr.Runtime(store)
    first = await runtime.run(agent(model, log), run_id="r", input="pay 30")
    assert first.status == "suspended"
    (item,) = await runtime.pending("r")
    assert (item.kind, item.prompt, item.response_schema) == (
        "input",
        "Which card (last 4 digits)?",
        CARD,
    )
    await runtime.answer("r", item.wait_id, {"card": "4242"})  # type: ignore[arg-type]
    second = await runtime.resume("r")
    assert second.status == "suspended"
    (item2,) = await runtime.pending("r")
    assert item2.prompt == "Enter the code we texted you" and item2.wait_id != item.wait_id
    with pytest.raises(sr.NotPendingError):  # the first wait is no longer current
        await runtime.answer("r", item.wait_id, {"card": "1111"})  # type: ignore[arg-type]
    await runtime.answer("r", item2.wait_id, 991)  # type: ignore[arg-type]
    done = await runtime.resume("r")
    assert done.status == "completed" and done.text == "Paid."
    assert done.call("m1.c1").result == "paid 30 with card 4242"
    assert log == [
        ("enter", None, None),
        ("enter", {"amount": 30}, {"card": "4242"}),
        ("enter", {"amount": 30, "card": "4242"}, 991),
    ]
    assert len(model.requests) == 2  # the model was not asked again while waiting


async def test_bad_answers_are_typed_errors_and_store_nothing(store: Store) -> None:
    log: list[object] = []
    runtime = sr.Runtime(store)
    await runtime.run(
        agent(ScriptedModel([tool_calls(("pay", {"amount": 5}))]), log), run_id="r", input="x"
    )
    (item,) = await runtime.pending("r")
    before = await store.load("r")
    with pytest.raises(sr.InvalidResponseError, match="card"):
        await runtime.answer("r", item.wait_id, {"card": "42"})  # type: ignore[arg-type]
    with pytest.raises(sr.InvalidResponseError):
        await runtime.answer("r", item.wait_id, {"card": "4242", "cvv": "1"})  # type: ignore[arg-type]
    with pytest.raises(sr.UnknownCallError):
        await runtime.answer("r", "m9.c9.w2", {"card": "4242"})
    with pytest.raises(sr.UnknownCallError):
        await runtime.answer("r", "garbage", {"card": "4242"})
    assert await store.load("r") == before
    await runtime.answer("r", item.wait_id, {"card": "4242"})  # type: ignore[arg-type]
    await runtime.answer("r", item.wait_id, {"card": "4242"})  # type: ignore[arg-type]  # same: ok
    with pytest.raises(sr.ConflictError):
        await runtime.answer("r", item.wait_id, {"card": "0000"})  # type: ignore[arg-type]


async def test_a_run_that_cannot_suspend_fails_the_call_with_a_reason(store: Store) -> None:
    log: list[object] = []
    model = ScriptedModel([tool_calls(("pay", {"amount": 5})), text("I cannot ask here.")])
    result = await sr.Runtime(store).run(
        agent(model, log, can_suspend=False), run_id="r", input="x"
    )
    assert result.status == "completed"
    assert result.call("m1.c1").status == "failed"
    assert "not possible here" in (result.call("m1.c1").error or "")


async def test_an_answered_call_still_runs_when_new_input_arrived_meanwhile(
    store: Store,
) -> None:
    # New input cancels the calls of the batch that had not started, but not one a person
    # cleared on this resume: the answer was given to it, so it re-enters its tool.
    ran: list[object] = []

    @sr.tool(side_effects=True)
    def transfer(amount: int, ctx: sr.ToolContext) -> str:
        """Transfer money, asking which account first."""
        if ctx.input_response is None:
            require_input("Which account?", {"type": "string"})
        ran.append(ctx.input_response)
        return f"sent {amount} to {ctx.input_response}"

    model = ScriptedModel([tool_calls(("transfer", {"amount": 7})), text("Done; and noted.")])
    runtime = sr.Runtime(store)
    agent = sr.Agent(name="bank", model=model, tools=[transfer])
    assert (await runtime.run(agent, run_id="r", input="send 7")).status == "suspended"
    (item,) = await runtime.pending("r")
    await runtime.answer("r", item.wait_id, "savings")  # type: ignore[arg-type]
    await runtime.send("r", "also, what is my balance?", id="later")
    result = await runtime.resume("r", agent=agent)
    assert ran == ["savings"]
    assert result.call("m1.c1").status == "succeeded"
    assert result.call("m1.c1").result == "sent 7 to savings"
    # The model then reads the result and the new input together.
    last = model.requests[-1].messages
    assert [m.role for m in last[-2:]] == ["tool", "user"]
    assert result.status == "completed"
