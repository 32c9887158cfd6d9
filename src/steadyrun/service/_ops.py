"""``Operations``: start runs idempotently, continue a completed run once, cancel a run tree.

Nothing here needs a schema of its own; everything is kept in what every store has:

- **start**: the request's fingerprint (SHA-256 of its canonical JSON, ``start_fingerprint``)
  and the agent's name go in the meta of the run's first input, ``"<run_id>:input"``. The
  feed deduplicates by message id, so of two requests racing for one id exactly one message
  is stored; a request whose fingerprint differs from the stored one is a ``ConflictError``.
- **continue**: the successor is claimed with the same trick, in the feed of a key that no run
  uses (``"steadyrun:successor:<run_id>"``): the first claim is stored, a different successor
  is a conflict. The successor is then written with the predecessor's context (one step,
  status ``suspended``) before its input is appended, so a worker never starts it bare.
- **cancel**: the run's lease is revoked first (with ``Leases``), which fences out the worker
  executing it; then one step marks the run ``cancelled`` and settles its open calls
  ``cancelled``; sub-agent runs (``<run_id>/<call_id>``) of those calls are cancelled the same
  way first. ``Runtime.resume`` refuses a cancelled run.
- **delete**, **export**, **import** and **retention**: see ``steadyrun.service._lifecycle``
  and docs/lifecycle.md.

Runs started here are executed by a ``Worker`` (or in-process with ``drive``).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from steadyrun._errors import ConflictError, NotPendingError, RunNotFoundError, UsageError
from steadyrun.records import (
    ACTIVE_STATUSES,
    CallRecord,
    CallUpdate,
    Checkpoint,
    RunRecord,
    RunSnapshot,
    Step,
)
from steadyrun.records._step import ContextChange
from steadyrun.runtime import Agent, Runtime
from steadyrun.runtime._claims import check_writable, owner_died
from steadyrun.runtime._handle import child_run_id
from steadyrun.runtime._host import BY_META
from steadyrun.service._lifecycle import (
    Deleted,
    Imported,
    Retention,
    RetentionPass,
    apply_retention,
    delete_run,
    export_run,
    import_run,
)
from steadyrun.service._start import (
    START_META,
    Cancelled,
    Started,
    start_fingerprint,
    successor_key,
)
from steadyrun.service._worker import AGENT_META, drive_run
from steadyrun.stores import FeedMessage, Store
from steadyrun.stores._leases import Fence, Leases, fenced

if TYPE_CHECKING:
    from steadyrun.background import TaskStore
    from steadyrun.service._engine import Engine

__all__ = ["CONTINUES_META", "Cancelled", "Operations", "successor_key"]

CONTINUES_META = "steadyrun.continues"
"""Key of the predecessor's run id in the meta of a successor's first input."""


class Operations:
    """Start, continue and cancel runs; the host's side of a service.

    Args:
        runtime: The runtime (its agents are known by name), or a store to make one on.
        agents: More agents, found by name.
        leases: The store's claims (``store.leases``, the default): a cancel revokes the
            run's claim, so whatever executes it (a worker, ``serve``, another process's
            ``Runtime``) is fenced out.
        owner: The lease owner a cancel writes as.
        clock: The current time (UTC).
        engine: Another engine than the built-in one (``steadyrun.temporal.TemporalEngine``):
            starts, cancels and successors then reach the runs there. The built-in engine's
            path is this class's own.

    Example:
        ``ops = Operations(store, agents=[support], leases=PostgresLeases(store))``;
        ``await ops.start("t-1", "support", "Where is my order?")``
    """

    def __init__(
        self,
        runtime: Runtime | Store,
        *,
        agents: Iterable[Agent] = (),
        leases: Leases | None = None,
        tasks: TaskStore | None = None,
        owner: str = "steadyrun.operations",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        engine: Engine | None = None,
    ) -> None:
        self.runtime = runtime if isinstance(runtime, Runtime) else Runtime(runtime)
        for agent in agents:
            self.runtime._register(agent)
        self.store = self.runtime.store
        # A cancel always fences out the run's executor, in this process or another.
        self.leases: Leases | None = leases if leases is not None else self.store.leases
        self.tasks = tasks
        self.owner = owner
        self._clock = clock
        self.engine = engine if engine is not None and engine.name != "builtin" else None
        if self.engine is not None:
            self.engine.bind(self)  # an engine bound to an App already stays bound to it

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents by name."""
        return dict(self.runtime._agents)

    def agent(self, name: str) -> Agent:
        """The agent registered as ``name``.

        Raises:
            UsageError: No agent has that name.
        """
        found = self.runtime._agents.get(name)
        if found is None:
            known = ", ".join(sorted(self.runtime._agents)) or "none"
            raise UsageError(f"no agent is named {name!r} (known: {known})")
        return found

    async def start(
        self,
        run_id: str,
        agent: str,
        input: str,
        *,
        extra: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> Started:
        """Record a new run's first input; the same request again returns the same run.

        ``extra`` holds further request fields that make two requests different; ``by`` who
        started it (kept with the input; not part of the request: anyone may retry it).

        Raises:
            ConflictError: A different request (or a run started otherwise) has this id.
            UsageError: No agent has that name.
        """
        self.agent(agent)
        fingerprint = start_fingerprint(agent, input, extra)
        if self.engine is not None:
            meta = _by_meta(by)
            return await self.engine.start(run_id, agent, input, fingerprint=fingerprint, meta=meta)
        return await self._start(run_id, agent, input, fingerprint, _by_meta(by))

    async def continue_run(
        self,
        run_id: str,
        new_run_id: str,
        input: str,
        *,
        extra: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> Started:
        """Start ``new_run_id`` with the context of the completed run ``run_id``, then ``input``.

        A run has at most one successor: the same request again returns it; another successor
        (or another input for it) is a conflict.

        Raises:
            RunNotFoundError: No run ``run_id``.
            NotPendingError: The run has not completed.
            ConflictError: The run has another successor, or ``new_run_id`` is taken.
        """
        if new_run_id == run_id:
            raise UsageError("a successor run needs an id of its own")
        pred = await self.store.load(run_id)
        if pred is None:
            raise RunNotFoundError(run_id)
        if pred.run.status != "completed":
            raise NotPendingError(
                f"run {run_id!r} is {pred.run.status!r}: only a completed run can be continued"
            )
        fingerprint = start_fingerprint(
            pred.run.agent, input, {**(extra or {}), "continues": run_id}
        )
        taken = await self.store.load(new_run_id)
        seed_like = taken is not None and taken.run.steps == 1 and not taken.calls
        if (taken is not None and not seed_like) or (
            taken is None and await self.store.pending(new_run_id, 0)
        ):
            raise ConflictError(f"run id {new_run_id!r} is taken; choose another one")
        key = successor_key(run_id)
        claim = FeedMessage(id="successor", content=new_run_id, meta={START_META: fingerprint})
        with fenced(Fence(key, self.owner, 0)):  # a key, not a run: no worker wakes for it
            stored = await self.store.append(key, claim)
        if stored.content != new_run_id:
            raise ConflictError(f"run {run_id!r} was already continued by run {stored.content!r}")
        if (stored.meta or {}).get(START_META) != fingerprint:
            raise ConflictError(f"run {run_id!r} is being continued by a different request")
        if taken is None:
            now = self._clock()
            seed = Step(
                run=RunRecord(
                    run_id=new_run_id,
                    agent=pred.run.agent,
                    status="suspended",
                    created_at=now,
                    updated_at=now,
                    steps=1,
                ),
                checkpoint=replace(
                    pred.checkpoint,
                    phase="done",
                    claimed_through=0,
                    batch=[],
                    seen_inputs=list(pred.checkpoint.seen_inputs),
                    context_length=len(pred.context),
                    extra=copy.deepcopy(pred.checkpoint.extra),
                ),
                context=ContextChange(base=list(pred.context)),
            )
            await self.store.save_step(new_run_id, seed)
        meta = {CONTINUES_META: run_id, **_by_meta(by)}
        started = await self._start(
            new_run_id, pred.run.agent, input, fingerprint, meta, seeded=True
        )
        if self.engine is not None:
            # The successor and its input are in the store: another engine loads it from there.
            await self.engine.continued(new_run_id)
        return started

    async def cancel(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        grace: float = 10.0,
        by: str | None = None,
    ) -> Cancelled:
        """Cancel a run and its sub-agent runs; open calls settle ``cancelled``.

        The run's claim is revoked first, so whatever executes it (here or in another
        process) starts no call and makes no model call from then on. A call whose body is
        running in a live executor is given up to ``grace`` seconds to end: its outcome is
        recorded as it is (a call that finished is not called cancelled); one still running
        after that is settled ``cancelled`` with an unknown effect. Cancelling a cancelled run
        again changes nothing. ``by`` names who cancelled: the run records it
        (``RunRecord.cancelled_by``) and the default ``reason`` the calls settle with says it.

        Raises:
            RunNotFoundError: No such run.
            NotPendingError: The run completed (there is nothing to cancel).
        """
        if self.engine is not None:
            return await self.engine.cancel(run_id, by=by)
        if reason is None:
            reason = "the run was cancelled" + (f" by {by}" if by is not None else "")
        await check_writable(self.store.leases, run_id)  # Temporal cancels its own runs
        snap = await self.store.load(run_id)
        if snap is None:
            return await self._cancel_unstarted(run_id, reason, by)
        if snap.run.status == "cancelled":
            return Cancelled(run_id=run_id, runs=[], calls=[])
        if snap.run.status == "completed":
            raise NotPendingError(f"run {run_id!r} completed; there is nothing to cancel")
        lease = None
        live = False
        if self.leases is not None:
            holder = await self.leases.holder(run_id)
            live = holder is not None and not owner_died(holder.owner)
            lease = await self.leases.revoke(run_id, self.owner, 60.0 + grace)
        runs: list[str] = []
        calls: list[tuple[str, str]] = []
        try:
            with fenced(lease.fence if lease is not None else None):
                if live and grace > 0:
                    await self._let_bodies_end(run_id, grace)
                await self._cancel_tree(run_id, reason, runs, calls, by)
        finally:
            if lease is not None:
                await self.leases.release(lease)  # type: ignore[union-attr]
        return Cancelled(run_id=run_id, runs=runs, calls=calls)

    async def cancelled(self, run_id: str) -> Cancelled:
        """What cancelling the run cancelled, read back from the store (empty: it was not).

        The runs of the tree (the run, its sub-agent runs) that are cancelled, and their calls
        settled ``cancelled``: what the cancel that did it returned, so a repeated cancel can
        answer the same.
        """
        runs: list[str] = []
        calls: list[tuple[str, str]] = []

        async def visit(current: str) -> None:
            # In the order _cancel_tree cancels: sub-agent runs before their call and run.
            snap = await self.store.load(current)
            if snap is None or snap.run.status != "cancelled":
                return
            for call in snap.calls:
                if call.status == "cancelled":
                    await visit(child_run_id(current, call.id))
                    calls.append((current, call.id))
            runs.append(current)

        await visit(run_id)
        return Cancelled(run_id=run_id, runs=runs, calls=calls)

    async def _let_bodies_end(self, run_id: str, grace: float) -> None:
        """Wait up to ``grace`` seconds for the run's running calls to record their outcome.

        Their executor, fenced out by the cancel, may still record how a body that ran ended
        (``steadyrun.stores._leases.late_outcome``); it starts nothing new.
        """
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            snap = await self.store.load(run_id)
            if snap is None or not any(c.status == "running" for c in snap.calls):
                return
            await asyncio.sleep(0.05)

    async def _cancel_unstarted(self, run_id: str, reason: str, by: str | None) -> Cancelled:
        """Cancel a run started but not executed yet: its first step says it is cancelled."""
        meta = await self._start_meta(run_id, f"{run_id}:input", None)
        if meta is None or AGENT_META not in meta:
            raise RunNotFoundError(run_id)
        lease = await self.leases.revoke(run_id, self.owner, 60.0) if self.leases else None
        now = self._clock()
        run = RunRecord(
            run_id=run_id,
            agent=meta[AGENT_META],
            status="cancelled",
            error=reason,
            created_at=now,
            updated_at=now,
            steps=1,
            cancelled_by=by,
        )
        try:
            with fenced(lease.fence if lease is not None else None):
                await self.store.save_step(run_id, Step(run=run, checkpoint=Checkpoint()))
        finally:
            if lease is not None and self.leases is not None:
                await self.leases.release(lease)
        return Cancelled(run_id=run_id, runs=[run_id], calls=[])

    async def drive(self, run_id: str) -> None:
        """Execute a started (or runnable) run here until it suspends or ends (no worker)."""
        await drive_run(self.runtime, run_id)

    async def delete(self, run_id: str) -> Deleted:
        """Delete a run with its sub-agent runs, input, claim and background tasks, in one call.

        The store decides in its transaction: while another executor holds the run's claim
        the delete is refused and nothing is deleted. A task a worker is running is asked to
        stop and holds the delete back until it has. Deleting a run that is not there
        deletes nothing (``Deleted.found`` is false).

        Raises:
            RunBusyError: Another executor holds the run (``ForeignEngineError``: Temporal's,
                when this ``Operations`` has no ``TemporalEngine``).
            UsageError: ``run_id`` is a sub-agent run (delete its run), or the store cannot
                delete runs.
        """
        if self.engine is not None:  # its runs are held by the engine for good
            return await self.engine.delete(run_id)
        return await delete_run(
            self.store, run_id, tasks=self.tasks, owner=self.owner, now=self._clock()
        )

    async def export_run(self, run_id: str) -> dict[str, Any]:
        """The run, its sub-agent runs and their input as one versioned JSON document.

        ``json.dumps`` the result to keep it; ``import_run`` writes it into a store.

        Raises:
            RunNotFoundError: The store holds nothing of the run.
            UsageError: ``run_id`` is a sub-agent run, or the store cannot export runs.
        """
        return await export_run(self.store, run_id, now=self._clock())

    async def import_run(self, document: Mapping[str, Any] | str | bytes) -> Imported:
        """Write an exported run into this store, as it was; it goes on here from there.

        Raises:
            ConflictError: The store has a run of that id (or of one of its sub-agent runs).
            FormatVersionError: The document has a format this release does not read.
            StoreError: The document is not a run export.
        """
        return await import_run(self.store, document)

    async def apply_retention(
        self, policy: Retention, *, now: datetime | None = None
    ) -> RetentionPass:
        """Delete the runs ``policy`` says are due (one pass; a ``Worker`` makes them itself).

        Runs another executor holds are skipped (``RetentionPass.busy``). With an ``engine``
        (Temporal), the runs it executes are deleted as its ``delete`` deletes them (with
        their workflow history and blobs); without one they are skipped.
        """
        foreign = None
        if self.engine is not None:
            # An engine may delete without waiting for its own bookkeeping (Temporal's history).
            foreign = getattr(self.engine, "expire", self.engine.delete)
        return await apply_retention(
            self.store,
            policy,
            tasks=self.tasks,
            owner=self.owner,
            now=now or self._clock(),
            foreign=foreign,
        )

    # -- inside ------------------------------------------------------------------------------

    async def _start(
        self,
        run_id: str,
        agent: str,
        input: str,
        fingerprint: str,
        meta: dict[str, str],
        *,
        seeded: bool = False,
    ) -> Started:
        start_id = f"{run_id}:input"
        snap = await self.store.load(run_id)
        stored = await self._start_meta(run_id, start_id, snap)
        if stored is None and (snap is None or seeded):
            message = FeedMessage(
                id=start_id,
                content=input,
                meta={START_META: fingerprint, AGENT_META: agent, **meta},
            )
            first = await self.store.append(run_id, message)
            if (first.meta or {}).get(START_META) == fingerprint:
                status = snap.run.status if snap is not None else "running"
                return Started(run_id=run_id, created=True, status=status)
        elif stored is not None and stored.get(START_META) == fingerprint:
            status = snap.run.status if snap is not None else "running"
            return Started(run_id=run_id, created=False, status=status)
        raise ConflictError(
            f"run {run_id!r} exists and was not started by this request; choose another id"
        )

    async def _start_meta(
        self, run_id: str, start_id: str, snap: RunSnapshot | None
    ) -> dict[str, str] | None:
        """The meta of the run's first input: from its context, or waiting in its feed."""
        if snap is not None:
            for message in snap.context:
                if message.id == start_id:
                    return dict(message.meta or {})
        last = await self.store.pending(run_id, 0)
        if last:
            for m in (await self.store.claim(run_id, last)).messages:
                if m.id == start_id:
                    return dict(m.meta or {})
        return None

    async def _cancel_tasks(self, run_id: str, now: datetime) -> None:
        """Ask the run's unfinished background tasks to stop (their workers stop them)."""
        if self.tasks is None:
            return
        for task in await self.tasks.list_tasks(run_id):
            if not task.final:
                await self.tasks.request_cancel(task.id, now)

    async def _cancel_tree(
        self,
        run_id: str,
        reason: str,
        runs: list[str],
        calls: list[tuple[str, str]],
        by: str | None,
    ) -> None:
        snap = await self.store.load(run_id)
        if snap is None or snap.run.status in ("cancelled", "completed"):
            return
        now = self._clock()
        settled: list[CallRecord] = []
        for call in snap.calls:
            if call.status not in ACTIVE_STATUSES:
                # A delegation that returned may have left its sub-agent's background tasks
                # going (its child run completed): they stop with the tree.
                await self._cancel_tasks(child_run_id(run_id, call.id), now)
                continue
            await self._cancel_tree(child_run_id(run_id, call.id), reason, runs, calls, by)
            why = reason
            if call.status == "running":
                why = f"{reason} while the call was running; whether it took effect is unknown"
            if call.handover:
                # The host owns a handed-over call's outcome: a runtime snapshot may not
                # change it (merge_call), so the cancel records it as the host, like settle.
                update = CallUpdate(status="cancelled", error=why, completed_at=now, by=by)
                try:
                    await self.store.update_call(run_id, call.id, update)
                except (ConflictError, NotPendingError):
                    continue  # settled meanwhile: that outcome stands
            settled.append(
                replace(call, rev=call.rev + 1, status="cancelled", error=why, completed_at=now)
            )
            calls.append((run_id, call.id))
        await self._cancel_tasks(run_id, now)  # its background tasks stop too
        run = replace(
            snap.run, status="cancelled", updated_at=now, steps=snap.run.steps + 1, cancelled_by=by
        )
        await self.store.save_step(run_id, Step(run=run, checkpoint=snap.checkpoint, calls=settled))
        runs.append(run_id)


def _by_meta(by: str | None) -> dict[str, str]:
    return {BY_META: by} if by is not None else {}
