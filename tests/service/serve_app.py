"""The app a ``steadyrun serve`` subprocess of the tests serves (``--app serve_app:app``).

Its SQLite file and effects file come from ``SERVE_DB`` and ``SERVE_EFFECTS``; the tool
``slow_ship`` (side effects) writes ``start``, sleeps ``SERVE_SLOW`` seconds, writes ``end``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from servicekit import asking_agent, support_agent
from worker_child import record_effect

import steadyrun as sr
from steadyrun.control import await_external
from steadyrun.service import App
from steadyrun.stores import SqliteStore
from steadyrun.testing import FunctionModel, text, tool_calls

EFFECTS = Path(os.environ.get("SERVE_EFFECTS", "effects.txt"))


@sr.tool(side_effects=True)
async def slow_ship(order: str, ctx: sr.ToolContext) -> str:
    """Ship an order, slowly.

    Args:
        order: The order.
    """
    record_effect(EFFECTS, f"start {ctx.run_id} {ctx.call_id}")
    await asyncio.sleep(float(os.environ.get("SERVE_SLOW", "30")))
    record_effect(EFFECTS, f"end {ctx.run_id} {ctx.call_id}")
    return f"shipped {order}"


def _ship(request: sr.ModelRequest) -> sr.ModelResponse:
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return tool_calls(("slow_ship", {"order": "A-1"}))
    if len(tools) == 1:
        return tool_calls(("slow_ship", {"order": "A-2"}))
    return text("both shipped (or reviewed)")


shipper = sr.Agent(name="shipper", model=FunctionModel(_ship), tools=[slow_ship])


@sr.tool(side_effects=True)
def bank_check(order: str) -> str:
    """Ask the bank; its answer comes later, recorded by the host.

    Args:
        order: The order.
    """
    raise await_external({"order": order})


def _await(request: sr.ModelRequest) -> sr.ModelResponse:
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return tool_calls(("bank_check", {"order": "A-1"}))
    return text("the bank said: " + "".join(getattr(p, "content", "") for p in tools[-1].parts))


awaiter = sr.Agent(name="awaiter", model=FunctionModel(_await), tools=[bank_check])
app = App(
    SqliteStore(os.environ.get("SERVE_DB", "runs.db")),
    agents=[support_agent(), asking_agent(), shipper, awaiter],
    poll=0.5,
)
