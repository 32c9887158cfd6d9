"""A run whose sub-agent is killed with SIGKILL inside a side effect.

``python subagent_kill_child.py FOLDER`` starts run ``r`` on ``FOLDER/runs.db``: the main agent
delegates, the sub-agent calls ``charge`` (side effects, runs alone; ``lookup`` is queued behind
it), and ``charge`` records its effect in ``FOLDER/ledger``, writes ``FOLDER/inside`` and waits
to be killed. ``test_subagent_kill.py`` kills this process there and resumes the run itself,
with the same agent (``build``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import steadyrun as sr
from steadyrun.extensions import SubAgents
from steadyrun.testing import FunctionModel, text, tool_calls

SUB = "You are a sub-agent"


def _results(request: sr.ModelRequest) -> list[str]:
    return [p.content for m in request.messages if m.role == "tool" for p in m.parts]  # type: ignore[union-attr]


def build(folder: Path) -> sr.Agent:
    """The agent, in the killed process and in the one that resumes it."""

    @sr.tool(side_effects=True)
    def charge(order_id: str) -> str:
        """Charge an order (side effects, runs alone).

        Args:
            order_id: The order.
        """
        with open(folder / "ledger", "a") as ledger:  # durable before the kill
            ledger.write(f"charge {order_id}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        (folder / "inside").write_text("1")
        threading.Event().wait()  # killed here: the result is never recorded
        return "charged"

    @sr.tool(side_effects=False, concurrency_key="")
    def lookup(order_id: str) -> str:
        """Read an order.

        Args:
            order_id: The order.
        """
        with open(folder / "ledger", "a") as ledger:
            ledger.write(f"lookup {order_id}\n")
        return "found"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if request.instructions.startswith(SUB):
            return tool_calls(("charge", {"order_id": "A"}), ("lookup", {"order_id": "A"}))
        if not _results(request):
            return tool_calls(("delegate", {"task": "charge A"}))
        return text(f"main: {_results(request)[0]}")

    return sr.Agent(
        name="main",
        model=FunctionModel(respond),
        tools=[charge, lookup],
        extensions=[SubAgents()],
    )


async def main(folder: Path) -> None:
    store = sr.SqliteStore(folder / "runs.db")
    await sr.Runtime(store).run(build(folder), run_id="r", input="go")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
