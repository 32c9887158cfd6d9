"""Agents, tools and a deterministic model shared by the Temporal tests.

The model is a function of the request (how many tool rounds the context holds), not a script:
a worker that replaces another must answer the same request the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.control import CallView, Confirm, await_external
from steadyrun.temporal import TemporalApp, TemporalOptions
from steadyrun.testing import FunctionModel, text, tool_calls


@dataclass
class Deps:
    effects: Path  # one line per side effect, written with O_APPEND


def effect(deps: Deps, line: str) -> None:
    fd = os.open(deps.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def rounds(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


def last_results(request: ModelRequest) -> str:
    tool = [m for m in request.messages if m.role == "tool"][-1]
    return " | ".join(p.content for p in tool.parts if hasattr(p, "content"))


@sr.tool(concurrency_key="")
def lookup_order(order_id: str) -> dict[str, object]:
    """Look up an order.

    Args:
        order_id: The order.
    """
    return {"id": order_id, "charged_cents": 2 * 4999}


def large_refunds(call: CallView) -> Confirm | None:
    if call.arguments["amount_cents"] > 2000:
        return Confirm(prompt=f"Refund {call.arguments['amount_cents']} cents?")
    return None


@sr.tool(side_effects=True, policy=large_refunds, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int, ctx: sr.ToolContext) -> str:
    """Refund part of an order.

    Args:
        order_id: The order.
        amount_cents: How much.
    """
    effect(ctx.deps, f"refund {order_id} {amount_cents}")
    return f"refunded {amount_cents} cents on {order_id}"


@sr.tool(side_effects=True, concurrency_key="")
def bank_status(order_id: str) -> str:
    """Ask the bank about the chargeback of an order (answers later).

    Args:
        order_id: The order.
    """
    await_external({"order_id": order_id, "ask": "chargeback status"})
    return "unreachable"


def support_model(request: ModelRequest) -> ModelResponse:
    n = rounds(request)
    if n == 0:
        return tool_calls(("lookup_order", {"order_id": "A-1"}))
    if n == 1:
        return tool_calls(
            ("refund", {"order_id": "A-1", "amount_cents": 4999}),
            ("bank_status", {"order_id": "A-1"}),
        )
    return text("done: " + last_results(request))


def counting_model(request: ModelRequest) -> ModelResponse:
    """Looks up orders one by one, then answers with how many rounds it saw."""
    n = rounds(request)
    if n < 6:
        return tool_calls(("lookup_order", {"order_id": f"A-{n}"}))
    return text(f"looked up {n} orders")


def agents(deps: Deps) -> list[sr.Agent]:
    return [
        sr.Agent(
            name="support",
            model=FunctionModel(support_model),
            tools=[lookup_order, refund, bank_status],
            deps=deps,
        ),
        sr.Agent(
            name="counter",
            model=FunctionModel(counting_model),
            tools=[lookup_order],
            deps=deps,
        ),
    ]


def build_app(
    store_path: Path,
    effects_path: Path,
    *,
    task_queue: str,
    continue_as_new_after: int | None = None,
) -> TemporalApp:
    options = TemporalOptions(
        task_queue=task_queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
        continue_as_new_after=continue_as_new_after,
    )
    return TemporalApp(
        agents=agents(Deps(effects=effects_path)),
        store=sr.SqliteStore(store_path),
        options=options,
    )
