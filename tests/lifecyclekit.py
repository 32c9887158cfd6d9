"""A run tree for the lifecycle tests: a delegation to a sub-agent, then a call that waits for a
decision. ``start`` leaves the run suspended on that decision; approving and resuming completes
it. The model is a function of the request, so any process (and any store) can resume it.
"""

from __future__ import annotations

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.extensions import SubAgents
from steadyrun.testing import FunctionModel, text, tool_calls

SUB = "You are a sub-agent"


def _confirm(call: CallView) -> Confirm:
    return Confirm(prompt=f"Ship {call.arguments['item']}?")


@sr.tool(side_effects=True, policy=_confirm)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    return f"shipped {item}"


def _respond(request: sr.ModelRequest) -> sr.ModelResponse:
    if request.instructions.startswith(SUB):
        return text(f"checked {request.messages[0].text}")
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    item = request.messages[last_user].text
    rounds = sum(1 for m in request.messages[last_user:] if m.role == "tool")
    if rounds == 0:
        return tool_calls(("delegate", {"task": item}))
    if rounds == 1:
        return tool_calls(("ship", {"item": item}))
    return text(f"done: {item}")


AGENT = sr.Agent(
    name="shipper",
    instructions="You ship things.",
    model=FunctionModel(_respond),
    tools=[ship],
    extensions=[SubAgents()],
)
"""The agent every lifecycle test runs: it keeps no state, so every runtime may share it."""


def agent() -> sr.Agent:
    """``AGENT``."""
    return AGENT


async def start(runtime: sr.Runtime, run_id: str, item: str = "a book") -> sr.RunResult:
    """Run until the run waits for the decision on ``ship``."""
    result = await runtime.run(agent(), run_id=run_id, input=item)
    assert result.status == "suspended", result
    return result


async def finish(runtime: sr.Runtime, run_id: str) -> sr.RunResult:
    """Approve what the run waits for and resume it, until it stops waiting (each input's turn)."""
    for _ in range(5):
        for item in await runtime.pending(run_id):
            await runtime.decide(run_id, item.call_id, approve=True)
        result = await runtime.resume(run_id)
        if result.status != "suspended":
            return result
    return result
