"""Agents for the Temporal turn and host-error tests, built with the default ``TemporalOptions``.

Every model call and tool body writes a line ``<what> <pid>`` (``O_APPEND``). The scenarios
both engines share (approvals, handover hooks, worker SIGKILLs) live in tests/engines.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.control import CallView, Confirm
from steadyrun.temporal import TemporalApp, TemporalOptions
from steadyrun.testing import FunctionModel, text, tool_calls


@dataclass
class Deps:
    effects: Path
    block: bool = False  # the slow tool waits here


def mark(deps: Deps, what: str) -> None:
    fd = os.open(deps.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def marks(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    lines = [line.rsplit(" ", 1) for line in path.read_text().splitlines()]
    return [(what, int(pid)) for what, pid in lines]


def rounds(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


@sr.tool(side_effects=True)
async def slow_charge(order_id: str, ctx: sr.ToolContext) -> str:
    """Charge an order through a slow bank.

    Args:
        order_id: The order.
    """
    mark(ctx.deps, "charge")
    if ctx.deps.block:
        await asyncio.sleep(3600)
    return f"charged {order_id}"


def chat_model(deps: Deps) -> FunctionModel:
    """Answers each turn with the turn's number and the user's last words."""

    def respond(request: ModelRequest) -> ModelResponse:
        said = [m.text for m in request.messages if m.role == "user"]
        mark(deps, f"chat{len(said)}")
        return text(f"turn {len(said)}: {said[-1]}")

    return FunctionModel(respond)


def flaky_model(deps: Deps) -> FunctionModel:
    """Charges once, then answers."""

    def respond(request: ModelRequest) -> ModelResponse:
        n = rounds(request)
        mark(deps, f"flaky{n}")
        if n == 0:
            return tool_calls(("slow_charge", {"order_id": "C-1"}))
        return text("all done")

    return FunctionModel(respond)


def always_confirm(call: CallView) -> Confirm:
    return Confirm(prompt=f"Wire {call.arguments['amount']}?")


@sr.tool(side_effects=True, policy=always_confirm)
def wire(amount: int, ctx: sr.ToolContext) -> str:
    """Wire money (a person confirms first).

    Args:
        amount: How much.
    """
    mark(ctx.deps, f"wire{amount}")
    return f"wired {amount}"


def wire_model(deps: Deps) -> FunctionModel:
    """Wires the amount the user names, then says how the call ended."""

    def respond(request: ModelRequest) -> ModelResponse:
        if rounds(request) == 0:
            said = [m.text for m in request.messages if m.role == "user"][-1]
            return tool_calls(("wire", {"amount": int(said.split()[1].rstrip("."))}))
        tool = [m for m in request.messages if m.role == "tool"][-1]
        return text("ended: " + " ".join(p.content for p in tool.parts if hasattr(p, "content")))

    return FunctionModel(respond)


def parity_agents(deps: Deps) -> list[sr.Agent]:
    """The agents, for the built-in engine as for Temporal."""
    return [
        sr.Agent(name="chat", model=chat_model(deps), deps=deps),
        sr.Agent(name="flaky", model=flaky_model(deps), tools=[slow_charge], deps=deps),
        sr.Agent(name="wire", model=wire_model(deps), tools=[wire], deps=deps),
    ]


def build_parity_app(
    store_path: Path,
    effects_path: Path,
    *,
    task_queue: str,
    block: bool = False,
    **app: Any,
) -> TemporalApp:
    """The app with the default options (only the task queue is the test's own)."""
    deps = Deps(effects=effects_path, block=block)
    return TemporalApp(
        **{"options": TemporalOptions(task_queue=task_queue), **app},
        agents=parity_agents(deps),
        store=sr.SqliteStore(store_path),
    )
