"""The run page's full timeline: input blocks, times, usage per model call and the audit trail.

The runtime records each input message it takes into the context as an ``input`` block (who
sent it, when); the display keeps calls' times, who decided, answered or settled them, and an
input request's question and answer after it is answered.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import steadyrun as sr
from steadyrun._codec import decode, encode
from steadyrun.control import CallView, Confirm, await_external, require_input
from steadyrun.records import Block
from steadyrun.service import Operations
from steadyrun.stores import MemoryStore
from steadyrun.stream import (
    DisplaySnapshot,
    RunStatusChanged,
    apply,
    diff,
    display_from_run,
    snapshot_from_json,
    snapshot_from_store,
    to_json,
)
from steadyrun.testing import ScriptedModel, text, tool_calls


def confirm(call: CallView) -> Confirm:
    return Confirm(prompt=f"Refund {call.arguments['amount_cents']} cents?")


@sr.tool(side_effects=True, policy=confirm, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
        amount_cents: How much.
    """
    return f"refunded {amount_cents} on {order_id}"


@sr.tool(side_effects=True)
def ask(question: str, ctx: sr.ToolContext) -> str:
    """Ask the customer.

    Args:
        question: What to ask.
    """
    if ctx.input_response is None:
        require_input(question, {"type": "object", "properties": {"card": {"type": "string"}}})
    return f"answer {ctx.input_response}"


@sr.tool(side_effects=True)
def bank(order_id: str) -> str:
    """Ask the bank; the host records its answer.

    Args:
        order_id: The order.
    """
    raise await_external({"order": order_id})


class Clock:
    """A clock that moves a second each time it is read."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


async def test_input_and_steering_messages_are_blocks_with_who_and_when() -> None:
    store = MemoryStore()
    agent = sr.Agent(
        name="support",
        model=ScriptedModel(
            [
                tool_calls(("refund", {"order_id": "A-1", "amount_cents": 500})),
                text("Done, and noted."),
            ]
        ),
        tools=[refund],
    )
    rt = sr.Runtime(store, agents=[agent], clock=Clock())
    first = await rt.run(agent, run_id="r", input="Refund A-1 please", input_id="first")
    assert first.status == "suspended"
    await rt.send("r", "Also: be quick.", id="steer", by="bob")
    await rt.decide("r", (await rt.pending("r"))[0].call_id, approve=True, by="carol")
    await rt.resume("r")

    snap = await store.load("r")
    assert snap is not None
    inputs = [b for b in snap.blocks if b.kind == "input"]
    assert [(b.role, b.text, b.message_id, b.by) for b in inputs] == [
        ("user", "Refund A-1 please", "first", None),
        ("user", "Also: be quick.", "steer", "bob"),
    ]
    assert all(b.at is not None for b in inputs)
    positions = [b.position for b in snap.blocks]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert snap.blocks[0].kind == "input"  # the question comes before the answer

    display = display_from_run(snap)
    shown = [b for b in display.blocks if b.kind == "input"]
    assert [(b.text, b.by, b.message_id) for b in shown] == [
        ("Refund A-1 please", None, "first"),
        ("Also: be quick.", "bob", "steer"),
    ]
    assert all(b.at is not None for b in shown)


async def test_model_blocks_carry_their_model_call_time_and_usage() -> None:
    store = MemoryStore()
    agent = sr.Agent(
        name="a",
        model=ScriptedModel([text("Hello there, how can I help?", thinking="greet")]),
    )
    rt = sr.Runtime(store, agents=[agent], clock=Clock())
    await rt.run(agent, run_id="r", input="hi")
    display = await snapshot_from_store(store, "r")
    model = [b for b in display.blocks if b.kind != "input"]
    assert [b.kind for b in model] == ["thinking", "content"]
    assert all(b.model_call_id == "m1" and b.at is not None for b in model)
    # The model call's usage is shown once, on its first block.
    assert model[0].usage is not None and model[0].usage.input_tokens == 10
    assert model[0].usage.requests == 1
    assert model[1].usage is None


async def test_calls_keep_times_decisions_answers_and_settlements() -> None:
    store = MemoryStore()
    agent = sr.Agent(
        name="a",
        model=ScriptedModel(
            [
                tool_calls(
                    ("refund", {"order_id": "A-1", "amount_cents": 500}),
                    ("refund", {"order_id": "A-2", "amount_cents": 700}),
                    ("ask", {"question": "Which card?"}),
                    ("bank", {"order_id": "A-3"}),
                ),
                text("All handled."),
            ]
        ),
        tools=[refund, ask, bank],
    )
    rt = sr.Runtime(store, agents=[agent], clock=Clock())
    await rt.run(agent, run_id="r", input="go")
    pending = await rt.pending("r")
    decisions = [p for p in pending if p.kind == "decision"]
    await rt.decide(
        "r",
        decisions[0].call_id,
        approve=True,
        arguments={"order_id": "A-1", "amount_cents": 400},
        reason="partial",
        by="alice",
    )
    await rt.decide("r", decisions[1].call_id, approve=False, reason="too much", by="bob")
    asked = next(p for p in pending if p.kind == "input")
    assert asked.wait_id is not None
    await rt.answer("r", asked.wait_id, {"card": "visa"}, by="carol")
    await rt.resume("r")
    awaited = next(p for p in (await rt.pending("r")) if p.kind == "result")
    await rt.settle("r", awaited.call_id, result="bank ok", by="dave")
    final = await rt.resume("r")
    assert final.status == "completed"

    display = await snapshot_from_store(store, "r")
    edited, rejected, question, banked = display.calls
    assert edited.decision is not None and edited.decision.decided_by == "alice"
    assert edited.decision.decided_at is not None
    assert json.loads(edited.decision.original_arguments or "{}")["amount_cents"] == 500
    assert json.loads(edited.decision.arguments or "{}")["amount_cents"] == 400
    assert edited.started_at is not None and edited.completed_at is not None
    assert edited.completed_at >= edited.started_at
    assert edited.model_call_id == "m1"
    # The approval's question stays with the call after the decision.
    assert edited.prompt == "Refund 500 cents?" and rejected.prompt == "Refund 700 cents?"
    assert rejected.status == "rejected" and rejected.decision is not None
    assert rejected.decision.reason == "too much" and rejected.decision.decided_by == "bob"
    # The question and its answer stay after the answer.
    assert question.input is not None
    assert question.input.prompt == "Which card?"
    assert question.input.response == {"card": "visa"}
    assert question.input.answered_by == "carol"
    assert question.input.answered_at is not None  # when, from the runtime's clock
    assert question.input.response_schema is not None
    assert banked.result == "bank ok" and banked.settled_by == "dave"
    assert banked.completed_at is not None


async def test_a_cancel_is_shown_with_who() -> None:
    store = MemoryStore()
    agent = sr.Agent(
        name="a",
        model=ScriptedModel([tool_calls(("refund", {"order_id": "A-1", "amount_cents": 5}))]),
        tools=[refund],
    )
    rt = sr.Runtime(store, agents=[agent], clock=Clock())
    await rt.run(agent, run_id="r", input="hello")
    await Operations(rt).cancel("r", by="frank")
    display = await snapshot_from_store(store, "r")
    assert display.status == "cancelled" and display.cancelled_by == "frank"


def test_blocks_stored_before_the_new_fields_read_with_defaults() -> None:
    old = {"id": "m1.b1", "kind": "content", "position": 0, "text": "hi", "turn": 1}
    raw = encode(Block(id="x", kind="content", position=0))
    envelope = json.loads(raw)
    envelope["data"] = old
    block = decode(json.dumps(envelope).encode(), Block)
    assert block.text == "hi" and block.at is None and block.usage is None
    assert block.role is None and block.by is None and block.message_id is None


def test_new_fields_survive_json_and_diff_apply() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    start = DisplaySnapshot(run_id="r")
    from steadyrun.stream import DisplayBlock, DisplayCall, DisplayInput

    end = DisplaySnapshot(
        run_id="r",
        blocks=(
            DisplayBlock(
                id="in.1", kind="input", position=0, text="hi", role="user", by="a", at=at
            ),
        ),
        calls=(
            DisplayCall(
                id="c1",
                name="ask",
                started_at=at,
                input=DisplayInput(wait_id="w", prompt="Q?", response={"x": 1}, answered_by="b"),
            ),
        ),
        status="cancelled",
        cancelled_by="z",
    )
    snap = start
    for d in diff(start, end):
        snap = apply(snap, d)
    assert snap.blocks == end.blocks and snap.calls == end.calls
    assert snap.cancelled_by == "z"
    assert snapshot_from_json(to_json(end)) == end
    assert RunStatusChanged(seq=1, status="cancelled", cancelled_by="z").cancelled_by == "z"
