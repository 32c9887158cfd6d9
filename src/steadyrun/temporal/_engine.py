"""``TemporalEngine``: the service's ``App`` (and ``Operations``) driving runs on Temporal.

Host operations go to the runs' workflows through ``TemporalRuns``; everything read (the run,
its history, what it waits for, the display stream) comes from the store the workflows record
to, as for built-in runs. What the built-in engine keeps in the store and Temporal has no
place for is kept in the store under keys no run uses:

- **idempotent start**: the request's fingerprint goes in the feed of
  ``steadyrun:start:<run_id>`` (the first message wins, as the feed deduplicates by id) before
  the workflow starts; the same request again finds it and starts nothing new, a different one
  is a ``ConflictError``.
- **delete**: a run at rest (suspended, completed, failed, cancelled: nothing executes it)
  loses its workflow (terminated when open, its history deleted, so the id can start again)
  and its store rows (written under the workflow's claim, deleted with it), then its blobs
  when the codec keeps them; a run its workflow is executing is refused with
  ``RunBusyError``, as the built-in engine refuses a run a worker holds.
- **one successor**: ``Operations.continue_run`` writes the successor to the store as on the
  built-in engine; ``continued`` then starts its workflow, which loads it from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import PayloadCodec
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._errors import (
    ConflictError,
    ForeignEngineError,
    NotPendingError,
    RunBusyError,
    RunCancelledError,
    RunNotFoundError,
    UsageError,
)
from steadyrun.background import Task
from steadyrun.chat import Message
from steadyrun.records import CallRecord
from steadyrun.runtime import ForkedRun
from steadyrun.runtime._fork import FORK_ORIGIN, _edit_key
from steadyrun.runtime._runtime import default_owner
from steadyrun.service import Operations
from steadyrun.service._engine import Host, resumable
from steadyrun.service._lifecycle import (
    Deleted,
    Retention,
    lifecycle_of,
    retain,
)
from steadyrun.service._start import START_META, Cancelled, Started, successor_key
from steadyrun.stores import FeedMessage
from steadyrun.stores._leases import Fence, fenced, foreign_engine
from steadyrun.temporal._app import TemporalApp
from steadyrun.temporal._background import ACTIVITY_BACKGROUND
from steadyrun.temporal._blobgc import BlobCollector, collect_blobs
from steadyrun.temporal._blobs import LargePayloadCodec
from steadyrun.temporal._claim import ENGINE, engine_owner
from steadyrun.temporal._client import TemporalRuns
from steadyrun.temporal._options import TemporalOptions
from steadyrun.temporal._payloads import WORKFLOW_NAME, RunInput, RunOutput
from steadyrun.temporal._quiet import at_rest, forget
from steadyrun.temporal._rpc import typed_rpc
from steadyrun.temporal._taskrecords import task_records

__all__ = ["TemporalEngine", "start_key"]

_STARTED = "start"
_AT_REST = ("suspended", "completed", "failed", "cancelled")


def start_key(run_id: str) -> str:
    """The feed key whose first message holds the fingerprint of the request that started a run."""
    return f"steadyrun:start:{run_id}"


class TemporalEngine:
    """Runs executed as Temporal workflows, reached through ``TemporalRuns`` (see the module).

    Give it to ``App(..., engine=...)`` (``steadyrun serve --engine temporal`` does) or to
    ``Operations(..., engine=...)``. Every operation raises the typed errors the built-in engine
    raises, so the HTTP API answers the same statuses.

    Args:
        client: A connected Temporal client, or the frontend's address (``host:port``) to
            connect to on first use (in the server's event loop: ``steadyrun serve``).
        task_queue: Where runs start (the workers' ``TemporalOptions.task_queue``).
        payload_codec: The workers' ``TemporalOptions.payload_codec``, if they set one.
        worker: Run a Temporal worker in this process while the app is open: ``True`` for
            one of the app's agents recording to the app's store, or the ``TemporalApp`` to
            run (its store must be the app's). ``False``: other processes run the workers.
        settle_seconds: How long a cancel waits for the workflow to record the run cancelled.
        namespace: The namespace, when ``client`` is an address.
        retention: Delete ended runs past their time while the app is open, as a built-in
            ``Worker(retention=...)`` does: a pass when it opens, then every
            ``retention.every`` seconds; each due run goes as ``delete`` deletes it (its
            workflow history and, with ``LargePayloadCodec``, its blobs too). ``retained``
            counts them.
        collect_blobs_every: With a ``LargePayloadCodec``: collect its blobs every this
            long while the app is open (``LargePayloadCodec.collecting``), so a run's blobs
            go ``blob_grace`` after its workflow closed; ``blob_collector`` counts them. One
            collector per blob store: give it to one process.
        blob_grace: How long a closed run keeps its blobs (its result and history decode).

    Example:
        ``App(store, agents=[support], engine=TemporalEngine(client, task_queue="support"))``
    """

    name = "temporal"

    def __init__(
        self,
        client: Client | str,
        *,
        task_queue: str = "steadyrun",
        payload_codec: PayloadCodec | None = None,
        worker: bool | TemporalApp = False,
        settle_seconds: float = 30.0,
        namespace: str = "default",
        retention: Retention | None = None,
        collect_blobs_every: timedelta | None = None,
        blob_grace: timedelta = timedelta(hours=1),
    ) -> None:
        if collect_blobs_every is not None and not isinstance(payload_codec, LargePayloadCodec):
            raise UsageError(
                "collect_blobs_every collects the blobs of a LargePayloadCodec: give it as "
                "payload_codec"
            )
        self.collect_blobs_every = collect_blobs_every
        self.blob_grace = blob_grace
        self.blob_collector: BlobCollector | None = None
        self.task_queue = task_queue
        self.retention = retention
        self.retained = 0
        self._retaining: asyncio.Task[None] | None = None
        self._stop_retaining = asyncio.Event()
        self.payload_codec = payload_codec
        self.namespace = namespace
        self._address = client if isinstance(client, str) else None
        self._host: Host | None = None
        self._runs = None if isinstance(client, str) else self._made(client)
        self._embedded = worker
        self.settle_seconds = settle_seconds
        self._worker: Any = None
        self._working: asyncio.Task[None] | None = None

    def _made(self, client: Client) -> TemporalRuns:
        store = self._host.store if self._host is not None else None
        return TemporalRuns(
            client, task_queue=self.task_queue, payload_codec=self.payload_codec, store=store
        )

    async def runs(self) -> TemporalRuns:
        """The ``TemporalRuns`` the engine reaches runs with (connecting on first use)."""
        if self._runs is None:
            assert self._address is not None
            client = await Client.connect(self._address, namespace=self.namespace)
            self._runs = self._runs or self._made(client)
        return self._runs

    @property
    def host(self) -> Host:
        """The app (or ``Operations``) bound to."""
        if self._host is None:
            raise UsageError("the Temporal engine is not bound to an App or Operations yet")
        return self._host

    def bind(self, host: Host) -> None:
        """Attach to ``host``; an engine stays bound to the first (an ``App``'s, usually)."""
        if self._host is None:
            self._host = host
            if self._runs is not None:
                self._runs.store = host.store

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the embedded Temporal worker and the retention passes, when the engine has them."""
        if self.retention is not None and self._retaining is None:
            self._retaining = asyncio.get_running_loop().create_task(
                self._retain(self.retention), name="steadyrun-temporal-retention"
            )
        codec = self.payload_codec
        every = self.collect_blobs_every
        if every is not None and isinstance(codec, LargePayloadCodec) and not self.blob_collector:
            self.blob_collector = codec.collecting(
                (await self.runs()).client, every=every, grace=self.blob_grace
            )
            self.blob_collector.start()
        if self._embedded is False or self._working is not None:
            return
        app = self._embedded
        if not isinstance(app, TemporalApp):
            agents = getattr(self.host, "agents", {})
            app = TemporalApp(
                agents=list(agents.values()),
                store=self.host.store,
                options=TemporalOptions(
                    task_queue=self.task_queue, payload_codec=self.payload_codec
                ),
            )
        runs = await self.runs()
        self._worker = app.worker(runs.client, task_queue=self.task_queue)
        self._working = asyncio.get_running_loop().create_task(
            self._worker.run(), name="steadyrun-temporal-worker"
        )

    async def close(self, grace: float = 10.0) -> None:
        """Stop the embedded worker and retention; its activities get ``grace`` seconds to end."""
        collector, self.blob_collector = self.blob_collector, None
        if collector is not None:
            await collector.stop()
        retaining, self._retaining = self._retaining, None
        if retaining is not None:
            self._stop_retaining.set()
            await asyncio.gather(retaining, return_exceptions=True)
            self._stop_retaining = asyncio.Event()
        working, self._working = self._working, None
        if working is None:
            return
        try:
            await asyncio.wait_for(self._worker.shutdown(), grace)
        except TimeoutError:
            working.cancel()
        await asyncio.gather(working, return_exceptions=True)

    def executing(self, run_id: str) -> bool:
        """``False``: a workflow task executes the run, never this process's runtime."""
        return False

    @typed_rpc("the wait for the run")
    async def wait(self, run_id: str) -> None:
        """Until the run's workflow waits or ended and the store shows the same status."""
        while True:
            snap = await self.host.store.load(run_id)
            if snap is not None and snap.run.status in _AT_REST:
                try:
                    if await (await self.runs()).status(run_id) == snap.run.status:
                        return
                except (RunCancelledError, NotPendingError):
                    return
            await asyncio.sleep(0.05)

    @typed_rpc("the wait for the run")
    async def rest(self, run_id: str) -> RunOutput | None:
        """Wait until nothing of the run is in flight in its workflow, and report how it ended.

        What ``--wait`` of ``steadyrun runs start|resume`` waits for (as the built-in engine
        executes the run until it suspends or ends); see ``_quiet.at_rest``. Unlike ``wait``,
        a stored status from before (a failed run a new workflow run is resuming) is not
        taken for the end.

        Returns:
            ``None`` when the store shows how the run stands; the workflow's output when it
            ended otherwise than the store shows (terminated, timed out): ``failed``.

        Raises:
            RunNotFoundError: Temporal knows no workflow of the run.
            UsageError: Its workflow refused the run (an agent its workers do not have).
        """
        return await at_rest(await self.runs(), self.host.store, run_id)

    # -- operations --------------------------------------------------------------------------

    @typed_rpc("the start")
    async def start(
        self, run_id: str, agent: str, input: str, *, fingerprint: str, meta: dict[str, str]
    ) -> Started:
        """Start the run's workflow once per request (see the module)."""
        store = self.host.store
        key = start_key(run_id)
        first = await self._start_claim(key)
        created = False
        if first is None:
            if await store.load(run_id) is not None or await self._exists(run_id):
                raise ConflictError(
                    f"run {run_id!r} exists and was not started by this request; choose another id"
                )
            claim = FeedMessage(id=_STARTED, content=agent, meta={START_META: fingerprint, **meta})
            with fenced(Fence(key, "steadyrun.operations", 0)):  # a key, not a run
                first = await store.append(key, claim)
            created = (first.meta or {}).get(START_META) == fingerprint
        if (first.meta or {}).get(START_META) != fingerprint:
            raise ConflictError(
                f"run {run_id!r} exists and was not started by this request; choose another id"
            )
        # Also when the request came before: a start that failed after its claim goes on here.
        await self._launch(RunInput(agent=agent, run_id=run_id, input=input))
        snap = await store.load(run_id)
        return Started(
            run_id=run_id, created=created, status=snap.run.status if snap else "running"
        )

    @typed_rpc("the resume")
    async def resume(self, run_id: str) -> bool:
        """Continue a failed run (``TemporalRuns.resume``); refused as the built-in refuses."""
        resumable(run_id, await self.host.store.load(run_id))
        await (await self.runs()).resume(run_id)
        return True

    @typed_rpc("the input")
    async def send(
        self, run_id: str, text: str, *, id: str | None, revision: str | None, by: str | None
    ) -> FeedMessage:
        """Input for the run; a completed run takes it in a new turn (a new workflow run)."""
        sent = await (await self.runs()).send(run_id, text, id=id, revision=revision or "1", by=by)
        assert sent is not None  # waited for
        return sent

    @typed_rpc("the decision")
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
        """The workflow's ``decide`` update; ``by`` is who decided unless ``decided_by`` says."""
        return await (await self.runs()).decide(
            run_id,
            call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by or by,
        )

    @typed_rpc("the answer")
    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None
    ) -> CallRecord:
        """The workflow's ``answer`` update."""
        return await (await self.runs()).answer(run_id, wait_id, response, by=by)

    @typed_rpc("the result")
    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None,
        error: str | None,
        by: str | None,
    ) -> CallRecord:
        """The workflow's ``settle`` update."""
        return await (await self.runs()).settle(run_id, call_id, result=result, error=error, by=by)

    @typed_rpc("the fork")
    async def fork(
        self, run_id: str, *, at: int, new_run_id: str, edit: Message | str | None, resume: bool
    ) -> ForkedRun:
        """``Runtime.fork`` into the store; with ``resume`` the new run's workflow starts.

        The new run is written to the store as on the built-in engine (the run forked from is
        only read); its workflow then loads it from there, as a successor's does.
        """
        host = self.host
        try:
            forked = await host.runtime.fork(run_id, at=at, new_run_id=new_run_id, edit=edit)
        except ForeignEngineError:
            # Its workflow holds the new run: the same fork again is answered from the store.
            forked = await self._forked_before(run_id, at, new_run_id, edit)
        if resume and forked.status == "suspended":
            await self.continued(forked.run_id)
        return forked

    @typed_rpc("the cancel")
    async def cancel(self, run_id: str, *, by: str | None) -> Cancelled:
        """Cancel the run's workflow and its children, then read back what it cancelled.

        The workflow records the runs ``cancelled`` and their open calls settled so; this
        waits up to ``settle_seconds`` for the store to show it. A run cancelled before
        answers with empty ``runs``, as on the built-in engine.
        """
        store = self.host.store
        before = await store.load(run_id)
        if before is not None and before.run.status == "cancelled":
            return Cancelled(run_id=run_id, runs=[], calls=[])
        await (await self.runs()).cancel(run_id, by=by)
        deadline = time.monotonic() + self.settle_seconds
        while time.monotonic() < deadline:
            snap = await store.load(run_id)
            if snap is not None and snap.run.status == "cancelled":
                break
            await asyncio.sleep(0.05)
        return await Operations(self.host.runtime).cancelled(run_id)

    @typed_rpc("the delete")
    async def delete(self, run_id: str) -> Deleted:
        """Delete a run at rest with its workflow, store rows and blobs (see the module).

        Returns once Temporal deleted the workflow's history (up to ``settle_seconds``), so
        the id can start a new run.

        Raises:
            RunBusyError: Its workflow is executing it (or started it and recorded nothing),
                or runs a background task of it.
            UsageError: ``run_id`` is a sub-agent run (delete its run).
        """
        return await self._delete(run_id, settle=True)

    @typed_rpc("the delete")
    async def expire(self, run_id: str) -> Deleted:
        """``delete`` for retention: Temporal is asked to delete the history, not waited for.

        Raises:
            RunBusyError: As ``delete``.
            UsageError: As ``delete``.
        """
        return await self._delete(run_id, settle=False)

    async def _delete(self, run_id: str, *, settle: bool) -> Deleted:
        if "/" in run_id:
            raise UsageError(
                f"run {run_id!r} is a sub-agent run: delete its run "
                f"{run_id.split('/', 1)[0]!r}, which takes it along"
            )
        store = self.host.store
        runs = await self.runs()
        handle = runs.client.get_workflow_handle(run_id)
        open_ = tasking = False
        try:
            described = await handle.describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            open_ = described.status == WorkflowExecutionStatus.RUNNING
            pending = described.raw_description.pending_activities
            tasking = open_ and any(a.activity_type.name == ACTIVITY_BACKGROUND for a in pending)
        snap = await store.load(run_id)
        holder = await store.leases.holder(run_id)
        owner = holder.owner if holder is not None else engine_owner(run_id)
        if snap is not None and snap.run.status == "running":
            raise RunBusyError(run_id, owner, None)
        if open_ and (snap is None or tasking or await self._executing_now(run_id)):
            # A background task going holds it back, as a task a built-in worker runs does.
            raise RunBusyError(run_id, owner, None)
        if open_:
            # At rest: nothing it does is lost. Its children end with it (their close policy).
            with contextlib.suppress(RPCError):
                await handle.terminate(reason="the run was deleted")
        lifecycle = lifecycle_of(store)
        fence = None
        if holder is not None and foreign_engine(holder.owner) == ENGINE:
            fence = Fence(run_id, holder.owner, holder.token)  # the workflow's claim goes too
        with fenced(fence):
            deletion = await lifecycle.delete_run(run_id)
        for key in (successor_key(run_id), start_key(run_id)):  # the id starts anew
            await lifecycle.delete_run(key)
        records = task_records(store)
        gone = await records.delete_run_tasks(run_id) if records is not None else 0
        for workflow_id in deletion.runs or [run_id]:
            client = (await self.runs()).client
            await forget(client, workflow_id, settle=self.settle_seconds if settle else None)
        codec = self.payload_codec
        if isinstance(codec, LargePayloadCodec):
            await collect_blobs(runs.client, codec.blobs, grace=timedelta(0), runs=[run_id])
        return Deleted(run_id=run_id, runs=deletion.runs, messages=deletion.messages, tasks=gone)

    @typed_rpc("the query")
    async def tasks(self, run_id: str) -> list[Task]:
        """The run's tasks (``TemporalRuns.tasks``).

        Its workflow's while it is open, else those recorded in the app's store when they
        ended (also when Temporal no longer knows the workflow, its history deleted).
        """
        records = task_records(self.host.store)
        try:
            return await (await self.runs()).tasks(run_id, recorded=records)
        except RunNotFoundError:
            return []

    @typed_rpc("the start")
    async def continued(self, run_id: str) -> None:
        """Start the workflow of a successor written to the store (it loads it from there)."""
        await self._launch(RunInput(agent="", run_id=run_id, resume=True))

    # -- inside ------------------------------------------------------------------------------

    async def _retain(self, policy: Retention) -> None:
        """Retention passes until ``close`` (see ``retention``)."""
        host = self.host

        def deleted(run_id: str) -> None:
            self.retained += 1

        await retain(
            host.store,
            policy,
            tasks=task_records(host.store),  # those that ended, recorded by the workers
            owner=getattr(host, "owner", None) or default_owner(),
            clock=host.runtime._clock,
            stopping=self._stop_retaining,
            on_deleted=deleted,
            foreign=self.expire,
        )

    async def _launch(self, inp: RunInput) -> None:
        # An ended workflow is not started again: its run took the input already.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await (await self.runs()).client.start_workflow(
                WORKFLOW_NAME,
                inp,
                id=inp.run_id,
                task_queue=self.task_queue,
                result_type=RunOutput,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )

    async def _forked_before(
        self, run_id: str, at: int, new_run_id: str, edit: Message | str | None
    ) -> ForkedRun:
        existing = await self.host.store.load(new_run_id)
        origin = {"run": run_id, "step": at, "edit": _edit_key(edit)}
        if existing is None or existing.checkpoint.extra.get(FORK_ORIGIN) != origin:
            raise ConflictError(
                f"run {new_run_id!r} exists already and is not this fork of {run_id!r} at step "
                f"{at}; choose another id"
            )
        return ForkedRun(
            run_id=new_run_id,
            forked_from=run_id,
            step=at,
            created=False,
            status=existing.run.status,
        )

    async def _executing_now(self, run_id: str) -> bool:
        """Whether the open workflow says it executes the run (not waiting for anything)."""
        try:
            return await (await self.runs()).status(run_id) == "running"
        except (RunCancelledError, NotPendingError, RunNotFoundError):
            return False

    async def _exists(self, run_id: str) -> bool:
        try:
            await (await self.runs()).client.get_workflow_handle(run_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def _start_claim(self, key: str) -> FeedMessage | None:
        store = self.host.store
        last = await store.pending(key, 0)
        if not last:
            return None
        for message in (await store.claim(key, last)).messages:
            if message.id == _STARTED:
                return message
        return None
