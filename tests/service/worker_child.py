"""A worker process of the multi-worker test, and the workload it shares with the test.

Usage: ``python worker_child.py --dsn DSN --effects FILE --owner NAME``. It runs a ``Worker``
on a ``PostgresStore`` with ``PostgresLeases`` until SIGTERM (or SIGKILL), printing ``ready``
once it listens. The agent looks an order up, ships it (a side effect that needs a person's
approval: the test approves), and answers; the model is a pure function of the request, so
any process can resume any run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.testing import FunctionModel, text, tool_calls

AGENT = "shipper"


def final_text(run_id: str) -> str:
    """What a run answers when it completes."""
    return f"order of {run_id} shipped"


def record_effect(path: Path, line: str) -> None:
    """Append one line to the effects file, durably (a SIGKILL loses nothing written)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def make_agent(effects: Path) -> sr.Agent:
    """The agent: ``lookup`` (no side effects), ``ship`` (side effects, needs approval)."""

    def confirm(call: CallView) -> Confirm:
        return Confirm(prompt=f"Ship order {call.arguments['order']}?")

    @sr.tool
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order.
        """
        return f"order {order}: paid"

    @sr.tool(side_effects=True, policy=confirm)
    async def ship(order: str, ctx: sr.ToolContext) -> str:
        """Ship an order.

        Args:
            order: The order.
        """
        record_effect(effects, f"ship {ctx.run_id} {ctx.call_id} {os.getpid()}")
        await asyncio.sleep(0.02)  # some work after the effect: a kill may land here
        return f"shipped {order}"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        run_id = request.messages[0].text.split()[-1]
        tools = [m for m in request.messages if m.role == "tool"]
        if not tools:
            return tool_calls(("lookup", {"order": run_id}))
        if len(tools) == 1:
            return tool_calls(("ship", {"order": run_id}))
        return text(final_text(run_id))

    return sr.Agent(name=AGENT, model=FunctionModel(respond), tools=[lookup, ship])


async def main() -> None:
    from steadyrun.service._worker import Worker
    from steadyrun.stores import PostgresStore
    from steadyrun.stores._leases_postgres import PostgresLeases

    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--effects", required=True, type=Path)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--ttl", type=float, default=2.0)
    args = parser.parse_args()
    async with PostgresStore(args.dsn, max_size=args.concurrency + 2) as store:
        leases = PostgresLeases(store, poll_max=0.5)
        runtime = sr.Runtime(store, agents=[make_agent(args.effects)])
        worker = Worker(
            runtime,
            leases,
            owner=args.owner,
            concurrency=args.concurrency,
            ttl=args.ttl,
            poll=0.5,
            grace=10.0,
            handle_signals=True,
        )
        await leases.runnable(limit=1)  # connected and migrated
        print("ready", flush=True)
        try:
            await worker.run()
        finally:
            await leases.close()
    print(f"stopped {worker.stats.executed} {worker.stats.drained}", flush=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
