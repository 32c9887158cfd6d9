"""The scenario agents, the same for both engines, and the ledger of their side effects.

Every model call and tool body appends ``<what> <run_id> <pid>`` to the ledger (``O_APPEND``)
so a test counts side effects per run and sees which worker process did what. A run's first
input starts with ``[<run_id>]`` (``enginekit`` adds it): models find their run there, since a
model request carries no run id. The models are functions of the request, so any worker
answers a run's request the same way after another was killed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.control import CallRejected, CallView, Confirm, await_external, require_input
from steadyrun.extensions.subagents import Delegate, SubAgents
from steadyrun.records import CallRecord
from steadyrun.testing import FunctionModel, text, tool_calls

HOOK_LIMIT = 1000  # the handover hook refuses wires above this


@dataclass(frozen=True)
class Entry:
    """One ledger line."""

    what: str
    run_id: str
    pid: int


@dataclass
class Deps:
    ledger: Path


def mark(ledger: Path, what: str, run_id: str) -> None:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} {run_id} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def entries(ledger: Path, run_id: str | None = None) -> list[Entry]:
    """The ledger's lines, of one run when ``run_id`` is given."""
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_text().splitlines():
        what, run, pid = line.split(" ")
        if run_id is None or run == run_id:
            out.append(Entry(what, run, int(pid)))
    return out


def builtin_store(spec: str, pool: int) -> sr.SqliteStore | sr.PostgresStore:
    """The built-in engine's store: ``sqlite:<path>``, or a PostgreSQL DSN."""
    if spec.startswith("sqlite:"):
        return sr.SqliteStore(spec.removeprefix("sqlite:"))
    return sr.PostgresStore(spec, min_size=0, max_size=pool)


def run_of(request: ModelRequest) -> str:
    first = next(m.text for m in request.messages if m.role == "user")
    return first.split("]", 1)[0].lstrip("[")


def said(request: ModelRequest) -> list[str]:
    """What the user said, turn by turn, without the run-id prefix."""
    texts = [m.text for m in request.messages if m.role == "user"]
    return [t.split("] ", 1)[-1] for t in texts]


def rounds(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


def last_result(request: ModelRequest) -> str:
    tool = [m for m in request.messages if m.role == "tool"][-1]
    return " ".join(p.content for p in tool.parts if hasattr(p, "content"))


def counted(deps: Deps, respond: Callable[[ModelRequest], ModelResponse]) -> FunctionModel:
    """``respond``, with a ``model<rounds>`` ledger line per call."""

    def model(request: ModelRequest) -> ModelResponse:
        mark(deps.ledger, f"model{rounds(request)}", run_of(request))
        return respond(request)

    return FunctionModel(model)


def confirm_wire(call: CallView) -> Confirm:
    return Confirm(prompt=f"Wire {call.arguments['amount']}?")


@sr.tool(side_effects=True, policy=confirm_wire)
def wire(amount: int, ctx: sr.ToolContext) -> str:
    """Wire money (a person confirms first).

    Args:
        amount: How much.
    """
    mark(ctx.deps.ledger, f"wire{amount}", ctx.run_id)
    return f"wired {amount}"


@sr.tool(side_effects=True)
def pay(order: str, ctx: sr.ToolContext) -> str:
    """Pay an order with the card a person picks.

    Args:
        order: The order.
    """
    if ctx.input_response is None:
        require_input("Which card?", {"type": "string"})
    mark(ctx.deps.ledger, f"pay-{ctx.input_response}", ctx.run_id)
    return f"paid {order} with {ctx.input_response}"


@sr.tool(side_effects=True)
def bank_status(order: str) -> str:
    """Ask the bank about an order's chargeback (it answers later).

    Args:
        order: The order.
    """
    await_external({"order": order, "ask": "chargeback status"})


@sr.tool(side_effects=True)
async def slow_charge(order: str, ctx: sr.ToolContext) -> str:
    """Charge an order through a slow bank.

    Args:
        order: The order.
    """
    mark(ctx.deps.ledger, "charge", ctx.run_id)
    await asyncio.sleep(3600)  # the worker is killed here
    return f"charged {order}"


@sr.tool(side_effects=True)
def charge(order: str, ctx: sr.ToolContext) -> str:
    """Charge an order.

    Args:
        order: The order.
    """
    mark(ctx.deps.ledger, "charge", ctx.run_id)
    return f"charged {order}"


@sr.tool(side_effects=True)
async def slow_sub_charge(order: str, ctx: sr.ToolContext) -> str:
    """Charge an order through a slow bank, in a sub-agent run.

    Args:
        order: The order.
    """
    mark(ctx.deps.ledger, "charge", ctx.run_id.split("/", 1)[0])  # the lead run's ledger
    await asyncio.sleep(3600)  # cancelled here
    return f"charged {order}"


def lead_agent(deps: Deps) -> sr.Agent:
    """Delegates a charge to the ``charger`` sub-agent, whose tool blocks."""
    charger = Delegate(
        name="charger",
        description="Charges orders.",
        tools=[slow_sub_charge],
        model=FunctionModel(one_tool_then_text(("slow_sub_charge", {"order": "L-1"}))),
    )
    return sr.Agent(
        name="lead",
        model=counted(deps, one_tool_then_text(("delegate_charger", {"task": "Charge L-1."}))),
        extensions=[SubAgents([charger], general=False)],
        deps=deps,
    )


class ModelDown(Exception):
    retryable = False


def flaky_model(deps: Deps) -> Callable[[ModelRequest], ModelResponse]:
    """Charges, then answers; from the second turn on it is down until the test mends it."""

    def respond(request: ModelRequest) -> ModelResponse:
        run_id = run_of(request)
        mended = any(e.what == "mended" for e in entries(deps.ledger, run_id))
        if len(said(request)) > 1 and not mended:
            raise ModelDown("the model is down")
        if rounds(request) == 0:
            return tool_calls(("charge", {"order": "C-1"}))
        return text("all done")

    return respond


def one_tool_then_text(
    call: tuple[str, dict[str, object]],
) -> Callable[[ModelRequest], ModelResponse]:
    """Calls the tool once, then answers ``ended: <its result>``."""

    def respond(request: ModelRequest) -> ModelResponse:
        if rounds(request) == 0:
            return tool_calls(call)
        return text("ended: " + last_result(request))

    return respond


def wire_model(request: ModelRequest) -> ModelResponse:
    """Wires the amount the user names (``Wire 300.``)."""
    if rounds(request) == 0:
        amount = int(said(request)[-1].split()[1].rstrip("."))
        return tool_calls(("wire", {"amount": amount}))
    return text("ended: " + last_result(request))


def chat_model(request: ModelRequest) -> ModelResponse:
    turns = said(request)
    return text(f"turn {len(turns)}: {turns[-1]}")


def blocking_model(deps: Deps) -> FunctionModel:
    """Blocks in the run's first model call (the worker is killed there), answers in the next."""

    async def respond(request: ModelRequest) -> ModelResponse:
        run_id = run_of(request)
        first = not any(e.what == "model0" for e in entries(deps.ledger, run_id))
        mark(deps.ledger, "model0", run_id)
        if first:
            await asyncio.sleep(3600)
        return text("thought it over")

    return FunctionModel(respond)


def handover_hook(deps: Deps) -> Callable[[str, CallRecord], Awaitable[None]]:
    """Writes every handover down (I/O) and refuses wires above ``HOOK_LIMIT``."""

    async def hook(run_id: str, record: CallRecord) -> None:
        await asyncio.sleep(0)
        mark(deps.ledger, f"handover-{record.name}-{record.status}", run_id)
        if record.name == "wire" and json.loads(record.arguments)["amount"] > HOOK_LIMIT:
            raise CallRejected(f"wires above {HOOK_LIMIT} need a second bank")

    return hook


def scenario_agents(ledger: Path) -> list[sr.Agent]:
    """The agents, for the built-in engine as for Temporal."""
    deps = Deps(ledger)
    return [
        sr.Agent(name="wire", model=counted(deps, wire_model), tools=[wire], deps=deps),
        sr.Agent(
            name="pay",
            model=counted(deps, one_tool_then_text(("pay", {"order": "P-1"}))),
            tools=[pay],
            deps=deps,
        ),
        sr.Agent(
            name="bank",
            model=counted(deps, one_tool_then_text(("bank_status", {"order": "B-1"}))),
            tools=[bank_status],
            deps=deps,
        ),
        sr.Agent(name="chat", model=counted(deps, chat_model), deps=deps),
        sr.Agent(name="flaky", model=counted(deps, flaky_model(deps)), tools=[charge], deps=deps),
        sr.Agent(
            name="tool-kill",
            model=counted(deps, one_tool_then_text(("slow_charge", {"order": "K-1"}))),
            tools=[slow_charge],
            deps=deps,
        ),
        sr.Agent(name="model-kill", model=blocking_model(deps), deps=deps),
        lead_agent(deps),
    ]
