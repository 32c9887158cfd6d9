"""The two drivers behind ``enginekit.Driver``: the built-in engine and Temporal.

Built-in: the test process is a host without a worker (``App(worker=False)``) on the store
the worker processes execute from (PostgreSQL, or SQLite); its writes wake runs up for them.
Temporal: the test process is a ``TemporalRuns`` client of the dev server; the worker
processes poll the suite's task queue and write the records to a SQLite store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine_agents import builtin_store, scenario_agents
from enginekit import CAP, Ended, Workers, eventually

import steadyrun as sr
from steadyrun import RunCancelledError, RunNotFoundError
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.runtime import PendingItem
from steadyrun.service import App
from steadyrun.stores import Store

FINAL = ("completed", "failed", "cancelled")


class _Forwarding:
    """The operations the built-in ``App`` and ``TemporalRuns`` take alike, forwarded.

    ``host`` is either one; what differs between the engines is in the drivers themselves.
    """

    host: Any
    store: Store

    async def close(self) -> None:
        await self.store.close()

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> CallRecord:
        record: CallRecord = await self.host.decide(
            run_id, call_id, approve=approve, reason=reason, arguments=arguments
        )
        return record

    async def answer(self, run_id: str, wait_id: str, response: Any) -> CallRecord:
        record: CallRecord = await self.host.answer(run_id, wait_id, response)
        return record

    async def settle(self, run_id: str, call_id: str, *, result: str) -> CallRecord:
        record: CallRecord = await self.host.settle(run_id, call_id, result=result)
        return record

    async def send(self, run_id: str, text: str) -> None:
        await self.host.send(run_id, text)

    async def resume(self, run_id: str) -> None:
        await self.host.resume(run_id)

    async def cancel(self, run_id: str, by: str | None = None) -> None:
        await self.host.cancel(run_id, by=by)

    async def snapshot(self, run_id: str) -> RunSnapshot:
        snap = await self.store.load(run_id)
        assert snap is not None
        return snap


class BuiltinDriver(_Forwarding):
    """Runs executed by built-in ``Worker`` processes on one store (``builtin_store``)."""

    name = "builtin"

    def __init__(self, spec: str, ledger: Path, workers: Workers) -> None:
        self.ledger = ledger
        self.workers = workers
        self.store = builtin_store(spec, pool=3)
        self.app = App(sr.Runtime(self.store, agents=scenario_agents(ledger)), worker=False)
        self.host = self.app

    async def start(self, run_id: str, agent: str, input: str) -> None:
        await self.app.start(run_id, agent, input)

    async def pending(self, run_id: str) -> list[PendingItem]:
        try:
            return await self.app.runtime.pending(run_id)
        except RunNotFoundError:
            return []  # started, but no worker executed it yet: its first step is not saved

    async def ended(self, run_id: str, turn: int = 1) -> Ended:
        async def look() -> RunSnapshot | None:
            async with asyncio.timeout(CAP):
                await self.app.wait(run_id)  # nobody executes it and no wake-up waits
            return await self.store.load(run_id)

        def over(snap: RunSnapshot | None) -> bool:
            if snap is None or snap.run.status not in FINAL:
                return False
            return sum(1 for m in snap.context if m.role == "user") >= turn

        snap = await eventually(look, over)
        assert snap is not None
        return Ended(snap.run.status, snap.run.text, snap.run.error_kind)


class TemporalDriver(_Forwarding):
    """Runs executed by ``TemporalApp`` worker processes on the dev server."""

    name = "temporal"

    def __init__(self, runs: Any, store_path: Path, ledger: Path, workers: Workers) -> None:
        self.runs = runs
        self.host = runs
        self.ledger = ledger
        self.workers = workers
        self.store = sr.SqliteStore(store_path)

    async def start(self, run_id: str, agent: str, input: str) -> None:
        await self.runs.start(agent, run_id=run_id, input=input)

    async def pending(self, run_id: str) -> list[PendingItem]:
        items: list[PendingItem] = await self.runs.pending(run_id)
        return items

    async def ended(self, run_id: str, turn: int = 1) -> Ended:
        # The handle follows the run id's newest workflow run (a new turn is a new one).
        try:
            out = await asyncio.wait_for(self.runs.result(run_id), CAP)
        except RunCancelledError:
            return Ended("cancelled", None)
        return Ended(out.status, out.text, out.error_kind)
