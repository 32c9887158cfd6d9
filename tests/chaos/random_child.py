"""The random fault-injection child: run the plan of a seed on a store, as worker and host.

Usage: ``python random_child.py --store STORE --seed N --kill-at SPEC --effects FILE`` where
STORE is ``sqlite:PATH`` or ``postgres:SCHEMA|DSN`` and SPEC a kill point of
``randomkit.choose_kill`` (``after:S`` kills come from the fork server, not from here). It
starts the run (or resumes it when the store has it), and whenever the run suspends it does
what the people and systems would (``host_acts``) and resumes, until the run completes. On
success it prints one JSON line: the outcome, and how many events of each kind it counted.

``python random_child.py --serve`` is the fork server (``randomkit.ForkServer``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from crash_child import TracedSqliteStore, trace_psycopg  # noqa: E402
from randomkit import (  # noqa: E402
    INPUT,
    INPUT_ID,
    RUN_ID,
    KillSwitch,
    approves,
    card_for,
    make_plan,
    record_effect,
    scripted_model,
    steer_text,
    wire_for,
)

import steadyrun as sr  # noqa: E402
from steadyrun.chat import Message, dumps  # noqa: E402
from steadyrun.control import CallView, Confirm, await_external, require_input  # noqa: E402

WRITES = ("save_step", "save_call", "update_call", "append", "claim", "consume")


class SwitchedStore:
    """Forwards to a store; each write method is a ``write`` event before and ``wrote`` after."""

    def __init__(self, inner: Any, switch: KillSwitch) -> None:
        self.inner = inner
        self.switch = switch

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.switch.hit("write")
            out = await attr(*args, **kwargs)
            self.switch.hit("wrote")
            return out

        return write


def open_store(spec: str, switch: KillSwitch) -> Any:
    """The store a ``--store`` spec names, its SQL statements wired to ``switch``."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return TracedSqliteStore(where, switch)  # type: ignore[arg-type]
    if kind == "postgres":
        from steadyrun.stores._postgres import PostgresStore

        schema, _, dsn = where.partition("|")
        trace_psycopg(switch)  # type: ignore[arg-type]
        return PostgresStore(dsn, schema=schema, min_size=1, max_size=4)
    raise SystemExit(f"unknown store {spec!r}")


def build_agent(runtime: sr.Runtime, seed: int, effects: Path, switch: KillSwitch) -> sr.Agent:
    """The agent of the plan of ``seed``; every body records its start in ``effects``."""

    def started(ctx: sr.ToolContext, phase: str = "run") -> None:
        record_effect(effects, ctx.tool_name, ctx.call_id, phase)
        switch.hit("tool")

    @sr.tool(concurrency_key="")
    async def lookup(order: str, ctx: sr.ToolContext, check: str = "") -> str:
        """Read an order (no side effects).

        Args:
            order: The order.
            check: A call whose effect to check.
        """
        started(ctx)
        return f"order {order} ok" + (f", checked {check}" if check else "")

    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order"])
    async def charge(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Charge an order (side effects, not replayable; one at a time per order).

        Args:
            order: The order.
            cents: The amount.
        """
        started(ctx)
        return f"charged {order} {cents}"

    @sr.tool(side_effects=True)
    async def archive(order: str, ctx: sr.ToolContext) -> str:
        """Archive an order (runs alone; side effects, not replayable).

        Args:
            order: The order.
        """
        started(ctx)
        return f"archived {order}"

    @sr.tool(side_effects=True, replayable=True, concurrency_key="")
    async def notify(order: str, ctx: sr.ToolContext) -> str:
        """Tell the customer (side effects, safe to repeat).

        Args:
            order: The order.
        """
        started(ctx)
        return f"notified {order}"

    def confirm(call: CallView) -> Confirm:
        return Confirm(prompt=f"Refund {call.arguments['cents']} cents?")

    @sr.tool(side_effects=True, policy=confirm, concurrency_key="")
    async def refund(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Refund an order (a person approves first).

        Args:
            order: The order.
            cents: The amount.
        """
        started(ctx)
        return f"refunded {order} {cents}"

    @sr.tool(side_effects=True, concurrency_key="")
    async def bank(amount: int, ctx: sr.ToolContext) -> str:
        """Wire money; the bank answers later.

        Args:
            amount: The amount.
        """
        started(ctx)
        await_external({"amount": amount})

    @sr.tool(side_effects=True, concurrency_key="")
    async def pay(amount: int, ctx: sr.ToolContext) -> str:
        """Pay with a card the customer names.

        Args:
            amount: The amount.
        """
        if ctx.input_response is None:
            started(ctx, "ask")
            require_input("Which card?", {"type": "string", "pattern": "^card-"}, state=amount)
        started(ctx, "run")
        return f"paid {ctx.input_state} with {ctx.input_response}"

    @sr.tool(side_effects=True, replayable=True)
    async def escalate(note: str, ctx: sr.ToolContext) -> str:
        """Forward the customer's next message to the run (runs alone; safe to repeat).

        Args:
            note: The message id.
        """
        started(ctx)
        await runtime.send(ctx.run_id, steer_text(note), id=note)
        return f"escalated {note}"

    return sr.Agent(
        name="random",
        model=scripted_model(make_plan(seed)),
        tools=[lookup, charge, archive, notify, refund, bank, pay, escalate],
        limits=sr.Limits(max_iterations=60, max_concurrent_tool_calls=3),
    )


async def host_acts(runtime: sr.Runtime, switch: KillSwitch) -> None:
    """What the people and systems do while the run waits (by id, so a retry is harmless)."""
    for item in await runtime.pending(RUN_ID):
        args = json.loads(item.arguments)
        if item.kind == "decision":
            switch.hit("host")
            ok = approves(args["cents"])
            await runtime.decide(
                RUN_ID, item.call_id, approve=ok, reason=None if ok else "over budget"
            )
        elif item.kind == "input":
            switch.hit("host")
            await runtime.answer(RUN_ID, item.wait_id or "", card_for(args["amount"]))
        elif item.kind == "result":
            switch.hit("host")
            await runtime.settle(RUN_ID, item.call_id, result=wire_for(args["amount"]))
        # HOOK: sub-agent and background items (randomkit.EXTRA_KINDS) go here.


async def drive(store: Any, seed: int, switch: KillSwitch, effects: Path) -> dict[str, Any]:
    """Start or resume the run, acting as the host whenever it suspends, until it completes."""
    began = time.monotonic()
    runtime = sr.Runtime(store)
    agent = build_agent(runtime, seed, effects, switch)
    for _ in range(40):
        if await store.load(RUN_ID) is None:
            # Killed before the first step: the host retries the start with the same input id.
            result = await runtime.run(agent, run_id=RUN_ID, input=INPUT, input_id=INPUT_ID)
        else:
            result = await runtime.resume(RUN_ID, agent=agent)
        if result.status != "suspended":
            break
        await host_acts(runtime, switch)
    if result.status != "completed":
        raise RuntimeError(f"the run ended {result.status}: {result.error}")
    return {
        "status": result.status,
        "text": result.text,
        "calls": [[c.id, c.name, c.status] for c in result.calls],
        "messages": dumps(result.messages, list[Message]).decode(),
        "counts": dict(switch.counts),
        "seconds": time.monotonic() - began,
    }


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--kill-at", default="0")
    parser.add_argument("--effects", required=True)
    args = parser.parse_args(argv)
    switch = KillSwitch(args.kill_at)
    store = open_store(args.store, switch)
    try:
        report = await drive(SwitchedStore(store, switch), args.seed, switch, Path(args.effects))
    finally:
        await store.close()
    print(json.dumps(report))


def serve() -> None:
    """Fork one child per request read from stdin (see ``randomkit.ForkServer``).

    A request is a JSON line ``{"argv": [...], "out": PATH, "kill_after": S or null}``; the
    answers are ``{"pid": N}`` at once, then ``{"returncode": N}``. With ``kill_after`` the
    child is killed with SIGKILL that many seconds after the fork unless it exited first. This
    process never starts a thread or an event loop, so every child begins clean.
    """
    with contextlib.suppress(ImportError):
        import steadyrun.stores._postgres  # noqa: F401  (imported once, here)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request["argv"], request["out"])
        print(json.dumps({"pid": pid}), flush=True)
        if request.get("kill_after") is not None:
            fd = os.pidfd_open(pid)
            try:
                if not select.select([fd], [], [], request["kill_after"])[0]:
                    os.kill(pid, signal.SIGKILL)
            finally:
                os.close(fd)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


def _child(argv: list[str], out: str) -> None:
    code = 0
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
        os.dup2(os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
        asyncio.run(main(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        asyncio.run(main(sys.argv[1:]))
