"""The budget crash test's child process: run a budgeted agent, dying at a kill point.

Usage: ``python budget_child.py --store STORE --mode run|resume|raise --kill-at KIND:N|0``
(STORE as in ``crash_child.py``: ``sqlite:PATH`` or ``postgres:SCHEMA|DSN``). ``raise`` raises
the run's token budget (``Runtime.raise_budget``) and resumes it. On success it prints one
JSON line: the run's status, usage, the budget that stopped it, and the kill events counted.

Kill points: ``model:N`` (inside the N-th model call: no response), ``response:N`` (the N-th
response arrived, not saved yet), ``tool:N`` (inside the N-th tool body) and ``sql:N`` (the
N-th statement the store sends).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from chaoskit import KillSwitch  # noqa: E402
from crash_child import open_store  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ToolResultPart, Usage  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402

RUN_ID = "budget-run"
STEPS = 8
BUDGET = 400  # total tokens: used up after the sixth model call (see usage_of)
RAISED = 10_000
PRICES = {"budget-model": sr.Price(input=1.0, output=2.0)}


def usage_of(messages: list[sr.Message]) -> Usage:
    """The usage of a model call: a function of its request, so a repeated call costs the same."""
    return Usage(requests=1, input_tokens=20 + 10 * len(messages), output_tokens=5)


def done_steps(request: sr.ModelRequest) -> int:
    return sum(
        1
        for m in request.messages
        for p in m.parts
        if isinstance(p, ToolResultPart) and p.content.endswith(" done")
    )


def build_agent(switch: KillSwitch) -> sr.Agent:
    @sr.tool(side_effects=False, concurrency_key="")
    def step(n: int) -> str:
        """Do one step.

        Args:
            n: Its number.
        """
        switch.hit("tool", str(n))
        return f"step {n} done"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        switch.hit("model")
        done = done_steps(request)
        response = tool_calls(("step", {"n": done + 1})) if done < STEPS else text("Finished.")
        response.usage = usage_of(request.messages)
        return response

    return sr.Agent(
        name="budgeted",
        model=FunctionModel(respond, name="budget-model"),
        tools=[step],
        limits=sr.Limits(budget=sr.Budget(total_tokens=BUDGET), prices=PRICES),
    )


class Killer(sr.Observer):
    """Kills at the N-th model response, after it arrived and before the runtime saved it."""

    def __init__(self, switch: KillSwitch) -> None:
        self.switch = switch

    def on_model_response(self, run_id: str, model_call_id: str, response: Any) -> None:
        self.switch.hit("response", model_call_id)


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--mode", choices=["run", "resume", "raise"], required=True)
    parser.add_argument("--kill-at", default="0")
    args = parser.parse_args(argv)
    switch = KillSwitch(args.kill_at)
    store = open_store(args.store, switch)
    try:
        agent = build_agent(switch)
        runtime = sr.Runtime(store, agents=[agent], observers=[Killer(switch)], claim_ttl=2.0)
        if args.mode == "run":
            # Again after a kill: the same input resumes the run (or starts it, if the kill
            # came before its first step was saved).
            result = await runtime.run(agent, run_id=RUN_ID, input="Do all the steps.", wait=10.0)
        else:
            if args.mode == "raise":
                await runtime.raise_budget(RUN_ID, budget=sr.Budget(total_tokens=RAISED))
            result = await runtime.resume(RUN_ID, wait=10.0)
        status = await runtime.budget(RUN_ID)
    finally:
        await store.close()
    exceeded = result.budget_exceeded
    print(
        json.dumps(
            {
                "status": result.status,
                "usage": {"requests": result.usage.requests, "total": result.usage.total_tokens},
                "exceeded": None if exceeded is None else [exceeded.measure, exceeded.used],
                "cost": status.spent.cost,
                "counts": dict(switch.counts),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
