"""Sub-agents: the main agent hands tasks to a general sub-agent and to a typed delegate.

Runs without an API key (scripted models stand in): ``python examples/subagents.py``.
Each delegation is a durable child run; its calls come back under the delegation call.
"""

from __future__ import annotations

import asyncio

import pydantic

import steadyrun as sr
from steadyrun.extensions import Delegate, SubAgents
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls


@sr.tool(replayable=True, concurrency_key="")
def search_docs(query: str) -> str:
    """Search the product documentation.

    Args:
        query: What to look for.
    """
    return f"docs about {query}: set RETRIES=3 to retry failed jobs"


class Review(pydantic.BaseModel):
    """What the reviewer decides about a draft answer."""

    ok: bool
    comment: str


# The reviewer is a typed delegate with its own model: its result is validated as a Review.
reviewer = Delegate(
    name="reviewer",
    description="Review a draft answer for accuracy before it is sent.",
    instructions="You review support answers. Be strict.",
    model=ScriptedModel(
        [tool_calls(("submit_result", {"result": {"ok": True, "comment": "accurate"}}))]
    ),
    output=Review,
    limits=sr.Limits(max_iterations=3),
)


def main_and_general_subagent(request: sr.ModelRequest) -> sr.ModelResponse:
    """Stands in for one real model serving the main agent and the general sub-agent."""
    results = [p for m in request.messages if m.role == "tool" for p in m.parts]
    if request.instructions.startswith("You are a sub-agent"):
        if not results:
            return tool_calls(("search_docs", {"query": request.messages[0].text}))
        return text("Set RETRIES=3.")
    if not results:
        return tool_calls(("delegate", {"task": "how to retry failed jobs"}))
    if len(results) == 1:
        return tool_calls(("delegate_reviewer", {"task": "Draft: set RETRIES=3."}))
    return text("Set RETRIES=3 in your job settings; failed jobs are then retried.")


agent = sr.Agent(
    name="support",
    instructions="You answer questions about our job runner.",
    model=FunctionModel(main_and_general_subagent),
    tools=[search_docs],
    extensions=[SubAgents([reviewer])],
)


async def main() -> None:
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent, run_id="ticket-9", input="How do I retry failed jobs?"
    )
    print("answer:", result.text)
    for call in result.calls:
        indent = "    " if call.parent_id else "  "
        print(f"{indent}{call.id} {call.name} {call.status}: {call.result}")
    print("model requests:", result.usage.requests)


if __name__ == "__main__":
    asyncio.run(main())
