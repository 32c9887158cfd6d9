"""``BuiltinEngine``: an ``App``'s runs executed by workers on the store's claims (the default).

Today's path of every host operation: it is recorded in the store and wakes the run up there;
the app's embedded worker, or any other ``steadyrun worker`` on the store, executes the run.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from steadyrun._errors import RunCancelledError, RunNotFoundError, UsageError
from steadyrun.background import Task, TaskManager
from steadyrun.chat import Message
from steadyrun.records import CallRecord
from steadyrun.runtime import Agent, ForkedRun, Runtime
from steadyrun.service._engine import Host, resumable
from steadyrun.service._lifecycle import Deleted
from steadyrun.service._ops import Operations
from steadyrun.service._start import Cancelled, Started
from steadyrun.service._worker import Worker
from steadyrun.stores import FeedMessage, Store

__all__ = ["BuiltinEngine", "WorkerHost"]


class WorkerHost(Protocol):
    """What the built-in engine needs of its ``App``: the runtime and the embedded worker."""

    runtime: Runtime
    store: Store
    worker: Worker | None

    def agent(self, name: str) -> Agent:
        """The agent registered under ``name``."""
        ...

    async def _ensure(self) -> None: ...

    async def _open_worker(self) -> None: ...

    async def _close_worker(self, grace: float) -> None: ...


class BuiltinEngine:
    """Runs executed by workers on the store's claims: the app's embedded one or others.

    Every host write is recorded in the store and wakes the run up there; whichever worker
    takes the run's claim first executes it (see ``App``).
    """

    name = "builtin"

    def __init__(self) -> None:
        self._app: WorkerHost | None = None

    @property
    def app(self) -> WorkerHost:
        """The app bound to."""
        if self._app is None:
            raise UsageError("the built-in engine is not bound to an App yet")
        return self._app

    def bind(self, host: Host) -> None:
        """Attach to ``host``, an ``App`` (its embedded worker executes the runs)."""
        if not hasattr(host, "_open_worker"):
            raise UsageError("the built-in engine serves an App (Operations has its own path)")
        self._app = host  # type: ignore[assignment]

    async def open(self) -> None:
        """Start the app's embedded worker."""
        await self.app._open_worker()

    async def close(self, grace: float = 10.0) -> None:
        """Stop the app's embedded worker gracefully."""
        await self.app._close_worker(grace)

    def executing(self, run_id: str) -> bool:
        """Whether the app's embedded worker executes the run now."""
        worker = self.app.worker
        return worker is not None and run_id in worker._tasks

    async def wait(self, run_id: str) -> None:
        """Until nobody executes the run and no wake-up of it waits for a worker."""
        app = self.app
        await app._ensure()
        while True:
            task = app.worker._tasks.get(run_id) if app.worker is not None else None
            if task is not None:
                await asyncio.wait([task])
            elif await self._busy(run_id):
                await asyncio.sleep(0.02)
            else:
                return

    async def _busy(self, run_id: str) -> bool:
        # Runnable first, holder second: a run goes runnable -> held -> released, so a worker
        # taking it between the two looks is still seen (the other order could miss it).
        leases = self.app.store.leases
        if run_id in await leases.runnable(limit=10_000):
            return True
        return await leases.holder(run_id) is not None

    async def start(
        self, run_id: str, agent: str, input: str, *, fingerprint: str, meta: dict[str, str]
    ) -> Started:
        """Record the run's first input (with its agent's name) for a worker."""
        ops = Operations(self.app.runtime)
        return await ops._start(run_id, agent, input, fingerprint, meta)

    async def resume(self, run_id: str) -> bool:
        """Wake the run up for a worker; ``False`` when it executes here already."""
        app = self.app
        snap = resumable(run_id, await app.store.load(run_id), executing=self.executing(run_id))
        app.agent(snap.run.agent)
        await app._ensure()
        here = self.executing(run_id)
        # A wake-up during an execution makes the run runnable again once it ends.
        await app.store.leases.wake(run_id)
        return not here

    async def send(
        self, run_id: str, text: str, *, id: str | None, revision: str | None, by: str | None
    ) -> FeedMessage:
        """Append the input; the append wakes the run up in the store."""
        app = self.app
        snap = await app.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        if snap.run.status == "cancelled":
            # Nothing would ever take it: a cancelled run is never resumed (Temporal agrees).
            raise RunCancelledError(f"run {run_id!r} was cancelled; it takes no more input")
        # Loaded and checked here: Runtime.send would load the run a second time.
        return await app.runtime._append(run_id, text, id=id, revision=revision, by=by)

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None,
        arguments: dict[str, Any] | None,
        decided_by: str | None,
        by: str | None,
    ) -> CallRecord:
        """``Runtime.decide``."""
        return await self.app.runtime.decide(
            run_id,
            call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by,
            by=by,
        )

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None
    ) -> CallRecord:
        """``Runtime.answer``."""
        return await self.app.runtime.answer(run_id, wait_id, response, by=by)

    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None,
        error: str | None,
        by: str | None,
    ) -> CallRecord:
        """``Runtime.settle``."""
        return await self.app.runtime.settle(run_id, call_id, result=result, error=error, by=by)

    async def fork(
        self, run_id: str, *, at: int, new_run_id: str, edit: Message | str | None, resume: bool
    ) -> ForkedRun:
        """``Runtime.fork``; with ``resume`` a worker then continues the new run."""
        app = self.app
        forked = await app.runtime.fork(run_id, at=at, new_run_id=new_run_id, edit=edit)
        if resume and forked.status == "suspended":
            await app._ensure()
            await app.store.leases.wake(forked.run_id)
        return forked

    async def cancel(self, run_id: str, *, by: str | None) -> Cancelled:
        """``Operations.cancel``; an execution in the app's worker is stopped at once."""
        app = self.app
        manager = app.runtime.tasks
        tasks = manager.store if isinstance(manager, TaskManager) else None
        ops = Operations(app.runtime, tasks=tasks, leases=app.store.leases)
        done = await ops.cancel(run_id, by=by)
        task = app.worker._tasks.get(run_id) if app.worker is not None else None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return done

    async def delete(self, run_id: str) -> Deleted:
        """``Operations.delete``, with the app's background tasks."""
        app = self.app
        manager = app.runtime.tasks
        tasks = manager.store if isinstance(manager, TaskManager) else None
        return await Operations(app.runtime, tasks=tasks).delete(run_id)

    async def tasks(self, run_id: str) -> list[Task]:
        """The run's tasks in the task store of the runtime's ``TaskManager`` (if it has one)."""
        manager = self.app.runtime.tasks
        if not isinstance(manager, TaskManager):
            return []
        return await manager.store.list_tasks(run_id)

    async def continued(self, run_id: str) -> None:
        """Nothing: the successor's input woke it up in the store."""
