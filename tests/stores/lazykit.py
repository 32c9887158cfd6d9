"""The run of the lazy-load tests: turns of two calls, the last turn's first call approved.

``lazychild.py`` runs it in a second process; ``test_lazy_context*.py`` in the test's own.
"""

from __future__ import annotations

import asyncio
import sys

import steadyrun as sr
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, text, tool_calls

RUN = "r"


def lazy_agent(n: int, *, resumed: bool = False, hold: bool = False) -> sr.Agent:
    """n turns of two calls each; the last turn's first call waits for approval.

    ``resumed``: the model answers only the final text (a resume after the approval).
    ``hold``: the approved call's body says ``body`` on stdout, then waits a minute (a process
    to kill in the middle of it).
    """

    @sr.tool(policy=lambda view: Confirm(prompt="ok?") if view.arguments["k"] == n - 1 else None)
    async def step(k: int) -> str:
        """One step.

        Args:
            k: Which.
        """
        if hold and k == n - 1:
            print("body", flush=True)
            sys.stdout.flush()
            await asyncio.sleep(60)
        return f"step {k} done: {'x' * 40}"

    script = [
        tool_calls(("step", {"k": k}), ("step", {"k": k + 100}), content=f"turn {k}")
        for k in range(n)
    ]
    return sr.Agent(
        name="a",
        model=ScriptedModel([text("done")] if resumed else [*script, text("done")]),
        tools=[step],
        instructions="go",
    )
