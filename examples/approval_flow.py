"""An approval flow driven from a script: the agent asks to refund, a person approves a smaller
amount, the run goes on where it stopped.

Run it with ``python examples/approval_flow.py``. It uses a scripted model (no API key needed)
and keeps the run in a SQLite file, so the decision could come from another process, hours later.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.testing import ScriptedModel, text, tool_calls


def needs_approval(call: CallView) -> Confirm | None:
    """Refunds above $20 wait for a person."""
    cents = call.arguments["amount_cents"]
    if cents > 2000:
        return Confirm(prompt=f"Refund ${cents / 100:.2f} on order {call.arguments['order_id']}?")
    return None


@sr.tool(side_effects=True, policy=needs_approval, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int, ctx: sr.ToolContext) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    return f"refunded ${amount_cents / 100:.2f} on {order_id} (refund id re_{ctx.call_id})"


def build_agent() -> sr.Agent:
    model = ScriptedModel(  # a fake model for this example
        [
            tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999})),
            text("Done: I refunded $25.00 on A-1001, as agreed with my supervisor."),
        ]
    )
    return sr.Agent(name="support", model=model, tools=[refund])


async def main(db: Path) -> None:
    agent = build_agent()

    # 1. The customer writes; the agent wants to refund $49.99: the run suspends.
    async with sr.SqliteStore(db) as store:
        result = await sr.Runtime(store).run(
            agent, run_id="ticket-4711", input="I was charged twice for A-1001."
        )
        print(f"run: {result.status}")

    # 2. Later, in a reviewer's process: list what waits, decide (approve a smaller amount).
    async with sr.SqliteStore(db) as store:
        reviewer = sr.Runtime(store, agents=[agent])
        for item in await reviewer.pending("ticket-4711"):
            print(f"waiting: {item.kind} on {item.name} {item.arguments}: {item.prompt}")
            await reviewer.decide(
                "ticket-4711",
                item.call_id,
                approve=True,
                arguments={"order_id": "A-1001", "amount_cents": 2500},
                reason="policy: half now, rest after the investigation",
                decided_by="supervisor@example.com",
            )

    # 3. A worker resumes the run: the approved call runs once, the model finishes.
    async with sr.SqliteStore(db) as store:
        result = await sr.Runtime(store, agents=[agent]).resume("ticket-4711")
        call = result.calls[0]
        print(f"call: {call.name} {call.status}: {call.result}")
        print(f"run: {result.status}: {result.text}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder) / "runs.db"))
