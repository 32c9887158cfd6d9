"""Deferred tools: a big catalogue stays out of the prompt until the model searches for a tool.

Runs without an API key: ``python examples/deferred_tools.py``.
"""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun.extensions import DeferredTools
from steadyrun.testing import ScriptedModel, text, tool_calls


def make_report_tool(name: str, what: str) -> sr.Tool:
    def report(month: str) -> str:
        return f"{what} for {month}: ok"

    report.__doc__ = f"Build the {what} report.\n\nArgs:\n    month: Like 2026-11."
    return sr.tool(name=name, replayable=True)(report)


CATALOGUE = [
    make_report_tool("sales_report", "sales"),
    make_report_tool("churn_report", "customer churn"),
    make_report_tool("payroll_report", "payroll"),
]

model = ScriptedModel(
    [
        tool_calls(("search_tools", {"query": "customer churn"})),
        tool_calls(("churn_report", {"month": "2026-11"})),
        text("Churn for November looks fine."),
    ]
)
agent = sr.Agent(name="analyst", model=model, extensions=[DeferredTools(CATALOGUE)])


async def main() -> None:
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="q-1", input="How was churn?")
    for i, request in enumerate(model.requests, start=1):
        print(f"model call {i} saw tools: {', '.join(t.name for t in request.tools)}")
    print("answer:", result.text)


if __name__ == "__main__":
    asyncio.run(main())
