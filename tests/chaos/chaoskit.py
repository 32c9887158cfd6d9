"""Shared by the crash tests and their child process: the workload and its kill points.

The child process (``crash_child.py``) runs a deterministic agent on a real store and kills
itself with SIGKILL at a counted kill point. The test process then resumes the run in fresh
children (``chaosproc``) and checks the invariants of recovery (``chaosverify.verify``)
against an uninterrupted run of the same workload (``chaosverify.crash_test``).

Kill points are named ``<kind>:<n>``: the n-th event of that kind in the process; ``0`` never
kills. ``sql`` events are the statements the store sends (and, on PostgreSQL, the ``BEGIN``
and ``COMMIT`` of each transaction block), so a kill lands before or after a commit or between
a transaction's statements; ``tool`` events come right after a tool body made its side effect
(it wrote its line to the effects file) and before it returns.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.chat import Message, ToolResultPart, dumps
from steadyrun.testing import FunctionModel, call, text, tool_calls

RUN_ID = "chaos-run"
INPUT_ID = "order-input"
INPUT = "Charge order A, tell the customer, archive it."
STEER_ID = "steer-1"
STEER = "Also charge orders B and C, and archive B."
CHILD = Path(__file__).with_name("crash_child.py")

# -- kill points ---------------------------------------------------------------------------


class KillSwitch:
    """Counts events by kind and kills the process with SIGKILL at the chosen one.

    Args:
        spec: ``"<kind>:<n>"`` (die at the n-th event of that kind, counted from 1) or ``"0"``.
    """

    def __init__(self, spec: str) -> None:
        kind, _, n = spec.partition(":")
        self.kind = kind if n else ""
        self.at = int(n) if n else 0
        self.counts: Counter[str] = Counter()
        self.labels: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def hit(self, kind: str, label: str = "") -> None:
        """One event of ``kind``; never returns when it is the chosen kill point."""
        with self._lock:
            self.counts[kind] += 1
            self.labels.setdefault(kind, []).append(label)
            if kind == self.kind and self.counts[kind] == self.at:
                os.kill(os.getpid(), signal.SIGKILL)


# -- the workload ----------------------------------------------------------------------------

# Each step is one batch the model asks for; a step is done when every call in it has a
# final answer. An interrupted call is asked again (id + "r"); a call whose outcome is unknown
# (needs_review) is never repeated: the model checks it with ``lookup`` instead (id + "k").
PlanCall = tuple[str, dict[str, Any], str]
PLAN: list[list[PlanCall]] = [
    [
        ("charge", {"order": "A", "cents": 500}, "p1a"),
        ("notify", {"order": "A"}, "p1b"),
        ("lookup", {"order": "A"}, "p1c"),
    ],
    [("archive", {"order": "A"}, "p2a")],
    # escalate runs alone and puts the steering message in the feed while the run works: the
    # lookup queued behind it is cancelled (input superseded it); the message enters the
    # context when the batch settles.
    [("escalate", {"note": "customer wants B and C"}, "p3a"), ("lookup", {"order": "B"}, "p3b")],
    [
        ("charge", {"order": "B", "cents": 700}, "p4a"),
        ("charge", {"order": "C", "cents": 900}, "p4b"),
        ("notify", {"order": "B"}, "p4c"),
        ("lookup", {"order": "C"}, "p4d"),
    ],
    [("archive", {"order": "B"}, "p5a"), ("notify", {"order": "C"}, "p5b")],
]
STEER_STEP = 3  # PLAN[3] answers the steering message


def _outstanding(name: str, args: dict[str, Any], pid: str, results: dict[str, str]) -> list:
    answer = results.get(pid)
    if answer is None:
        return [(name, args, pid)]
    if "safe to call it again" in answer or "changed nothing outside" in answer:
        return _outstanding(name, args, pid + "r", results)
    if "may or may not have taken effect" in answer:
        return _outstanding(
            "lookup", {"order": args.get("order", "?"), "check": pid}, pid + "k", results
        )
    return []


def respond(request: sr.ModelRequest) -> sr.ModelResponse:
    """The model: a pure function of the request."""
    results = {
        p.call_id: p.content
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    users = [m.text for m in request.messages if m.role == "user"]
    for i, step in enumerate(PLAN):
        todo = [c for name, args, pid in step for c in _outstanding(name, args, pid, results)]
        if not todo:
            continue
        if i == STEER_STEP and STEER not in users:
            return text("the steering message never arrived")
        return tool_calls(*(call(name, args, id=pid) for name, args, pid in todo))
    return text(f"All orders handled for {len(users)} user messages.")


def record_effect(path: Path, tool: str, call_id: str, key: str) -> None:
    """Append ``<tool> <call id> <args key> <pid>`` to the effects file, durably."""
    line = f"{tool} {call_id} {key} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def build_agent(runtime: sr.Runtime, effects: Path, switch: KillSwitch) -> sr.Agent:
    """The crash workload's agent; every tool body records that it ran in ``effects``."""

    def effect(ctx: sr.ToolContext, key: str) -> None:
        record_effect(effects, ctx.tool_name, ctx.call_id, key)
        switch.hit("tool", f"{ctx.tool_name} {ctx.call_id}")

    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order"])
    async def charge(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Charge an order (side effects, not replayable).

        Args:
            order: The order.
            cents: The amount.
        """
        effect(ctx, f"{order}/{cents}")
        return f"charged {order} {cents}"

    @sr.tool(side_effects=True, replayable=True, concurrency_key="")
    async def notify(order: str, ctx: sr.ToolContext) -> str:
        """Tell the customer (side effects, safe to repeat).

        Args:
            order: The order.
        """
        effect(ctx, order)
        return f"notified {order}"

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order: str, ctx: sr.ToolContext, check: str = "") -> str:
        """Read an order (no side effects).

        Args:
            order: The order.
            check: A call whose effect to check.
        """
        effect(ctx, f"{order}/{check}")
        return f"order {order} ok" + (f", checked {check}" if check else "")

    @sr.tool(side_effects=True)
    async def archive(order: str, ctx: sr.ToolContext) -> str:
        """Archive an order (runs alone; side effects, not replayable).

        Args:
            order: The order.
        """
        effect(ctx, order)
        return f"archived {order}"

    @sr.tool(side_effects=True, replayable=True)
    async def escalate(note: str, ctx: sr.ToolContext) -> str:
        """Forward the customer's next request to the run (runs alone; safe to repeat).

        Args:
            note: Why.
        """
        await runtime.send(ctx.run_id, STEER, id=STEER_ID)
        effect(ctx, "steer")
        return f"escalated: {note}"

    return sr.Agent(
        name="chaos",
        model=FunctionModel(respond),
        tools=[charge, notify, lookup, archive, escalate],
        limits=sr.Limits(max_iterations=40, max_concurrent_tool_calls=3),
    )


async def drive(store: Any, mode: str, switch: KillSwitch, effects: Path) -> dict[str, Any]:
    """Run (``run``) or resume (``resume``) the workload on ``store``; the child's report."""
    runtime = sr.Runtime(store)
    agent = build_agent(runtime, effects, switch)
    if mode == "resume" and await store.load(RUN_ID) is not None:
        result = await runtime.resume(RUN_ID, agent=agent)
    else:
        # A run killed before its first step has input but no record: a host retries the
        # start, and the same input id keeps the input from entering twice.
        result = await runtime.run(agent, run_id=RUN_ID, input=INPUT, input_id=INPUT_ID)
    return {
        "status": result.status,
        "text": result.text,
        "calls": [[c.id, c.name, c.status] for c in result.calls],
        "messages": dumps(result.messages, list[Message]).decode(),
        "counts": dict(switch.counts),
        "labels": switch.labels,
        "pid": os.getpid(),
    }
