"""Two waits of ``TemporalEngine`` on the cluster: a run at rest, a workflow's history gone.

``at_rest`` is what ``steadyrun runs start|resume --wait`` wait for on Temporal (the built-in
engine executes the run in the command until it suspends or ends); ``forget`` deletes every
run of a workflow id (a workflow that continued as new left its earlier runs).
"""

from __future__ import annotations

import asyncio
import time

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._errors import NotPendingError, RunCancelledError, RunNotFoundError
from steadyrun.stores import Store
from steadyrun.temporal._background import ACTIVITY_BACKGROUND
from steadyrun.temporal._client import TemporalRuns
from steadyrun.temporal._payloads import RunOutput

__all__ = ["at_rest", "forget"]

_AT_REST = ("suspended", "completed", "failed", "cancelled")


async def at_rest(runs: TemporalRuns, store: Store, run_id: str) -> RunOutput | None:
    """Wait until nothing of the run is in flight in its workflow (``TemporalEngine.rest``).

    The workflow has no workflow task, activity (but a background task's, which goes on
    while the run waits, as on the built-in engine) or child workflow pending, and the store
    shows the run at rest with the workflow's status; or the workflow closed. A stored status
    from before (a failed run that a new workflow run is resuming) is not taken for the end:
    the new run's first workflow task is pending from its start on.

    Returns:
        ``None`` when the store shows how the run stands; the workflow's output when it
        ended otherwise than the store shows (terminated, timed out, failed before it
        recorded the run): a ``failed`` output saying how.

    Raises:
        RunNotFoundError: Temporal knows no workflow of the run.
        UsageError: Its workflow refused the run (an agent its workers do not have).
    """
    handle = runs.client.get_workflow_handle(run_id)
    pause = 0.05
    while True:
        try:
            described = await handle.describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise RunNotFoundError(run_id) from None
        if described.status == WorkflowExecutionStatus.CANCELED:
            return None  # it recorded the run cancelled before its cancel completed
        if described.status != WorkflowExecutionStatus.RUNNING:
            out = await runs.result(run_id)
            snap = await store.load(run_id)
            return None if snap is not None and snap.run.status == out.status else out
        raw = described.raw_description
        busy = (
            raw.HasField("pending_workflow_task")
            or len(raw.pending_children) > 0
            or any(a.activity_type.name != ACTIVITY_BACKGROUND for a in raw.pending_activities)
        )
        snap = None if busy else await store.load(run_id)
        if snap is not None and snap.run.status in _AT_REST:
            try:
                if await runs.status(run_id) == snap.run.status:
                    return None
            except (RunCancelledError, NotPendingError):
                pass  # it closed meanwhile: the next look says how
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, 0.5)  # a long run is not asked about 20 times a second


async def forget(client: Client, workflow_id: str, *, settle: float | None) -> None:
    """Delete every run of a closed workflow id; with ``settle`` seconds, wait until it is gone.

    Each run of a continue-as-new chain is an execution Temporal deletes on its own (while
    one is there, the id is still found, and cannot start again); the chain is followed back
    from the newest run's first event. Temporal deletes in the background, once its
    visibility records of the close are through (up to half a minute on a dev server).
    """
    asked: set[str] = set()
    deadline = time.monotonic() + (settle or 0.0)
    while True:
        try:
            newest = (await client.get_workflow_handle(workflow_id).describe()).run_id
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return
            raise
        if newest not in asked:
            for run in await _chain(client, workflow_id, newest):
                asked.add(run)
                request = DeleteWorkflowExecutionRequest(
                    namespace=client.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run),
                )
                try:
                    await client.workflow_service.delete_workflow_execution(request)
                except RPCError as exc:
                    if exc.status != RPCStatusCode.NOT_FOUND:
                        raise
        if settle is None or time.monotonic() >= deadline:
            return
        await asyncio.sleep(0.05)


async def _chain(client: Client, workflow_id: str, newest: str) -> list[str]:
    """The runs of a workflow id, newest first: each started continuing the one before."""
    chain = [newest]
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=chain[-1])
        before = ""
        try:
            async for event in handle.fetch_history_events(page_size=1):
                before = (
                    event.workflow_execution_started_event_attributes.continued_execution_run_id
                )
                break
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        if not before or before in chain:
            return chain
        chain.append(before)
