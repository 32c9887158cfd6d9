"""An agent with every kind of call, random scripts for it, and a driver that records streams."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import steadyrun as sr
from steadyrun.control import CallView, Confirm, require_input
from steadyrun.stores import Store
from steadyrun.stream import Delta, DisplaySnapshot, Publisher, StreamEvent
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool(concurrency_key="")
def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order.
    """
    return f"{order_id}: delivered"


@sr.tool(concurrency_key="")
def broken(order_id: str) -> str:
    """A tool that fails.

    Args:
        order_id: The order.
    """
    raise ValueError(f"no such order {order_id}")


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
        require_input(question, {"type": "string"}, state={"q": question})
    return f"the customer said {ctx.input_response}"


TOOLS = [lookup, broken, refund, ask]

one_call = st.sampled_from(
    [
        ("lookup", {"order_id": "A-1"}),
        ("lookup", {"order_id": "A-2"}),
        ("broken", {"order_id": "A-3"}),
        ("refund", {"order_id": "A-1", "amount_cents": 500}),
        ("ask", {"question": "Which card?"}),
        ("nope", {}),
    ]
)
responses = st.one_of(
    st.builds(text, st.sampled_from(["Done.", "All set, thanks!"])),
    st.builds(lambda t: text("Done.", thinking=t), st.sampled_from(["hmm", "let me see"])),
    st.lists(one_call, min_size=1, max_size=3).map(lambda calls: tool_calls(*calls)),
)
scripts = st.lists(responses, min_size=1, max_size=6)


@dataclass
class Recorded:
    first: DisplaySnapshot
    deltas: list[Delta]
    last: DisplaySnapshot


def build_agent(script: list[sr.ModelResponse]) -> sr.Agent:
    return sr.Agent(name="support", model=ScriptedModel(script), tools=TOOLS)


async def drive(store: Store, script: list[sr.ModelResponse], approvals: list[bool]) -> Recorded:
    """Run a script to its end, deciding and answering what it waits for; record the stream."""
    publisher = Publisher(store, buffer_size=100_000)
    runtime = sr.Runtime(store, observers=[publisher])
    agent = build_agent(script)
    await publisher.run_started("r", agent.name)
    events: list[StreamEvent] = []

    async def follow() -> None:
        async for event in publisher.follow("r", poll_interval=0.05):
            if event.kind != "keepalive":
                events.append(event)

    follower = asyncio.create_task(follow())
    result = await runtime.run(agent, run_id="r", input="I was charged twice.")
    await publisher.run_ended("r")
    rounds = 0
    while result.status == "suspended" and rounds < 6:
        for item in await runtime.pending("r"):
            approve = approvals[rounds % len(approvals)] if approvals else True
            if item.kind == "decision":
                await runtime.decide("r", item.call_id, approve=approve, reason="policy")
            elif item.kind == "input" and item.wait_id:
                await runtime.answer("r", item.wait_id, "visa")
        await publisher.refresh("r")
        await publisher.run_started("r", agent.name)
        result = await runtime.resume("r")
        await publisher.run_ended("r")
        rounds += 1
    await publisher.wait_idle()
    last = publisher.current("r")
    assert last is not None
    for _ in range(10_000):
        if events and _seq(events[-1]) == last.seq:
            break
        await asyncio.sleep(0)
    follower.cancel()
    await asyncio.gather(follower, return_exceptions=True)
    assert events[0].kind == "snapshot" and events[0].snapshot is not None
    deltas = [e.delta for e in events[1:] if e.delta is not None]
    assert all(e.kind == "delta" for e in events[1:])
    return Recorded(first=events[0].snapshot, deltas=deltas, last=last)


def _seq(event: StreamEvent) -> int:
    return int(event.id.rpartition(".")[2])


def args(**kw: Any) -> dict[str, Any]:
    return kw
