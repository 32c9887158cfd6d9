"""The smallest complete steadyrun program: an agent with two tools, run to completion.

It uses a scripted model so it runs without an API key: ``python examples/quickstart.py``.
"""

from __future__ import annotations

import steadyrun as sr
from steadyrun.testing import ScriptedModel, text, tool_calls

ORDERS = {"A-1001": {"status": "delivered", "total_cents": 4999}}


@sr.tool(replayable=True, concurrency_key="")
def lookup_order(order_id: str) -> dict[str, object]:
    """Look an order up.

    Args:
        order_id: The order id, like A-1001.
    """
    return {"order_id": order_id, **ORDERS[order_id]}


@sr.tool(side_effects=True, concurrency_key=lambda args: args["order_id"])
async def refund(order_id: str, amount_cents: int) -> str:
    """Refund money on an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    return f"refunded {amount_cents} cents on {order_id}"


# A real agent passes a provider model here; the script stands in for one.
model = ScriptedModel(
    [
        tool_calls(("lookup_order", {"order_id": "A-1001"})),
        tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999})),
        text("I refunded the duplicate charge of $49.99 on order A-1001."),
    ]
)

agent = sr.Agent(
    name="support",
    instructions="You help customers with their orders.",
    model=model,
    tools=[lookup_order, refund],
)

runtime = sr.Runtime(sr.MemoryStore())
result = sr.run_sync(
    runtime.run(agent, run_id="ticket-1", input="I was charged twice for order A-1001.")
)

result.raise_for_status()  # a failed run raises its typed error
print(f"status: {result.status}")
for call in result.calls:
    print(f"  {call.name}({call.arguments}) -> {call.status}: {call.result}")
print(f"answer: {result.text}")
