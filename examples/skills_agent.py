"""An agent with skills: it loads one skill's instructions and hands a task to a forked skill.

The skills are the folders of ``examples/skills``: ``refund-policy`` (instructions and a
resource file, loaded into the conversation) and ``order-digest`` (``context: fork``: it runs
in a sub-agent that gets the task and returns its answer). A scripted model stands in for a
real one, so it runs without an API key: ``python examples/skills_agent.py``.
"""

from __future__ import annotations

from pathlib import Path

import steadyrun as sr
from steadyrun.extensions.skills import Skills
from steadyrun.testing import ScriptedModel, text, tool_calls

SKILLS = Path(__file__).resolve().parent / "skills"
ORDERS = {
    "A-1001": {"status": "delivered", "total_cents": 4999},
    "A-1002": {"status": "shipped", "total_cents": 1500},
}


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


# One script serves the main agent and the forked skill's sub-agent: the sub-agent's two model
# calls come while load_skill("order-digest") runs, between the main agent's calls.
model = ScriptedModel(
    [
        tool_calls(("load_skill", {"name": "refund-policy"})),
        tool_calls(("read_skill_resource", {"skill": "refund-policy", "path": "limits.md"})),
        tool_calls(("lookup_order", {"order_id": "A-1001"})),
        tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999})),
        tool_calls(
            ("load_skill", {"name": "order-digest", "task": "Digest orders A-1001 and A-1002."})
        ),
        # the sub-agent, with the skill's instructions as its own
        tool_calls(
            ("lookup_order", {"order_id": "A-1001"}), ("lookup_order", {"order_id": "A-1002"})
        ),
        text("A-1001: delivered, $49.99\nA-1002: shipped, $15.00\ntotal: $64.99"),
        # the main agent again
        text("I refunded the duplicate charge of $49.99 on A-1001. Your orders: $64.99 in all."),
    ]
)

agent = sr.Agent(
    name="support",
    instructions="You help customers with their orders.",
    model=model,
    tools=[lookup_order, refund],
    extensions=[Skills(SKILLS)],
)

runtime = sr.Runtime(sr.MemoryStore())
result = sr.run_sync(
    runtime.run(agent, run_id="ticket-7", input="I was charged twice; and what did I order?")
)
result.raise_for_status()

print("skills in the instructions:")
for line in model.requests[0].instructions.splitlines():
    if line.startswith("- "):
        print(f"  {line}")
for call in result.calls:
    indent = "    " if call.parent_id else "  "
    first = (call.result or call.error or "").splitlines()[0]
    print(f"{indent}{call.id} {call.name} -> {call.status}: {first}")
print(f"run: {result.status}")
print(f"answer: {result.text}")
