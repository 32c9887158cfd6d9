"""The workload of ``scale.py``, shared by its driver and its worker processes.

One run charges one order: the fake model (``FunctionModel``, 50 ms per answer) asks for
``lookup`` (reads, no side effects), then ``charge`` (side effects, not replayable: it appends
one line to the ledger file), then answers ``done <order>``: 3 model calls and 2 tool calls.
A charge above ``APPROVAL_CENTS`` waits for a decision (``Confirm``) that the driver gives as
a client.

A worker SIGKILLed in a call leaves it settled by its traits: ``lookup`` and ``check``
become ``interrupted`` and the model asks again; ``charge`` becomes ``needs_review`` and the
model never repeats it blindly: it asks ``check`` whether the ledger has the order and charges
again only when it has not. So the ledger holds each order exactly once if and only if no
engine ever runs a side-effecting call twice on its own (and none is lost).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ToolResultPart
from steadyrun.control import CallView, Confirm
from steadyrun.testing import FunctionModel, call, text, tool_calls

AGENT = "scale"
APPROVAL_CENTS = 1000
MODEL_SECONDS = 0.05


def order_input(order: str, approval: bool) -> str:
    """The first input of the run charging ``order`` (above the approval bound or not)."""
    cents = APPROVAL_CENTS * 5 if approval else APPROVAL_CENTS // 2
    return f"charge {order} {cents}"


def append_line(path: Path, line: str) -> None:
    """Append one line with ``O_APPEND`` (one ``write``: lines of processes never interleave).

    No fsync: a SIGKILL loses nothing the kernel already has; only a machine crash would.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def ledger_counts(path: Path) -> Counter[str]:
    """How many times the ledger holds each order."""
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines() if line.strip())


def _tool_results(request: ModelRequest) -> list[tuple[str, str]]:
    return [
        (p.call_id, p.content)
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]


def answer(request: ModelRequest) -> ModelResponse:
    """The fake model's choice: a pure function of the request (any worker answers alike).

    Call ids carry the tool's initial and the number of results so far, so the last result
    says which tool it answered.
    """
    user = next(m.text for m in request.messages if m.role == "user")
    _, order, cents = user.split()
    results = _tool_results(request)
    n = len(results)
    if not results:
        return tool_calls(call("lookup", {"order": order}, id=f"l{n}"))
    last_id, content = results[-1]
    ok = content.startswith("ok ")
    kind = last_id[0]
    if kind == "l":  # lookup: on to the charge, or ask again after an interruption
        if ok:
            return tool_calls(call("charge", {"order": order, "cents": int(cents)}, id=f"c{n}"))
        return tool_calls(call("lookup", {"order": order}, id=f"l{n}"))
    if kind == "c":
        if ok:
            return text(f"done {order}")
        if "may or may not" in content:  # needs_review: check, never repeat blindly
            return tool_calls(call("check", {"order": order}, id=f"k{n}"))
        return text(f"unexpected charge result for {order}: {content}")
    if ok and content.endswith(" charged"):
        return text(f"done {order}")
    if ok:  # the ledger does not have it: the cut charge made no effect
        return tool_calls(call("charge", {"order": order, "cents": int(cents)}, id=f"c{n}"))
    return tool_calls(call("check", {"order": order}, id=f"k{n}"))


def build_agent(ledger: Path) -> sr.Agent:
    """The benchmark's agent; ``charge`` appends ``<order> <call id> <pid>`` to ``ledger``."""

    async def respond(request: ModelRequest) -> ModelResponse:
        model.requests.clear()  # FunctionModel keeps every request; a worker lives long
        await asyncio.sleep(MODEL_SECONDS)
        return answer(request)

    model = FunctionModel(respond, name="fake-50ms")

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order: str) -> str:
        """Read an order.

        Args:
            order: The order.
        """
        return f"ok {order} open"

    def large(call: CallView) -> Confirm | None:
        if call.arguments["cents"] > APPROVAL_CENTS:
            return Confirm(prompt=f"Charge {call.arguments['cents']} cents?")
        return None

    @sr.tool(side_effects=True, policy=large, concurrency_key="")
    async def charge(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Charge an order (side effects, not replayable).

        Args:
            order: The order.
            cents: The amount.
        """
        append_line(ledger, f"{order} {ctx.call_id} {os.getpid()}")
        return f"ok charged {order} {cents}"

    @sr.tool(side_effects=False, concurrency_key="")
    async def check(order: str) -> str:
        """Whether the ledger holds a charge of the order.

        Args:
            order: The order.
        """
        found = ledger_counts(ledger)[order] > 0
        return f"ok {order} charged" if found else f"ok {order} not in the ledger"

    return sr.Agent(
        name=AGENT,
        model=model,
        tools=[lookup, charge, check],
        limits=sr.Limits(max_iterations=12),
    )
