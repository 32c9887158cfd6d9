"""``App``: a runtime, its agents by name, the display publisher, and runs in the background."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from steadyrun._errors import (
    ConflictError,
    RunCancelledError,
    RunNotFoundError,
    SteadyrunError,
    UsageError,
)
from steadyrun.records import CallRecord

if TYPE_CHECKING:
    from steadyrun.service._ops import Cancelled
from steadyrun.runtime import Agent, Runtime
from steadyrun.stores import FeedMessage, Store
from steadyrun.stream import Publisher

__all__ = ["App", "NotSupportedError", "Started", "start_fingerprint"]

log = logging.getLogger("steadyrun.service")

START_META = "steadyrun.start"
"""Key of the start request's fingerprint in the meta of a run's first input message."""


class NotSupportedError(SteadyrunError):
    """The operation is not available in this release (the HTTP API answers 501)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Started:
    """The outcome of ``App.start``.

    Attributes:
        run_id: The run.
        created: Whether this request started it (``False``: the same request came before).
        status: The run's status as stored (``running`` while it starts).
    """

    run_id: str
    created: bool
    status: str


def start_fingerprint(agent: str, input: str, extra: dict[str, Any] | None = None) -> str:
    """The hash that tells two start requests apart (canonical JSON, SHA-256)."""
    body = {"agent": agent, "input": input, **(extra or {})}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class App:
    """What a service hosts: a runtime, its agents by name, and their display streams.

    Runs started or resumed through the app execute in background tasks of the current event
    loop; the publisher shows them as ``running`` meanwhile. Host writes (``decide``,
    ``answer``, ``settle``) resume a suspended run once nothing blocks it any more.

    Args:
        runtime: The runtime, or a store to make one on.
        agents: The agents, found by name (``Agent.name``).
        publisher: The display publisher; one is made on the runtime's store by default.
        auto_resume: Whether host writes and input resume runs in the background.

    Example:
        ``app = App(SqliteStore("runs.db"), agents=[support]); await app.start(...)``
    """

    def __init__(
        self,
        runtime: Runtime | Store,
        *,
        agents: Iterable[Agent] = (),
        publisher: Publisher | None = None,
        auto_resume: bool = True,
    ) -> None:
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if self.agents.setdefault(agent.name, agent) is not agent:
                raise UsageError(f"two different agents are named {agent.name!r}")
        if isinstance(runtime, Runtime):
            self.runtime = runtime
        else:
            self.runtime = Runtime(runtime)
        self.store = self.runtime.store
        # Runtime has no public way to add agents or observers after construction yet.
        for agent in self.agents.values():
            self.runtime._register(agent)
        self.publisher = publisher or Publisher(self.store, strict_settlement=self._strict)
        if self.publisher not in self.runtime._observers:
            self.runtime._observers.append(self.publisher)
        self.auto_resume = auto_resume
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def agent(self, name: str) -> Agent:
        """The agent registered under ``name``.

        Raises:
            UsageError: No agent has that name.
        """
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UsageError(f"no agent is named {name!r} (known: {known})")
        return agent

    def executing(self, run_id: str) -> bool:
        """Whether the run executes in a background task of this app now."""
        return run_id in self._tasks

    # -- operations --------------------------------------------------------------------------

    async def start(
        self, run_id: str, agent: str, input: str, *, fingerprint: str | None = None
    ) -> Started:
        """Start a run in the background; the same request again returns the same run.

        The request's fingerprint (by default of ``agent`` and ``input``) is kept with the
        run's first input message, so a retry is recognised across processes.

        Raises:
            ConflictError: A different request (or a run started otherwise) has this id.
            UsageError: No agent has that name.
        """
        found = self.agent(agent)
        fingerprint = fingerprint or start_fingerprint(agent, input)
        start_id = f"{run_id}:input"
        snap = await self.store.load(run_id)
        if snap is not None:
            first = next((m for m in snap.context if m.id == start_id), None)
            same = (
                snap.run.agent == agent
                and first is not None
                and (first.meta or {}).get(START_META) == fingerprint
            )
            if not same:
                raise ConflictError(
                    f"run {run_id!r} exists and was not started by this request; "
                    "choose another run id"
                )
            return Started(run_id=run_id, created=False, status=snap.run.status)
        stored = await self.store.append(
            run_id,
            FeedMessage(id=start_id, content=input, meta={START_META: fingerprint}),
        )
        if (stored.meta or {}).get(START_META) != fingerprint:
            raise ConflictError(f"run {run_id!r} is being started by a different request")
        if self.executing(run_id):
            return Started(run_id=run_id, created=False, status="running")
        await self._launch(
            run_id,
            found.name,
            lambda: self.runtime.run(found, run_id=run_id, input=input, input_id=start_id),
        )
        return Started(run_id=run_id, created=True, status="running")

    async def resume(self, run_id: str) -> bool:
        """Resume a run in the background; ``False`` when it executes here already.

        Raises:
            RunNotFoundError: No such run.
            RunCancelledError: It was cancelled.
            UsageError: Its agent is not registered.
        """
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        if snap.run.status == "cancelled":
            raise RunCancelledError(f"run {run_id!r} was cancelled; it is not resumed")
        self.agent(snap.run.agent)
        if self.executing(run_id):
            self._again.add(run_id)
            return False
        await self._launch(run_id, snap.run.agent, lambda: self.runtime.resume(run_id))
        return True

    async def send(
        self, run_id: str, text: str, *, id: str | None = None, revision: str | None = None
    ) -> FeedMessage:
        """Give a run input; it takes it at its next safe point (resumed if need be).

        Raises:
            RunNotFoundError: No such run.
        """
        if await self.store.load(run_id) is None:
            raise RunNotFoundError(run_id)
        message = await self.runtime.send(run_id, text, id=id, revision=revision)
        if self.auto_resume:
            await self.resume(run_id)
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
    ) -> CallRecord:
        """``Runtime.decide``, then resume the run when nothing blocks it any more."""
        record = await self.runtime.decide(
            run_id,
            call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by,
        )
        await self._written(run_id)
        return record

    async def answer(self, run_id: str, wait_id: str, response: Any) -> CallRecord:
        """``Runtime.answer``, then resume the run when nothing blocks it any more."""
        record = await self.runtime.answer(run_id, wait_id, response)
        await self._written(run_id)
        return record

    async def settle(
        self, run_id: str, call_id: str, *, result: str | None = None, error: str | None = None
    ) -> CallRecord:
        """``Runtime.settle``, then resume the run when nothing blocks it any more."""
        record = await self.runtime.settle(run_id, call_id, result=result, error=error)
        await self._written(run_id)
        return record

    async def cancel(self, run_id: str) -> Cancelled:
        """Cancel a run: its open calls and sub-agent runs are cancelled and it never resumes.

        A run executing in this app is stopped first, the way a crash would stop it; what it
        left open is then settled ``cancelled`` (see ``Operations.cancel``).
        """
        from steadyrun.service._ops import Operations

        task = self._tasks.get(run_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        manager = self.runtime.tasks
        tasks = manager.store if manager is not None else None
        done = await Operations(self.runtime, tasks=tasks).cancel(run_id)
        for run in done.runs:
            await self.publisher.refresh(run)  # followers see it cancelled
        return done

    async def wait(self, run_id: str) -> None:
        """Wait until the run no longer executes in this app."""
        while (task := self._tasks.get(run_id)) is not None:
            await asyncio.wait([task])

    async def close(self, grace: float = 10.0) -> None:
        """Let background runs finish for up to ``grace`` seconds, then cancel the rest.

        A cancelled run is left as a crash leaves it: resuming it later settles what it must.
        """
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    # -- inside ------------------------------------------------------------------------------

    def _strict(self, agent: str) -> bool:
        found = self.agents.get(agent)
        return found.strict_settlement if found is not None else False

    async def _written(self, run_id: str) -> None:
        await self.publisher.refresh(run_id)
        if not self.auto_resume or self.executing(run_id):
            return
        pending = await self.runtime.pending(run_id)
        if not any(item.blocking for item in pending):
            snap = await self.store.load(run_id)
            if snap is not None and snap.run.status == "suspended":
                await self.resume(run_id)

    async def _launch(self, run_id: str, agent: str, first: Callable[[], Awaitable[Any]]) -> None:
        # Known to the display stream before the caller hears it started: a follower that
        # asks at once finds the run (running) instead of a 404.
        await self.publisher.run_started(run_id, agent)
        task = asyncio.get_running_loop().create_task(self._execute(run_id, agent, first))
        self._tasks[run_id] = task

    async def _execute(self, run_id: str, agent: str, first: Callable[[], Awaitable[Any]]) -> None:
        step = first
        try:
            while True:
                if step is not first:  # _launch announced the first execution
                    await self.publisher.run_started(run_id, agent)
                try:
                    await step()
                except Exception:
                    log.exception("run %r stopped with an error; resume it to retry", run_id)
                finally:
                    try:
                        await self.publisher.run_ended(run_id)
                    except Exception:
                        log.exception("display stream of run %r could not reload it", run_id)
                if run_id not in self._again:
                    return
                self._again.discard(run_id)
                step = lambda: self.runtime.resume(run_id)  # noqa: E731
        finally:
            self._tasks.pop(run_id, None)
