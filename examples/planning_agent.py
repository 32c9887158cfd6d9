"""Planning: the agent keeps a task list while it works; the run publishes it as its plan.

Runs without an API key (a scripted model stands in): ``python examples/planning_agent.py``.
The plan is saved with the run, so a crash and a resume keep it.
"""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun.extensions import Planning
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool(replayable=True)
def check_inventory(sku: str) -> str:
    """Count the stock of a product.

    Args:
        sku: The product code.
    """
    return f"{sku}: 12 in stock"


model = ScriptedModel(
    [
        tool_calls(
            ("create_task", {"title": "Check stock of SKU-7"}),
            ("create_task", {"title": "Reply to the customer"}),
        ),
        tool_calls(("update_task", {"task_id": "t1", "status": "in_progress"})),
        tool_calls(("check_inventory", {"sku": "SKU-7"})),
        tool_calls(("update_task", {"task_id": "t1", "status": "completed", "notes": "12 left"})),
        tool_calls(("update_task", {"task_id": "t2", "status": "completed"})),
        text("SKU-7 is in stock: 12 left."),
    ]
)

agent = sr.Agent(
    name="shop-assistant",
    instructions="You answer questions about our shop.",
    model=model,
    tools=[check_inventory],
    extensions=[Planning()],
)


class ShowPlan(sr.Observer):
    """Prints the plan each time it changes (a UI would redraw it)."""

    def on_publish(self, run_id: str, name: str, value: object) -> None:
        if name == "planning" and isinstance(value, list):
            print("plan:", ", ".join(f"{i.id} {i.status}" for i in value))


async def main() -> None:
    runtime = sr.Runtime(sr.MemoryStore(), observers=[ShowPlan()])
    result = await runtime.run(agent, run_id="question-1", input="Is SKU-7 in stock?")
    print("answer:", result.text)
    for item in result.plan:
        print(f"  {item.id} [{item.status}] {item.title} {item.notes}".rstrip())


if __name__ == "__main__":
    asyncio.run(main())
