"""``Worker``: resumes runs that became runnable, under leases, with bounded concurrency.

A run becomes runnable when something is written to it from outside its execution: input
appended (a new run's first input too), a decision, an answer, a settled result (the stores
count these as wake-ups; see ``steadyrun.stores._leases``). The worker asks its ``Leases`` for
runnable runs, takes a lease on each (up to ``concurrency`` at once), and executes the run with
the lease as the fence of every write; the lease is renewed while the run executes and
released when it returns, marking the wake-ups it saw as handled. Between runs it waits for a
wake-up notification (PostgreSQL ``LISTEN``), polling rarely as a fallback. An execution that
raises (a store failing for a moment) releases its lease unhandled: the run is tried again by
this worker after a backoff (``RETRY_FIRST`` seconds, doubled per failure up to ``RETRY_MAX``)
or at once by another, never left waiting for a wake-up that already came.

Stopping (``stop()``, or SIGTERM/SIGINT with ``handle_signals=True``) is graceful: no new run is
taken; each executing run stops right after its next checkpoint (its next ``save_step``) and
its lease is released unhandled, so another worker resumes it at once from that checkpoint.
What has not stopped after ``grace`` seconds is cancelled as a crash would stop it.

With a ``Retention`` policy the worker also deletes finished runs past their time, a pass
when it starts and then every ``Retention.every`` seconds (see docs/lifecycle.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from datetime import datetime
from typing import TYPE_CHECKING

from steadyrun._errors import RunCancelledError, UsageError
from steadyrun.records import CallRecord, CallUpdate, RunSnapshot, RunStatus, Step
from steadyrun.runtime import Runtime
from steadyrun.runtime._claims import Claims
from steadyrun.runtime._runtime import default_owner
from steadyrun.stores import Claim, FeedMessage, RunSummary, Store
from steadyrun.stores._leases import Lease, LeaseLostError, Leases, current_fence

if TYPE_CHECKING:
    from steadyrun.background import TaskStore
    from steadyrun.service._lifecycle import Retention

__all__ = ["AGENT_META", "Worker", "WorkerStats", "drive_run"]

log = logging.getLogger("steadyrun.worker")

AGENT_META = "steadyrun.agent"
"""Key of the agent's name in the meta of a new run's first input (``Operations.start``)."""


class _Drained(Exception):
    """Raised right after a checkpoint of a run whose worker is stopping."""


class WorkerStats:
    """What a worker did so far.

    Attributes:
        executed: Executions that ended (the run suspended, completed, failed or was skipped).
        drained: Executions stopped at a checkpoint because the worker stopped.
        lost: Executions stopped because the lease was lost.
        errors: Executions that raised.
        retained: Runs deleted by the retention policy.
    """

    def __init__(self) -> None:
        self.executed = 0
        self.drained = 0
        self.lost = 0
        self.errors = 0
        self.retained = 0


class Worker:
    """Executes runnable runs of a store under leases; several workers may share the store.

    Args:
        runtime: A runtime with the agents (and observers, texts, media options) to run with.
        leases: The claims of the runtime's store (``store.leases``, the default).
        owner: This worker's id in leases and the step log; host, pid and a random suffix
            by default.
        concurrency: Runs executed at once at most.
        ttl: Seconds a lease lasts unless renewed; a dead worker's runs wait this long.
        poll: Longest wait between looks for runnable runs when no notification comes.
        grace: Seconds ``stop`` waits for executing runs to reach a checkpoint.
        handle_signals: Stop gracefully on SIGTERM and SIGINT while ``run`` works.
        retention: Delete runs past their time while ``run`` works (``Retention``).
        tasks: The runs' background tasks, deleted with them by the retention policy.

    Example:
        ``await Worker(Runtime(store, agents=[support])).run()``
    """

    def __init__(
        self,
        runtime: Runtime,
        leases: Leases | None = None,
        *,
        owner: str | None = None,
        concurrency: int = 8,
        ttl: float = 30.0,
        poll: float = 2.0,
        grace: float = 30.0,
        handle_signals: bool = False,
        retention: Retention | None = None,
        tasks: TaskStore | None = None,
    ) -> None:
        if concurrency < 1 or ttl <= 0 or poll <= 0 or grace < 0:
            raise UsageError(
                "Worker needs concurrency >= 1, ttl > 0, poll > 0 and grace >= 0, not "
                f"{concurrency}, {ttl}, {poll} and {grace}"
            )
        self.store = runtime.store
        self.leases = leases if leases is not None else runtime.store.leases
        self.owner = owner or default_owner()
        self.concurrency = concurrency
        self.ttl = ttl
        self.poll = poll
        self.grace = grace
        self.handle_signals = handle_signals
        self.retention = retention
        self.tasks = tasks
        self.stats = WorkerStats()
        self.runtime = _rebuilt(runtime, _DrainingStore(runtime.store, self), self.owner)
        self._claims = Claims(self.leases, self.owner, ttl)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Runs whose execution raised here: when to try each again, and how often it failed.
        self._backoff: dict[str, tuple[float, int]] = {}
        self._stopping = asyncio.Event()
        self._freed = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called."""
        return self._stopping.is_set()

    def executing(self) -> list[str]:
        """The runs this worker executes now."""
        return list(self._tasks)

    async def finished(self, run_id: str) -> None:
        """Return once this worker no longer executes ``run_id`` (at once when it does not)."""
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.wait([task])  # never cancels the execution, even when cancelled

    def stop(self) -> None:
        """Stop taking runs; executing runs stop at their next checkpoint (see the module)."""
        self._stopping.set()

    async def run(self) -> None:
        """Work until ``stop``; then let executing runs reach a checkpoint and return."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if self.handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop)
        retaining = self._retaining()
        try:
            while not self._stopping.is_set():
                if await self._fill() == 0:
                    await self._idle()
            await self._drain()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            if retaining is not None:
                retaining.cancel()
                await asyncio.gather(retaining, return_exceptions=True)

    async def run_until_idle(self) -> None:
        """Execute runnable runs until none is left or executing (tests, one-off catch-ups)."""
        while not self._stopping.is_set():
            started = await self._fill()
            if not started and not self._tasks:
                return
            if not started:
                self._freed.clear()
                await self._freed.wait()

    # -- inside ------------------------------------------------------------------------------

    def _retaining(self) -> asyncio.Task[None] | None:
        """The task applying the retention policy, when there is one."""
        if self.retention is None:
            return None
        from steadyrun.service._lifecycle import retain

        def deleted(run_id: str) -> None:
            self.stats.retained += 1

        return asyncio.create_task(
            retain(
                self.store,
                self.retention,
                tasks=self.tasks,
                owner=self.owner,
                clock=self.runtime._clock,
                stopping=self._stopping,
                on_deleted=deleted,
            ),
            name="steadyrun-retention",
        )

    async def _fill(self) -> int:
        """Take runnable runs up to the free slots; how many tries at a claim began.

        Each run gets its task at once, which takes the claim and then executes the run: the
        claims of runs woken together are taken together (on SQLite they share one commit
        and its fsync), not one commit after another before the last run may begin.
        """
        free = self.concurrency - len(self._tasks)
        if free <= 0:
            return 0
        started = 0
        now = time.monotonic()
        waiting = len(self._backoff)
        for run_id in await self.leases.runnable(limit=free + len(self._tasks) + waiting):
            if started >= free or self._stopping.is_set():
                break
            if run_id in self._tasks:
                continue
            if run_id in self._backoff and now < self._backoff[run_id][0]:
                continue  # it raised here a moment ago: tried again after its backoff
            task = asyncio.create_task(self._take(run_id), name=f"steadyrun-run-{run_id}")
            self._tasks[run_id] = task
            started += 1
        return started

    async def _take(self, run_id: str) -> None:
        """Take the run's claim and execute it; give the slot back when another was quicker."""
        lease = None
        try:
            # Through the claims, so no other executor of this process takes the claim for
            # one left behind before this task holds it.
            lease = await self._claims.acquire(run_id)
        except Exception:
            # A store failing for a moment: this run is tried again after its backoff (no
            # task awaits this one, so the error must not be left in it).
            self._failed(
                run_id,
                "run %r: worker %s could not take its claim (failure %d); tried again in %.1f s",
            )
        finally:
            if lease is None:  # another worker was quicker, or the store failed
                self._tasks.pop(run_id, None)
                self._freed.set()
        if lease is not None:
            await self._execute(lease)

    def _failed(self, run_id: str, message: str) -> None:
        """Count a failure of ``run_id`` here, log ``message``, and set when it is tried again.

        ``message`` takes the run, this worker, the failures so far and the delay.
        """
        self.stats.errors += 1
        failures = self._backoff.get(run_id, (0.0, 0))[1] + 1
        delay = min(RETRY_MAX, RETRY_FIRST * 2 ** (failures - 1))
        self._backoff[run_id] = (time.monotonic() + delay, failures)
        log.exception(message, run_id, self.owner, failures, delay)

    async def _idle(self) -> None:
        self._freed.clear()
        waits = [
            asyncio.create_task(self.leases.wait_runnable(self.poll)),
            asyncio.create_task(self._freed.wait()),
            asyncio.create_task(self._stopping.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _drain(self) -> None:
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=self.grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _execute(self, lease: Lease) -> None:
        run_id = lease.run_id
        me = asyncio.current_task()
        lost = False

        def on_lost() -> None:
            # The run stops at its next safe point (no model call, no call start, fenced
            # writes refused); a body running now may end and record how it ended. One that
            # has not ended within the worker's grace is dropped, as at shutdown, so a hung
            # tool does not hold a slot forever.
            nonlocal lost
            lost = True
            if me is not None:
                asyncio.get_running_loop().call_later(max(self.grace, self.ttl), me.cancel)

        try:
            async with self._claims.holding(lease, on_lost=on_lost) as keeper:
                try:
                    await drive_run(self.runtime, run_id)
                except _Drained:
                    keeper.handled = False
                    self.stats.drained += 1
                    return
                except LeaseLostError:
                    keeper.lost = True
                    raise
                except Exception:
                    # Not given up: the wake-up stays unhandled (a decision made while the
                    # run was suspended would otherwise never be acted on) and the run is
                    # tried again after a backoff.
                    keeper.handled = False
                    raise
            self.stats.executed += 1
            self._backoff.pop(run_id, None)
        except LeaseLostError:
            self.stats.lost += 1
        except asyncio.CancelledError:
            if lost:
                self.stats.lost += 1
            elif not self._stopping.is_set():
                raise
        except Exception:
            self._failed(run_id, "run %r raised in worker %s (failure %d); tried again in %.1f s")
        finally:
            self._tasks.pop(run_id, None)
            self._freed.set()


RETRY_FIRST = 0.5
"""Seconds before a run that raised in a worker is tried again; doubled per failure."""
RETRY_MAX = 60.0
"""The longest wait between tries of a run that keeps raising."""


async def drive_run(runtime: Runtime, run_id: str) -> None:
    """Execute a run until it suspends or ends: resume it, or start it from its first input.

    A new run's first input names its agent (``AGENT_META``, written by
    ``Operations.start``); a cancelled run, or a feed without such an input, is left alone.
    Observers with ``on_run_start``/``on_run_end`` (``TracingObserver``, the publisher) hear of
    the execution from the runtime itself (telling them here too made each hear it twice).
    """
    store = runtime.store
    snap = await store.load(run_id)
    claim = None
    if snap is not None:
        if snap.run.status == "cancelled":
            return
        agent = None
    else:
        last = await store.pending(run_id, 0)
        claim = await store.claim(run_id, last) if last else None
        first = claim.messages[0] if claim is not None and claim.messages else None
        if first is None:
            return  # a wake-up without a run to start (a key of the operations, say)
        name = (first.meta or {}).get(AGENT_META)
        agent = runtime._agents.get(name or "")
        if agent is None:
            log.warning("run %r names agent %r, which this runtime does not know", run_id, name)
            return
    try:
        # Under this worker's claim: the run as loaded here, or started from the first input
        # already in its feed (not loaded again, the input not sent once more, nor read again:
        # the start takes this claim of it).
        await runtime._drive(run_id, snap, agent, claim)
    except RunCancelledError:
        return  # cancelled meanwhile: nothing to execute


def _rebuilt(runtime: Runtime, store: Store, owner: str) -> Runtime:
    """A runtime like ``runtime`` on ``store`` (same agents, observers and options)."""
    return Runtime(
        store,
        owner=owner,
        agents=list(runtime._agents.values()),
        observers=runtime._observers,
        texts=runtime.texts,
        clock=runtime._clock,
        new_id=runtime._new_id,
        on_handover=runtime._on_handover,
        media=runtime.media,
    )


class _DrainingStore:
    """The worker's store: raises ``_Drained`` after a checkpoint of a run while stopping."""

    def __init__(self, store: Store, worker: Worker) -> None:
        self._store = store
        self._worker = worker
        self.leases = store.leases

    async def save_step(self, run_id: str, step: Step) -> int | None:
        waiting = await self._store.save_step(run_id, step)
        fence = current_fence()
        if (
            self._worker.stopping
            and step.run.status == "running"
            and fence is not None
            and fence.run_id == run_id
            # A step that started calls is followed by their bodies: the run stops after them.
            and not any(c.status == "running" for c in step.calls)
        ):
            raise _Drained(run_id)
        return waiting

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        await self._store.save_call(run_id, call)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        return await self._store.update_call(run_id, call_id, update)

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self._store.load(run_id)

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        return await self._store.load_call(run_id, call_id)

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        return await self._store.append(run_id, message)

    async def pending(self, run_id: str, after: int) -> int:
        return await self._store.pending(run_id, after)

    async def claim(self, run_id: str, through: int) -> Claim:
        return await self._store.claim(run_id, through)

    async def consume(self, run_id: str, through: int) -> None:
        await self._store.consume(run_id, through)

    async def wait_pending(self, run_id: str, after: int, max_wait: float) -> int:
        return await self._store.wait_pending(run_id, after, max_wait)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        updated_before: datetime | None = None,
        limit: int = 100,
    ) -> list[RunSummary]:
        return await self._store.list_runs(
            status=status, agent=agent, updated_before=updated_before, limit=limit
        )

    async def close(self) -> None:
        await self._store.close()
