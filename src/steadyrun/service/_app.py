"""``App``: a runtime, its agents by name, the display publisher, and the engine of its runs.

An app does its host operations through its engine (``steadyrun.service._engine``): the
built-in engine by default, described here, or ``steadyrun.temporal.TemporalEngine``, whose
runs are Temporal workflows recorded to the same store (see docs/temporal.md).

With the built-in engine an app executes runs only through its embedded ``Worker``, on the
same claims as every other executor of the store: a run started, resumed, decided or answered
through the app (or through the CLI, ``Operations`` or another process) is woken up in the
store, and whichever worker takes its claim first executes it. A ``serve`` process and
separate ``steadyrun worker`` processes therefore share runs without ever executing one twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from steadyrun._errors import RunNotFoundError, SteadyrunError, UsageError
from steadyrun.background import Task
from steadyrun.chat import Message
from steadyrun.records import CallRecord
from steadyrun.runtime import Agent, ForkedRun, HistoryStep, Runtime
from steadyrun.runtime._host import BY_META
from steadyrun.service._builtin import BuiltinEngine
from steadyrun.service._engine import Engine
from steadyrun.service._ops import Operations
from steadyrun.service._start import Cancelled, Started, start_fingerprint
from steadyrun.service._worker import Worker
from steadyrun.stores import FeedMessage, Store
from steadyrun.stream import Publisher

__all__ = ["App", "NotSupportedError"]

log = logging.getLogger("steadyrun.service")


class NotSupportedError(SteadyrunError):
    """The operation is not available in this release (the HTTP API answers 501)."""


class App:
    """What a service hosts: a runtime, its agents by name, their display streams, a worker.

    Runs execute only in the app's embedded ``Worker`` (or in any other worker on the same
    store): ``start`` records a run's first input with its agent's name, ``resume`` and every
    host write (``decide``, ``answer``, ``settle``, ``send``) wake the run up in the store, and
    whichever worker takes the run's claim first executes it. The embedded worker starts with
    ``open()`` (the HTTP API's lifespan calls it; the first operation does when nobody did) and
    stops gracefully with ``close()``. The publisher hears each execution's start and end.

    Args:
        runtime: The runtime, or a store to make one on.
        agents: The agents, found by name (``Agent.name``); a runtime's own agents are added.
        publisher: The display publisher; one is made on the runtime's store by default.
        auto_resume: Kept for compatibility: host writes wake runs up in the store whatever
            it says (the store counts every write made outside a run's execution).
        worker: Whether the app executes runs itself; ``False`` for an API-only process
            whose runs a separate ``steadyrun worker`` executes.
        claim_ttl: Seconds the embedded worker's claims last unless renewed; a run of a
            killed process is taken over by a worker once its claim expired.
        concurrency: Runs the embedded worker executes at once at most.
        poll: Longest wait of the embedded worker between looks for runnable runs.
        owner: The embedded worker's id in claims and the step log (host, pid, random).
        engine: What executes the runs: the built-in workers (the default) or
            ``steadyrun.temporal.TemporalEngine`` (Temporal workflows recording to the store;
            the worker settings above then do not apply). Every operation has the same
            outcomes and errors on either.

    Example:
        ``app = App(SqliteStore("runs.db"), agents=[support]); await app.start(...)``;
        ``App(store, agents=[support], engine=TemporalEngine(client, task_queue="q"))``
    """

    def __init__(
        self,
        runtime: Runtime | Store,
        *,
        agents: Iterable[Agent] = (),
        publisher: Publisher | None = None,
        auto_resume: bool = True,
        worker: bool = True,
        claim_ttl: float = 30.0,
        concurrency: int = 8,
        poll: float = 2.0,
        owner: str | None = None,
        engine: Engine | None = None,
    ) -> None:
        if isinstance(runtime, Runtime):
            self.runtime = runtime
        else:
            self.runtime = Runtime(runtime)
        self.agents: dict[str, Agent] = {}
        for agent in [*self.runtime._agents.values(), *agents]:
            if self.agents.setdefault(agent.name, agent) is not agent:
                raise UsageError(f"two different agents are named {agent.name!r}")
        self.store = self.runtime.store
        # Runtime has no public way to add agents or observers after construction yet.
        for agent in self.agents.values():
            if agent.name not in self.runtime._agents:
                self.runtime._register(agent)
        self.publisher = publisher or Publisher(self.store, strict_settlement=self._strict)
        if self.publisher not in self.runtime._observers:
            self.runtime._observers.append(self.publisher)
        self.auto_resume = auto_resume
        self.run_worker = worker
        self.claim_ttl = claim_ttl
        self.concurrency = concurrency
        self.poll = poll
        self.owner = owner
        self.worker: Worker | None = None
        self._working: asyncio.Task[None] | None = None
        self._opened = False
        self.engine: Engine = engine if engine is not None else BuiltinEngine()
        self.engine.bind(self)

    def agent(self, name: str) -> Agent:
        """The agent registered under ``name``.

        Raises:
            UsageError: No agent has that name.
        """
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UsageError(f"agent {name!r} is not registered with this service (known: {known})")
        return agent

    def executing(self, run_id: str) -> bool:
        """Whether the run executes in this process now (in the embedded worker)."""
        return self.engine.executing(run_id)

    async def finished(self, run_id: str) -> None:
        """Return once the embedded worker no longer executes the run (at once without one).

        Only the built-in engine executes runs in the app's own worker; with another engine
        this returns at once (and ``executing`` says what that engine does).
        """
        if self.worker is not None:
            await self.worker.finished(run_id)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the engine's embedded worker here (once; not when ``worker=False``)."""
        if self._opened:
            return
        self._opened = True
        await self.engine.open()

    async def _open_worker(self) -> None:
        """Start the built-in embedded worker (nothing when made with ``worker=False``).

        The worker is made here, not in ``__init__``, so ``claim_ttl`` and the other worker
        settings may still be changed (``steadyrun serve --claim-ttl``) and the worker's
        runtime sees every observer registered by then.
        """
        if not self.run_worker or self._working is not None:
            return
        self.worker = Worker(
            self.runtime,
            owner=self.owner,
            concurrency=self.concurrency,
            ttl=self.claim_ttl,
            poll=self.poll,
        )
        self._working = asyncio.get_running_loop().create_task(
            self._supervise(self.worker), name="steadyrun-app-worker"
        )

    async def close(self, grace: float = 10.0) -> None:
        """Stop executing runs here: executing runs get ``grace`` seconds to reach a checkpoint.

        A run stopped at a checkpoint is released for another worker at once; one that did
        not reach it is cancelled as a crash would stop it, and resuming it later (any worker,
        once its claim expired) settles what it must.
        """
        self._opened = False
        await self.engine.close(grace)

    async def _close_worker(self, grace: float) -> None:
        working, self._working = self._working, None
        if working is None or self.worker is None:
            return
        self.worker.grace = grace
        self.worker.stop()
        await asyncio.gather(working, return_exceptions=True)

    async def wait(self, run_id: str) -> None:
        """Wait until nobody executes the run and it is not runnable (tests use it).

        With the built-in engine: it does not execute in the embedded worker, no executor
        holds its claim, and no wake-up of it waits for a worker (with ``worker=False`` and no
        other worker this waits for ever: bound it with ``asyncio.timeout``). With Temporal:
        its workflow waits or ended, and the store shows it so.
        """
        await self._ensure()
        await self.engine.wait(run_id)

    # -- operations --------------------------------------------------------------------------

    async def start(
        self,
        run_id: str,
        agent: str,
        input: str,
        *,
        fingerprint: str | None = None,
        by: str | None = None,
    ) -> Started:
        """Start a run: record its first input (with its agent's name) for a worker.

        The same request again returns the same run. The request's fingerprint (by default
        of ``agent`` and ``input``) is kept with the run's first input message, so a retry is
        recognised across processes; the agent's name there lets any worker execute it, and
        ``by`` (who started it) is kept there too.

        Raises:
            ConflictError: A different request (or a run started otherwise) has this id.
            UsageError: No agent has that name.
        """
        found = self.agent(agent)
        fingerprint = fingerprint or start_fingerprint(agent, input)
        meta = {BY_META: by} if by is not None else {}
        started = await self.engine.start(
            run_id, found.name, input, fingerprint=fingerprint, meta=meta
        )
        # Known to the display stream before the caller hears it started: a follower that
        # asks at once finds the run (running) instead of a 404.
        await self.publisher.expect(run_id, found.name, stored=not started.created)
        await self._ensure()
        return started

    async def resume(self, run_id: str) -> bool:
        """Wake a run up for a worker; ``False`` when it executes here already (it goes again).

        Raises:
            RunNotFoundError: No such run.
            RunCancelledError: It was cancelled.
            NotPendingError: It completed: there is nothing to resume (give it input instead).
            UsageError: Its agent is not registered.
        """
        return await self.engine.resume(run_id)

    async def send(
        self,
        run_id: str,
        text: str,
        *,
        id: str | None = None,
        revision: str | None = None,
        by: str | None = None,
    ) -> FeedMessage:
        """Give a run input; it takes it at its next safe point (a worker resumes it if need be).

        ``by`` names who sent it (kept in the message's meta).

        Raises:
            RunNotFoundError: No such run.
        """
        message = await self.engine.send(run_id, text, id=id, revision=revision, by=by)
        await self._ensure()  # the built-in engine: the append woke the run up in the store
        return message

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        decided_by: str | None = None,
        by: str | None = None,
    ) -> CallRecord:
        """Approve or reject a call (``Runtime.decide``); the run goes on once nothing blocks it."""
        record = await self.engine.decide(
            run_id,
            call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by,
            by=by,
        )
        await self._written(run_id)
        return record

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> CallRecord:
        """Answer an input request (``Runtime.answer``); the run goes on with it."""
        record = await self.engine.answer(run_id, wait_id, response, by=by)
        await self._written(run_id)
        return record

    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None = None,
        error: str | None = None,
        by: str | None = None,
    ) -> CallRecord:
        """Record the outcome of a call the host owns (``Runtime.settle``)."""
        record = await self.engine.settle(run_id, call_id, result=result, error=error, by=by)
        await self._written(run_id)
        return record

    async def tasks(self, run_id: str) -> list[Task]:
        """The run's background tasks, oldest first, from whichever engine executes it.

        Raises:
            RunNotFoundError: No such run.
        """
        if await self.store.load(run_id) is None:
            raise RunNotFoundError(run_id)
        return await self.engine.tasks(run_id)

    async def history(self, run_id: str) -> list[HistoryStep]:
        """``Runtime.history``: the run's steps, with what each added.

        Raises:
            RunNotFoundError: No such run.
        """
        return await self.runtime.history(run_id)

    async def fork(
        self,
        run_id: str,
        *,
        at: int,
        new_run_id: str,
        edit: Message | str | None = None,
        resume: bool = True,
    ) -> ForkedRun:
        """``Runtime.fork``; with ``resume`` a worker then continues the new run.

        The same fork requested again wakes the new run again when it waits (harmless: a
        worker finds nothing to do, or does what a lost wake-up left undone).

        Raises:
            RunNotFoundError: No such run.
            StepNotFoundError: Its history has no such step.
            ConflictError: ``new_run_id`` is another run's.
            UsageError: The edit does not fit the message it replaces.
        """
        return await self.engine.fork(
            run_id, at=at, new_run_id=new_run_id, edit=edit, resume=resume
        )

    async def cancel(self, run_id: str, *, by: str | None = None) -> Cancelled:
        """Cancel a run: its open calls and sub-agent runs are cancelled and it never resumes.

        The run's claim is revoked first (see ``Operations.cancel``), which fences out the
        executor of the run wherever it runs: its next write fails and it stops. An
        execution in this app's worker is stopped at once, the way a crash would stop it.
        ``by`` names who cancelled (``RunRecord.cancelled_by``).
        """
        done = await self.engine.cancel(run_id, by=by)
        for run in done.runs:
            await self.publisher.refresh(run)  # followers see it cancelled
        return done

    async def cancelled(self, run_id: str) -> Cancelled:
        """What cancelling the run cancelled (``Operations.cancelled``; empty: it was not)."""
        return await Operations(self.runtime).cancelled(run_id)

    # -- inside ------------------------------------------------------------------------------

    def _strict(self, agent: str) -> bool:
        found = self.agents.get(agent)
        return found.strict_settlement if found is not None else False

    async def _ensure(self) -> None:
        # Apps used without the HTTP API's lifespan (tests, scripts) start their worker on
        # first use, so a run never waits for an ``open()`` nobody calls.
        if not self._opened and self.run_worker:
            await self.open()

    async def _written(self, run_id: str) -> None:
        await self.publisher.refresh(run_id)
        await self._ensure()

    async def _supervise(self, worker: Worker) -> None:
        # A store that fails for a moment must not end the app's execution of runs for good.
        while not worker.stopping:
            try:
                await worker.run()
            except Exception:
                log.exception("the embedded worker %s failed; it starts again in 1 s", worker.owner)
                await asyncio.sleep(1.0)
