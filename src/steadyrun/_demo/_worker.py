"""A worker process of ``steadyrun demo``: runs or resumes the demo's run on its SQLite file.

The demo starts it twice, as ``python -m steadyrun._demo._worker MODE ...``:

- ``run`` (process 1) starts the run with the scripted model's first script. Once the refund
  body has moved the money (a line fsynced to the ledger file) it tells the parent and hangs:
  the parent kills it with SIGKILL, before the refund's result can be saved.
- ``resume`` (process 2) resumes the run from the SQLite file with the second script.

With ``--model SPEC`` both use that model (``resolve_model(SPEC)``) instead of the scripts.

Its stdout is the live timeline (the ``Narrator``), which the parent relays, plus control lines
for the parent that start with ``CONTROL``: ``moved`` when the refund moved the money, ``done``
when the run returned. Both carry ``observer_errors``: how often the timeline printer raised.

``STEADYRUN_DEMO_FAULT`` breaks the story on purpose, for the demo's tests: ``no-crash`` (the
first script answers at once), ``refund-twice`` (the second script refunds again), ``hang``
(the refund never tells the parent), ``error`` (the worker fails on start) and
``printer-error`` (the timeline printer raises once in each process).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.text import Text

from steadyrun._demo._shop import (
    AGENT,
    CUSTOMER,
    INSTRUCTIONS,
    RUN_ID,
    Shop,
    after_restart_script,
    before_crash_script,
    make_tools,
)
from steadyrun._demo._show import Narrator
from steadyrun.chat import ModelResponse
from steadyrun.models import ModelClient, resolve_model
from steadyrun.records import CallRecord
from steadyrun.runtime import Agent, Limits, Runtime
from steadyrun.stores import SqliteStore
from steadyrun.testing import ScriptedModel, text, tool_calls

__all__ = ["CONTROL", "FAULT_ENV", "FAULTS", "main", "worker_command"]

CONTROL = "@@steadyrun-demo@@ "
FAULT_ENV = "STEADYRUN_DEMO_FAULT"
FAULTS = ("no-crash", "refund-twice", "hang", "error", "printer-error")
_HANG = 120.0  # seconds a killed-to-be worker waits before giving up on its parent
_REAL_LIMITS = Limits(max_iterations=8)  # a real model that never settles stops here

ColorSystem = Literal["standard", "256", "truecolor", "windows"]
_COLOR_SYSTEMS: dict[str, ColorSystem | None] = {
    "none": None,
    "standard": "standard",
    "256": "256",
    "truecolor": "truecolor",
    "windows": "windows",
}


def worker_command(
    mode: Literal["run", "resume"],
    *,
    db: Path,
    ledger: Path,
    width: int,
    color_system: str | None,
    encoding: str,
    model: str | None = None,
) -> list[str]:
    """The command line of a worker that prints like the parent's console would."""
    more = ["--model", model] if model is not None else []
    return [
        sys.executable,
        "-m",
        "steadyrun._demo._worker",
        mode,
        "--db",
        str(db),
        "--ledger",
        str(ledger),
        "--width",
        str(width),
        "--color-system",
        color_system or "none",
        "--encoding",
        encoding,
        *more,
    ]


class _Printer(Narrator):
    """The narrator, counting its own failures (and failing on purpose when asked to)."""

    def __init__(self, console: Console, *, fail_once: bool = False) -> None:
        super().__init__(console)
        self.errors = 0
        self._fail_once = fail_once

    async def _counted(self, event: Awaitable[None]) -> None:
        try:
            await event
        except Exception:
            self.errors += 1
            raise

    async def on_model_response(
        self, run_id: str, model_call_id: str, response: ModelResponse
    ) -> None:
        """See ``Narrator``."""
        await self._counted(super().on_model_response(run_id, model_call_id, response))

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        """See ``Narrator``."""
        await self._counted(super().on_tool_start(run_id, call))

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        """See ``Narrator``."""
        await self._counted(self._settle(run_id, call))

    async def _settle(self, run_id: str, call: CallRecord) -> None:
        if self._fail_once:
            self._fail_once = False
            raise RuntimeError(f"{FAULT_ENV}=printer-error")
        await super().on_tool_settle(run_id, call)


def _emit(event: str, **data: Any) -> None:
    """A control line for the parent, after everything printed so far."""
    sys.stdout.write(CONTROL + json.dumps({"event": event, **data}) + "\n")
    sys.stdout.flush()


def _agent(model: ModelClient, tools: Any) -> Agent:
    if isinstance(model, ScriptedModel):
        return Agent(name=AGENT, model=model, instructions=INSTRUCTIONS, tools=tools)
    return Agent(
        name=AGENT, model=model, instructions=INSTRUCTIONS, tools=tools, limits=_REAL_LIMITS
    )


async def _run(
    printer: _Printer, shop: Shop, db: Path, fault: str, model: ModelClient | None
) -> None:
    async def crash() -> None:
        if fault != "hang":
            _emit("moved", observer_errors=printer.errors, pid=os.getpid())
        await asyncio.sleep(_HANG)  # the parent kills this process here
        raise RuntimeError(f"worker {os.getpid()} was not killed within {_HANG:g} s")

    if model is None:
        model = ScriptedModel([text("Hello.")]) if fault == "no-crash" else before_crash_script()
    agent = _agent(model, make_tools(shop, crash))
    printer.line("user", Text(CUSTOMER, style="italic"))
    async with SqliteStore(db) as store:
        result = await Runtime(store, observers=[printer]).run(agent, run_id=RUN_ID, input=CUSTOMER)
    _emit("done", status=result.status, observer_errors=result.observer_errors)


async def _resume(
    printer: _Printer, shop: Shop, db: Path, fault: str, model: ModelClient | None
) -> None:
    if model is None and fault == "refund-twice":
        args = {"order_id": "A-1001", "amount_cents": 4999, "reason": "again"}
        model = ScriptedModel([tool_calls(("refund", args)), text("Refunded.")])
    elif model is None:
        model = after_restart_script()
    agent = _agent(model, make_tools(shop))
    async with SqliteStore(db) as store:
        result = await Runtime(store, observers=[printer]).resume(RUN_ID, agent=agent)
    _emit("done", status=result.status, observer_errors=result.observer_errors)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker; 0 when its run returned, whatever the run's status."""
    parser = argparse.ArgumentParser(prog="python -m steadyrun._demo._worker")
    parser.add_argument("mode", choices=("run", "resume"))
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--ledger", type=Path, required=True)
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--color-system", choices=tuple(_COLOR_SYSTEMS), default="none")
    parser.add_argument("--encoding", default="utf-8")
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    fault = os.environ.get(FAULT_ENV, "")
    if fault and fault not in FAULTS:
        parser.error(f"{FAULT_ENV}={fault!r} is none of {', '.join(FAULTS)}")
    if fault == "error":
        raise RuntimeError(f"{FAULT_ENV}=error: the worker fails on start")
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Print in the parent console's encoding, so its symbols are the ones it can show.
        sys.stdout.reconfigure(encoding=args.encoding, errors="replace")
    color = _COLOR_SYSTEMS[args.color_system]
    console = Console(
        file=sys.stdout,
        width=args.width,
        color_system=color,
        force_terminal=color is not None,
        highlight=False,
    )
    printer = _Printer(console, fail_once=fault == "printer-error")
    shop = Shop(args.ledger, notify=lambda line: printer.line("", Text(line, style="bold blue")))
    model = resolve_model(args.model) if args.model else None
    story = _run if args.mode == "run" else _resume
    asyncio.run(story(printer, shop, args.db, fault, model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
