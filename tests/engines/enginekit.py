"""Engine-agnostic drivers for the two-engine scenario suite.

A scenario sees one ``Driver``: start a run, wait for what it waits on, decide, answer,
settle, send, kill the worker process executing it, wait for its end and read its records.
``Workers`` (one per engine and test module) are the worker processes, two polling at all
times: a killed one is replaced, so the other takes the run over.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from engine_agents import Entry, entries

from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.runtime import PendingItem

T = TypeVar("T")

WORKER = Path(__file__).with_name("engine_worker.py")
CAP = 120.0  # seconds: a cap against a broken run hanging the suite, not a time limit


async def eventually(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], cap: float = CAP
) -> T:
    """Poll ``probe`` until ``ok`` holds of its value."""
    loop = asyncio.get_running_loop()
    end = loop.time() + cap
    while True:
        value = await probe()
        if ok(value) or loop.time() > end:
            break
        await asyncio.sleep(0.05)
    assert ok(value), f"condition never held; last value: {value!r}"
    return value


class Workers:
    """The worker processes of one engine: ``count`` of them poll, but for a moment after a kill.

    ``kill`` returns as soon as the killed process is gone and its replacement was spawned,
    so a test times the takeover by the workers already polling, not a process starting;
    ``ready`` waits until every spawned worker takes work (the ``engine`` fixture calls it
    before each test).
    """

    def __init__(self, argv: list[str], logs: Path, count: int = 2) -> None:
        self.argv = argv
        self.logs = logs
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.starting: list[subprocess.Popen[str]] = []
        self.killed = 0
        for _ in range(count):
            self._spawn()
        try:
            self.ready()
        except BaseException:
            self.close()  # no process outlives a fixture that failed
            raise

    def _spawn(self) -> None:
        with (self.logs / f"worker-{len(self.procs) + self.killed}.log").open("a") as log:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), *self.argv],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        self.procs[proc.pid] = proc
        self.starting.append(proc)

    def ready(self) -> None:
        """Wait until every worker spawned so far takes work."""
        while self.starting:
            proc = self.starting.pop()
            assert proc.stdout is not None
            line = proc.stdout.readline()  # blocks until the worker takes work (or dies)
            assert line.strip() == "ready", f"worker did not start (see {self.logs}): {line!r}"

    @property
    def pids(self) -> list[int]:
        return list(self.procs)

    def kill(self, pid: int) -> None:
        """SIGKILL worker ``pid`` and spawn another in its place."""
        proc = self.procs.pop(pid)
        proc.kill()
        proc.wait()
        self.killed += 1
        self._spawn()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.clear()


@dataclass
class Ended:
    """How a run ended, the same on both engines."""

    status: str
    text: str | None
    error_kind: str | None = None


class Driver(Protocol):
    """What a scenario does with an engine."""

    name: str
    ledger: Path
    workers: Workers

    async def start(self, run_id: str, agent: str, input: str) -> None:
        """Start ``agent`` on ``input``."""
        ...

    async def pending(self, run_id: str) -> list[PendingItem]:
        """What the run waits for."""
        ...

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> CallRecord:
        """Approve or reject a call (approved with ``arguments`` instead of the model's)."""
        ...

    async def answer(self, run_id: str, wait_id: str, response: Any) -> CallRecord:
        """Answer an input request."""
        ...

    async def settle(self, run_id: str, call_id: str, *, result: str) -> CallRecord:
        """Give an awaited call its result."""
        ...

    async def send(self, run_id: str, text: str) -> None:
        """Give the run input (a new turn when it completed)."""
        ...

    async def resume(self, run_id: str) -> None:
        """Continue a failed run from its last step."""
        ...

    async def cancel(self, run_id: str, by: str | None = None) -> None:
        """Cancel the run (its open calls too); ``by`` names who cancelled."""
        ...

    async def ended(self, run_id: str, turn: int = 1) -> Ended:
        """Wait until the run's ``turn``-th turn completed or failed."""
        ...

    async def snapshot(self, run_id: str) -> RunSnapshot:
        """The run's records in the store."""
        ...


class Scenario:
    """One run of a scenario on a driver: its id, its ledger, its waits."""

    def __init__(self, driver: Driver, agent: str) -> None:
        self.driver = driver
        self.agent = agent
        self.run_id = f"{agent}-{uuid.uuid4().hex[:12]}"

    async def start(self, input: str) -> None:
        # Models find their run in the first input (a model request carries no run id).
        await self.driver.start(self.run_id, self.agent, f"[{self.run_id}] {input}")

    def ledger(self) -> list[Entry]:
        return entries(self.driver.ledger, self.run_id)

    def effects(self) -> list[str]:
        return [e.what for e in self.ledger()]

    async def ledger_shows(self, ok: Callable[[list[Entry]], bool]) -> list[Entry]:
        """The run's ledger lines, once ``ok`` holds of them."""
        return await eventually(lambda: asyncio.to_thread(self.ledger), ok)

    async def written(self, what: str) -> Entry:
        """The run's first ledger line ``what``, once it is there."""
        lines = await self.ledger_shows(lambda e: any(x.what == what for x in e))
        return next(x for x in lines if x.what == what)

    async def waits_for(self, kind: str) -> PendingItem:
        """The one item of ``kind`` the run waits for, once it does."""
        items = await eventually(
            lambda: self.driver.pending(self.run_id),
            lambda p: any(i.kind == kind for i in p),
        )
        (item,) = [i for i in items if i.kind == kind]
        return item

    async def ended(self, turn: int = 1) -> Ended:
        return await self.driver.ended(self.run_id, turn)

    async def snapshot(self) -> RunSnapshot:
        return await self.driver.snapshot(self.run_id)

    def kill(self, pid: int) -> None:
        self.driver.workers.kill(pid)
