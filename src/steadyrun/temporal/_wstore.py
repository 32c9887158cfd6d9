"""The run's store inside ``AgentWorkflow``: memory, rebuilt by replay, mirrored to the app's.

Every write the loop makes is kept in a ``MemoryStore`` in the workflow's memory and queued for
the app's store, where the ``steadyrun.record`` activity applies it in order. Update validators
read through a ``DryStore`` that computes host writes without storing them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._errors import CallNotFoundError
    from steadyrun.background import Task, Update
    from steadyrun.records import (
        ACTIVE_STATUSES,
        CallRecord,
        CallUpdate,
        ContextChange,
        RunSnapshot,
        Step,
        overlay_external,
    )
    from steadyrun.runtime import Agent
    from steadyrun.runtime._host import HostOperations
    from steadyrun.stores import FeedMessage, MemoryStore, RunSummary
    from steadyrun.temporal._payloads import (
        ACTIVITY_RECORD,
        Carried,
        RecordInput,
        RecordOp,
        update_to_plain,
    )
    from steadyrun.temporal._taskrecords import task_op_data

__all__ = [
    "TASK_RECORDS",
    "TASK_RECORDS_LIVE",
    "ContinueAsNew",
    "DryStore",
    "Recorder",
    "WorkflowHost",
    "WorkflowStore",
    "run_now",
]

T = TypeVar("T")

CANCELLED = "the run was cancelled"

TASK_RECORDS = "steadyrun-task-records"
"""The patch under which the background tasks that ended are written to the app's store, and
a cancel waits for the run's tasks to end."""

TASK_RECORDS_LIVE = "steadyrun.task-records-live"
"""The patch under which a background task is also written to the app's store when it is
adopted, waits for an answer and resumes (its progress updates: by its own activity)."""


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never suspends (the in-workflow store's operations).

    Queries and update validators are synchronous; the store they read is process memory.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("an in-workflow store operation suspended")


class ContinueAsNew(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the workflow's store right after a step is saved: continue as new from it."""


# -- the workflow's store -----------------------------------------------------------------


class Recorder:
    """Writes queued for the app's store, flushed in order by one background task."""

    def __init__(
        self, run_id: str, enabled: bool, timeout: timedelta, heartbeat: timedelta | None = None
    ) -> None:
        self.run_id = run_id
        self.enabled = enabled
        self.timeout = timeout
        self.heartbeat = heartbeat
        self.ops: list[RecordOp] = []
        self.closing = False
        self.task: asyncio.Task[None] | None = None

    def add(self, op: RecordOp) -> None:
        if self.enabled:
            self.ops.append(op)

    def start(self) -> None:
        if self.enabled:
            self.task = asyncio.create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self.ops) or self.closing)
            if not self.ops:
                return
            batch, self.ops = self.ops, []
            await workflow.execute_activity(
                ACTIVITY_RECORD,
                RecordInput(run_id=self.run_id, ops=batch),
                start_to_close_timeout=self.timeout,
                heartbeat_timeout=self.heartbeat,
                # Idempotent writes: retried until the store takes them.
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
            )

    async def drain(self) -> None:
        """Wait until everything queued is written; the flusher stops."""
        self.closing = True
        if self.task is not None:
            await self.task
            self.task = None


class WorkflowStore(MemoryStore):
    """The run's store inside the workflow: memory, mirrored to the app's store."""

    def __init__(self, recorder: Recorder, continue_after: int | None) -> None:
        super().__init__()
        self.recorder = recorder
        self.continue_after = continue_after
        self.feed: list[FeedMessage] = []
        self.feed_offset = 0  # messages numbered before ``feed`` (a run restarted from the store)
        self.consumed_through = 0
        self.hold: Callable[[], bool] = lambda: False  # True: do not continue as new now

    async def save_step(self, run_id: str, step: Step) -> None:
        await super().save_step(run_id, step)
        self.recorder.add(RecordOp(op="save_step", data=to_plain(step, Step)))
        ended = ("completed", "failed", "cancelled")
        # A step that starts calls (the response's step carries its calls' starts) is no place
        # to continue as new: the next run would find them started and settle them as cut
        # off. The step after them (their outcomes, the next step) is.
        starting = any(c.status == "running" for c in step.calls)
        if (
            self.continue_after is not None
            and step.run.status not in ended
            and not starting
            and not self.hold()
        ):
            info = workflow.info()
            length = info.get_current_history_length()
            if length >= self.continue_after or info.is_continue_as_new_suggested():
                raise ContinueAsNew()

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        await super().save_call(run_id, call)
        self.recorder.add(RecordOp(op="save_call", data=to_plain(call, CallRecord)))

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        merged = await super().update_call(run_id, call_id, update)
        self.recorder.add(RecordOp(op="update_call", call_id=call_id, data=update_to_plain(update)))
        return merged

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        stored = await super().append(run_id, message)
        if stored.seq > len(self.feed):  # new, not a duplicate
            self.feed.append(stored)
            self.recorder.add(RecordOp(op="append", data=to_plain(message, FeedMessage)))
        return stored

    async def consume(self, run_id: str, through: int) -> None:
        await super().consume(run_id, through)
        if through > self.consumed_through:
            self.consumed_through = through
            self.recorder.add(RecordOp(op="consume", through=through))

    def record_task(self, task: Task, updates: list[Update]) -> None:
        """Queue a background task that ended (and its last updates) for the app's store.

        Behind a patch: histories from before it recorded no task, and replay as they ran.
        """
        if workflow.patched(TASK_RECORDS):
            self.recorder.add(RecordOp(op="task", data=task_op_data(task, updates)))

    def record_task_going(self, task: Task, updates: list[Update]) -> None:
        """Queue a background task that has not ended (owned by this workflow) for the store.

        Behind a patch: histories from before it wrote a task only when it ended.
        """
        if workflow.patched(TASK_RECORDS_LIVE):
            held_by = workflow.info().workflow_id
            op = RecordOp(op="task", data=task_op_data(task, updates, held_by=held_by))
            self.recorder.add(op)

    async def cancel(
        self, run_id: str, now: datetime, reason: str = CANCELLED, *, by: str | None = None
    ) -> None:
        """Mark the run cancelled (by ``by``), its open calls settled ``cancelled``.

        A no-op once the run ended.
        """
        snap = await self.load(run_id)
        if snap is None or snap.run.status in ("completed", "cancelled"):
            return
        settled = []
        for call in snap.calls:
            if call.status not in ACTIVE_STATUSES:
                continue
            why = reason
            if call.status == "running":
                why = f"{reason} while the call was running; whether it took effect is unknown"
            settled.append(
                replace(call, rev=call.rev + 1, status="cancelled", error=why, completed_at=now)
            )
        run = replace(
            snap.run, status="cancelled", updated_at=now, steps=snap.run.steps + 1, cancelled_by=by
        )
        await self.save_step(run_id, Step(run=run, checkpoint=snap.checkpoint, calls=settled))

    async def restore(self, run_id: str, carried: Carried) -> None:
        """Load a carried state (continue-as-new); the app's store has it already."""
        snap = from_plain(carried.snapshot, RunSnapshot)
        step = Step(
            run=snap.run,
            checkpoint=snap.checkpoint,
            context=ContextChange(base=snap.context),
            blocks=snap.blocks,
            calls=snap.calls,
        )
        await MemoryStore.save_step(self, run_id, step)
        self.feed_offset = carried.feed_offset
        for n in range(carried.feed_offset):
            # Stand-ins keep the store's numbering: they lie below the run's claimed input.
            await MemoryStore.append(self, run_id, FeedMessage(id=f"\x00earlier:{n}", content=""))
        for plain in carried.feed:
            message = from_plain(plain, FeedMessage)
            stored = await MemoryStore.append(self, run_id, message)
            self.feed.append(stored)
        await MemoryStore.consume(self, run_id, carried.consumed)
        self.consumed_through = carried.consumed


class DryStore(WorkflowStore):
    """A read-only view for update validators: host writes are computed, never stored."""

    def __init__(self, inner: WorkflowStore) -> None:
        self.inner = inner
        self.leases = inner.leases  # host operations ask who holds the run (nobody, here)

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self.inner.load(run_id)

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        return await self.inner.load_call(run_id, call_id)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        stored = await self.inner.load_call(run_id, call_id)
        if stored is None:
            raise CallNotFoundError(run_id, call_id)
        return overlay_external(stored, update)

    async def list_runs(self, **kwargs: Any) -> list[RunSummary]:
        return []


class WorkflowHost(HostOperations):
    """steadyrun's host operations on the workflow's store (updates and queries)."""

    def __init__(self, store: WorkflowStore, agent: Agent) -> None:
        self.store = store
        self._agents = {agent.name: agent}
        self._clock = workflow.now
