import steadyrun as sr
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool(side_effects=False, concurrency_key="")  # read-only: may run alongside others
def lookup_order(order_id: str) -> dict:
    """Look up an order.

    Args:
        order_id: The order id, e.g. "A-1001".
    """
    return {"id": order_id, "status": "delivered", "charged_cents": 2 * 4999}


@sr.tool(side_effects=True, concurrency_key=lambda args: args["order_id"])
async def refund(order_id: str, amount_cents: int) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much to refund, in cents.
    """
    return f"refunded {amount_cents} cents on {order_id}"


# A scripted model stands in for a provider's here, so no API key is needed.
model = ScriptedModel(
    [
        tool_calls(("lookup_order", {"order_id": "A-1001"})),
        tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999})),
        text("You were charged twice; I refunded the duplicate charge."),
    ]
)
agent = sr.Agent(name="support", model=model, tools=[lookup_order, refund])

runtime = sr.Runtime(sr.SqliteStore("runs.db"))  # runs are kept in this file
result = sr.run_sync(
    runtime.run(
        agent,
        run_id="ticket-4711",
        input="I was charged twice.",
        input_id="ticket-4711:1",  # the message's id: run again, it is not taken twice
    )
)
for call in result.calls:
    print(f"{call.name}({call.arguments}) -> {call.status}")
print(f"status: {result.status}; answer: {result.text}")
