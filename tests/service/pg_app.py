"""The app ``steadyrun serve`` and ``steadyrun worker`` subprocesses of the PostgreSQL tests load.

``--app pg_app:app``. The store's DSN comes from ``SERVE_DSN``, the ledger from
``SERVE_EFFECTS``. Two agents:

- ``shipper`` (``worker_child.make_agent``): looks an order up, ships it (side effects, needs a
  person's approval), answers. The ledger gets ``ship <run> <call> <pid>``, one fsynced
  ``O_APPEND`` line per body.
- ``slow_shipper``: ships two orders with ``slow_ship`` (side effects, no approval), which
  writes ``start <run> <call> <pid>``, sleeps ``SERVE_SLOW`` seconds and writes ``end ...``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from worker_child import make_agent, record_effect

import steadyrun as sr
from steadyrun.service import App
from steadyrun.stores import PostgresStore
from steadyrun.testing import FunctionModel, text, tool_calls

EFFECTS = Path(os.environ.get("SERVE_EFFECTS", "effects.txt"))
SLOW_AGENT = "slow_shipper"


@sr.tool(side_effects=True)
async def slow_ship(order: str, ctx: sr.ToolContext) -> str:
    """Ship an order, slowly.

    Args:
        order: The order.
    """
    record_effect(EFFECTS, f"start {ctx.run_id} {ctx.call_id} {os.getpid()}")
    await asyncio.sleep(float(os.environ.get("SERVE_SLOW", "30")))
    record_effect(EFFECTS, f"end {ctx.run_id} {ctx.call_id} {os.getpid()}")
    return f"shipped {order}"


def _ship_two(request: sr.ModelRequest) -> sr.ModelResponse:
    # A pure function of the request: whichever process resumes the run asks the same.
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return tool_calls(("slow_ship", {"order": "A-1"}))
    if len(tools) == 1:
        return tool_calls(("slow_ship", {"order": "A-2"}))
    return text("both shipped (or reviewed)")


slow_shipper = sr.Agent(name=SLOW_AGENT, model=FunctionModel(_ship_two), tools=[slow_ship])
# A small pool: three processes share the server with the rest of the test suite.
store = PostgresStore(os.environ.get("SERVE_DSN", "dbname=steadyrun"), max_size=6)
app = App(store, agents=[make_agent(EFFECTS), slow_shipper], poll=0.5)
