"""``TemporalRuns``: start runs on Temporal and reach them, with ``Runtime``'s host operations."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import uuid
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    TimeoutError,
    WorkflowAlreadyStartedError,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._codec import from_plain
from steadyrun._errors import (
    NotPendingError,
    RunBusyError,
    RunCancelledError,
    RunNotFoundError,
    UsageError,
)
from steadyrun.background import Task, TaskStore
from steadyrun.records import CallRecord
from steadyrun.runtime import Agent, PendingItem
from steadyrun.runtime._host import BY_META
from steadyrun.stores import FeedMessage, Store
from steadyrun.stream import DisplaySnapshot
from steadyrun.temporal._client_errors import _RunEnded, _RunFailed
from steadyrun.temporal._client_errors import cancelled as _cancelled
from steadyrun.temporal._client_errors import named as _named
from steadyrun.temporal._client_errors import not_found as _not_found
from steadyrun.temporal._client_errors import typed as _typed
from steadyrun.temporal._client_errors import typed_cause as _typed_cause
from steadyrun.temporal._payloads import (
    WORKFLOW_NAME,
    AnswerArgs,
    DecideArgs,
    RunInput,
    RunOutput,
    SendArgs,
    SettleArgs,
)
from steadyrun.temporal._rpc import typed_rpc
from steadyrun.temporal._run_handle import TemporalRunHandle
from steadyrun.temporal._taskrecords import open_or_recorded, task_records

__all__ = ["TemporalRuns", "client_with_codec"]

T = TypeVar("T")

# Pauses before asking again when the workflow refused an update as busy (its worker was
# bringing it up to date, or it was loading a run to continue): about 3 s in all.
_BUSY_PAUSES = (0.1, 0.2, 0.4, 0.8, 1.6)

# How Temporal names a closed workflow's status, in the words of a run's.
_ENDED = {
    WorkflowExecutionStatus.FAILED: "failed (its workflow failed)",
    WorkflowExecutionStatus.TERMINATED: "terminated (its workflow was terminated)",
    WorkflowExecutionStatus.TIMED_OUT: "timed out (its workflow's execution timeout)",
}
_COMPLETED = WorkflowExecutionStatus.COMPLETED
_CLOSED = {*_ENDED, _COMPLETED, WorkflowExecutionStatus.CANCELED}


def client_with_codec(client: Client, codec: PayloadCodec | None) -> Client:
    """``client`` (the same connection) with ``codec`` as its payload codec.

    ``None`` returns ``client`` unchanged.
    """
    if codec is None:
        return client
    config = client.config()
    config["data_converter"] = dataclasses.replace(
        config.get("data_converter") or DataConverter.default, payload_codec=codec
    )
    return Client(**config)


class TemporalRuns:
    """Runs on Temporal, seen from a client: start, wait, decide, answer, settle, send, read.

    The run id is the workflow id. Host writes are workflow updates: a refused write raises
    the same typed error as ``Runtime`` would (``NotPendingError``, ``ConflictError``,
    ``UnknownCallError``, ``InvalidResponseError``, ``UsageError``) and changes nothing.

    A run's workflow ends when the run completes or fails. New input for it (``send``, or
    ``start``/``run`` with its id) starts a new workflow run for the same id that continues
    from the run's last step in the app's store: a new turn, as on the built-in engine;
    ``resume`` continues a failed run the same way. A decision, answer or result for a run
    that ended (completed, failed or cancelled) is answered from its records as ``Runtime``
    answers it: the same one again is accepted and changes nothing, a different one raises
    ``ConflictError``, one its call does not wait for ``NotPendingError`` (the ended workflow
    computes it in a query, so a worker must poll; a write that would change the run raises
    ``NotPendingError``, or ``RunCancelledError`` for a cancelled run). A cancel of a run that
    completed or failed, and ``resume`` of a completed one, raise ``NotPendingError``; input
    for a cancelled run raises ``RunCancelledError`` (cancelling it again changes nothing); a
    call on a run id with no workflow raises ``RunNotFoundError``. A cluster that does not
    answer (or refuses a call for a reason of its own) raises ``EngineUnavailableError``
    from every method, with Temporal's ``RPCError`` as its cause; the handles ``start`` and
    ``resume`` return wait with these typed errors too (``TemporalRunHandle``).

    Args:
        client: A connected Temporal client.
        task_queue: Where runs start (the workers' ``TemporalOptions.task_queue``).
        payload_codec: The workers' ``TemporalOptions.payload_codec``, when they set one
            (``TemporalApp.runs`` passes it).
        store: The workers' app store (``TemporalApp.runs`` passes it): with it, input for a
            run whose closed workflow Temporal forgot (its namespace's retention) continues
            the run from the store, as on the built-in engine; without, it raises
            ``RunNotFoundError``. Its task tables hold the tasks that ended (read once a
            workflow closed).
        recorded: Where the workers record the tasks that ended (default: the task tables
            of ``store``).
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "steadyrun",
        payload_codec: PayloadCodec | None = None,
        store: Store | None = None,
        recorded: TaskStore | None = None,
    ) -> None:
        self.client = client_with_codec(client, payload_codec)
        self.task_queue = task_queue
        self.store = store
        self.recorded = recorded if recorded is not None else task_records(store)

    @typed_rpc("the start")
    async def start(
        self,
        agent: Agent | str,
        *,
        run_id: str,
        input: str,
        input_id: str | None = None,
        execution_timeout: timedelta | None = None,
    ) -> TemporalRunHandle:
        """Start a run, or give an ended one new input.

        A run with this id that is going is returned as is (a repeated start). A run that
        completed or failed takes ``input`` as new input and goes on in a new workflow run
        (see ``send``).

        Raises:
            RunCancelledError: The run was cancelled.
        """
        name = agent.name if isinstance(agent, Agent) else agent
        try:
            # ``resume``: the workflow asks the app's store first, so an id whose closed
            # workflow Temporal forgot (retention) goes on from its records, never anew.
            await self.client.start_workflow(
                WORKFLOW_NAME,
                RunInput(agent=name, run_id=run_id, input=input, input_id=input_id, resume=True),
                id=run_id,
                task_queue=self.task_queue,
                result_type=RunOutput,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                # An ended run is not started anew over its records: it goes on (below).
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                execution_timeout=execution_timeout,
            )
            return self._run_handle(run_id)
        except WorkflowAlreadyStartedError:
            pass
        args = SendArgs(id=input_id or uuid.uuid4().hex, content=input)
        try:
            await self._update(run_id, "send", args)  # it is going after all
        except _RunEnded:
            # The app's store decides: a run it has goes on, a run it lacks starts anew.
            await self._restart(run_id, args, agent=name)
        return self._run_handle(run_id)

    @typed_rpc("the run")
    async def run(self, agent: Agent | str, *, run_id: str, input: str) -> RunOutput:
        """Start a run and wait until it completes or fails."""
        await self.start(agent, run_id=run_id, input=input)
        return await self.result(run_id)

    @typed_rpc("the wait for the result")
    async def result(self, run_id: str) -> RunOutput:
        """Wait for a run's end (across continue-as-new).

        A workflow that failed, was terminated or timed out gives a ``failed`` output whose
        ``error_kind`` says which (``resume`` continues the run).

        Raises:
            RunNotFoundError: No workflow has this run id.
            RunCancelledError: The run was cancelled.
        """
        try:
            out = await self._reaching(run_id, "result", self._handle(run_id).result())
            if out.status == "cancelled":  # cancelled after its workflow ended, failed
                raise _cancelled(run_id)
            return out
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, CancelledError):
                raise _cancelled(run_id) from None
            typed = _typed_cause(cause)
            if typed is not None:  # refused before it ran (an agent this app does not know)
                raise typed from None
            kind = {TerminatedError: "WorkflowTerminated", TimeoutError: "WorkflowTimedOut"}
            return RunOutput(
                run_id=run_id,
                status="failed",
                error_kind=kind.get(type(cause), "WorkflowFailed"),
                error=f"{cause or exc}; TemporalRuns.resume({run_id!r}) continues the run",
            )

    @typed_rpc("the resume")
    async def resume(self, run_id: str) -> TemporalRunHandle:
        """Continue a failed run from its last saved step (see ``Runtime.resume``).

        A run whose workflow failed, was terminated or timed out, or whose run failed, goes
        on in a new workflow run from its last step in the app's store: calls that started
        and never settled are settled by their traits (``interrupted``, ``needs_review``), so
        nothing with side effects runs twice. A run that is going is returned as is. Wait for
        it with ``result``.

        Raises:
            RunNotFoundError: No workflow has this run id.
            RunCancelledError: The run was cancelled.
            NotPendingError: The run completed: there is nothing to resume (give it input).
        """
        handle = self._handle(run_id)
        status = (await self._reaching(run_id, "resume", handle.describe())).status
        if status == WorkflowExecutionStatus.CANCELED:
            raise _cancelled(run_id)
        if status not in _CLOSED:
            return self._run_handle(run_id)  # going (or continued as new): nothing to resume
        ended = (await handle.result()).status if status == _COMPLETED else "failed"
        if ended == "cancelled":
            raise _cancelled(run_id)
        if ended == "completed":
            raise NotPendingError(
                f"run {run_id!r} completed: there is nothing to resume; send it a message to go on"
            )
        await self.client.start_workflow(
            WORKFLOW_NAME,
            RunInput(agent="", run_id=run_id, resume=True),
            id=run_id,
            task_queue=self.task_queue,
            result_type=RunOutput,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return self._run_handle(run_id)

    @typed_rpc("the query")
    async def pending(self, run_id: str) -> list[PendingItem]:
        """What the run waits for (decisions, inputs, awaited results)."""
        query = self._handle(run_id).query("pending", result_type=list)
        return from_plain(await self._reaching(run_id, "query", query), list[PendingItem])

    @typed_rpc("the query")
    async def tasks(self, run_id: str, *, recorded: TaskStore | None = None) -> list[Task]:
        """The run's background tasks, oldest first (see ``TemporalApp``).

        The open workflow answers; once it closed (or its history was deleted), the tasks
        that ended are read where the workers recorded them (``recorded``, by default the
        task tables of the app's store; without any, a closed workflow is asked, which a
        worker must replay).

        Raises:
            RunNotFoundError: No workflow has this run id and no task of it was recorded.
        """
        records = recorded if recorded is not None else self.recorded
        if records is not None:
            found = await open_or_recorded(self._handle(run_id), records, run_id)
            if found is not None:
                return found
        query = self._handle(run_id).query("tasks", result_type=list)
        return from_plain(await self._reaching(run_id, "query", query), list[Task])

    @typed_rpc("the query")
    async def snapshot(self, run_id: str) -> DisplaySnapshot:
        """The run's display snapshot."""
        query = self._handle(run_id).query("snapshot", result_type=dict)
        return from_plain(await self._reaching(run_id, "query", query), DisplaySnapshot)

    @typed_rpc("the query")
    async def status(self, run_id: str) -> str:
        """The run's status as its workflow sees it."""
        query = self._handle(run_id).query("status", result_type=str)
        return str(await self._reaching(run_id, "query", query))

    @typed_rpc("the decision")
    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | str | None = None,
        decided_by: str | None = None,
    ) -> CallRecord:
        """Approve or reject a call waiting for a decision (see ``Runtime.decide``)."""
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        args = DecideArgs(
            call_id=call_id,
            approve=approve,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by,
        )
        return await self._record_update(run_id, "decide", args)

    @typed_rpc("the answer")
    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> CallRecord:
        """Answer an input request (see ``Runtime.answer``); ``by`` names who answered."""
        return await self._record_update(
            run_id, "answer", AnswerArgs(wait_id=wait_id, response=response, by=by)
        )

    @typed_rpc("the result")
    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None = None,
        error: str | None = None,
        by: str | None = None,
    ) -> CallRecord:
        """Record the outcome of a call the host owns (see ``Runtime.settle``); ``by``: who."""
        if (result is None) == (error is None):
            raise UsageError("settle() takes exactly one of result=... or error=...")
        return await self._record_update(
            run_id, "settle", SettleArgs(call_id=call_id, result=result, error=error, by=by)
        )

    @typed_rpc("the input")
    async def send(
        self,
        run_id: str,
        content: str,
        *,
        id: str | None = None,
        revision: str = "1",
        wait: bool = True,
        by: str | None = None,
    ) -> FeedMessage | None:
        """Input for the run, taken at its next safe point (see ``Runtime.send``).

        A run that completed or failed takes it as a new turn: a new workflow run for the
        same run id continues from the run's last step in the app's store (the workers'
        ``TemporalApp`` needs a store). With ``wait=False`` it is a signal (fire and forget)
        and returns ``None``. ``by`` names who sent it (kept in the message's meta, as
        ``Runtime.send`` keeps it).

        Raises:
            RunNotFoundError: No workflow has this run id.
            RunCancelledError: The run was cancelled.
        """
        meta = {BY_META: by} if by is not None else None
        args = SendArgs(id=id or uuid.uuid4().hex, content=content, revision=revision, meta=meta)
        handle = self._handle(run_id)
        try:
            if not wait:
                await self._reaching(run_id, "input", handle.signal("input", args))
                return None
            plain = await self._update(run_id, "send", args)
        except _RunEnded:
            plain = await self._restart(run_id, args)
            if not wait:
                return None
        except RunNotFoundError:
            # Forgotten by Temporal (its namespace's retention deleted the closed workflow)
            # while the app's store keeps it: it goes on, as on the built-in engine, where a
            # run takes input for as long as the store keeps it. An id the store lacks is not
            # asked of a worker (no workflow is started for a typo).
            if self.store is None or await self.store.load(run_id) is None:
                raise
            plain = await self._restart(run_id, args)
            if not wait:
                return None
        return from_plain(plain, FeedMessage)

    async def _restart(self, run_id: str, args: SendArgs, agent: str = "") -> Any:
        """``args`` for a run whose workflow ended: a new workflow run continues the run.

        The input is an update sent with the start, so it reaches the run exactly once even
        when two clients restart it at the same time (the second joins the first's workflow).
        """
        start: WithStartWorkflowOperation[Any, RunOutput] = WithStartWorkflowOperation(
            WORKFLOW_NAME,
            RunInput(agent=agent, run_id=run_id, resume=True),
            id=run_id,
            task_queue=self.task_queue,
            result_type=RunOutput,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            return await self.client.execute_update_with_start_workflow(
                "send", args, start_workflow_operation=start, result_type=dict
            )
        except WorkflowUpdateFailedError as exc:
            raise _typed(exc) from None

    @typed_rpc("the cancel")
    async def cancel(self, run_id: str, *, by: str | None = None) -> None:
        """Cancel a run, and the child workflows of its delegations.

        The workflows end cancelled; the store shows the runs ``cancelled``, their open calls
        settled ``cancelled``. Cancelling a cancelled run again changes nothing. ``by`` names
        who cancelled (``RunRecord.cancelled_by``; told to the workflow in a signal first).

        A run that failed is cancelled too, as on the built-in engine (so nothing resumes
        it): its workflow had ended, so a new workflow run marks it cancelled in the app's
        store (its open calls ``cancelled``) and ends.

        Raises:
            RunNotFoundError: No workflow has this run id.
            NotPendingError: The run completed (there is nothing to cancel).
        """
        handle = self._handle(run_id)
        try:
            # Temporal takes a cancel of a closed workflow and does nothing: ask first, so an
            # ended run is cancelled, or refused, as ``Runtime``'s cancel does it.
            description = await self._reaching(run_id, "cancel", handle.describe())
            if description.status in _CLOSED:
                gone = await self._gone(run_id, "cancel", None)
                if not isinstance(gone, _RunFailed):
                    raise gone
                if await self._cancel_failed(run_id, by):
                    return
            if await self.status(run_id) == "completed":
                # Its workflow stays while background tasks run; the run itself has ended,
                # and the built-in engine's cancel refuses it too.
                raise NotPendingError(f"run {run_id!r} completed; there is nothing to cancel")
            if by is not None:
                # Its children end with it, each recording who cancelled (as the built-in
                # engine records it on every run the cancel ends): told before the cancel
                # reaches them, which the parent's cancel below sends.
                for child in await self._open_children(description):
                    with contextlib.suppress(RPCError):  # ended meanwhile: nothing to tell
                        await self._handle(child).signal("cancelling", by)
                await self._reaching(run_id, "cancel", handle.signal("cancelling", by))
            await self._reaching(run_id, "cancel", handle.cancel())
        except RunCancelledError:
            return

    async def _open_children(self, description: WorkflowExecutionDescription) -> list[str]:
        """The workflow ids of a workflow's open child workflows, and of theirs, deepest last."""
        found: list[str] = []
        for child in description.raw_description.pending_children:
            found.append(child.workflow_id)
            try:
                described = await self._handle(child.workflow_id).describe()
            except RPCError:
                continue  # ended meanwhile
            found += await self._open_children(described)
        return found

    async def _cancel_failed(self, run_id: str, by: str | None = None) -> bool:
        """Cancel a failed run whose workflow ended; ``False``: it was resumed meanwhile."""
        try:
            started = await self.client.start_workflow(
                WORKFLOW_NAME,
                RunInput(agent="", run_id=run_id, resume=True, cancel=True, cancelled_by=by),
                id=run_id,
                task_queue=self.task_queue,
                result_type=RunOutput,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            )
        except WorkflowAlreadyStartedError:
            return False  # going again: cancelled as a going run
        try:
            await started.result()  # it marks the run cancelled in the store and ends
        except WorkflowFailureError as exc:
            typed = _typed_cause(exc.cause)
            if not isinstance(typed, RunCancelledError):  # cancelled already: fine
                raise typed or exc from None
        return True

    def _handle(self, run_id: str) -> WorkflowHandle[Any, RunOutput]:
        return self.client.get_workflow_handle(run_id, result_type=RunOutput)

    def _run_handle(self, run_id: str) -> TemporalRunHandle:
        return TemporalRunHandle(self.client, run_id, self.result)

    async def _record_update(self, run_id: str, name: str, args: Any) -> CallRecord:
        try:
            plain = await self._update(run_id, name, args)
        except (_RunEnded, RunCancelledError) as ended:
            plain = await self._ended_write(run_id, name, args, ended)
        return from_plain(plain, CallRecord)

    async def _ended_write(
        self, run_id: str, name: str, args: Any, ended: NotPendingError | RunCancelledError
    ) -> Any:
        """A decision, answer or result for a run whose workflow ended, as ``Runtime`` answers it.

        The ended workflow computes the write on the run's records (the ``host_write`` query):
        the same answer again is accepted (it changes nothing), a different one raises
        ``ConflictError``, one the call does not wait for ``NotPendingError``, as while the run
        waited. A write that would change the run raises ``ended``: its workflow takes no update.
        """
        query = self._handle(run_id).query(
            "host_write", args=[name, dataclasses.asdict(args)], result_type=dict
        )
        try:
            out = await query
        except (WorkflowQueryFailedError, RPCError):
            # A worker from before the query, or none polling to replay the workflow: what
            # the run's workflow status says is all there is to go on.
            raise ended from None
        if "error" in out:
            raise _named(str(out["error"]), str(out.get("message", ""))) or ended
        if "record" not in out or out.get("changed", True):
            raise ended
        return out["record"]

    async def _update(self, run_id: str, name: str, args: Any) -> Any:
        what = {"send": "input", "decide": "decision", "settle": "result"}.get(name, name)
        for pause in (*_BUSY_PAUSES, None):
            update = self._handle(run_id).execute_update(name, args, result_type=dict)
            try:
                return await self._reaching(run_id, what, update)
            except WorkflowUpdateFailedError as exc:
                cause = exc.cause
                busy = isinstance(cause, ApplicationError) and cause.type == "RunBusyError"
                if not busy:
                    raise _typed(exc) from None
                if pause is None:
                    raise RunBusyError(run_id, "its Temporal workflow", None) from None
            # A refused update left nothing in the history: asking again is safe.
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def _reaching(self, run_id: str, what: str, call: Awaitable[T]) -> T:
        """``call`` on the run's workflow; Temporal's "not found" as steadyrun's typed error."""
        try:
            return await call
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise await self._gone(run_id, what, exc) from None

    async def _gone(self, run_id: str, what: str, exc: RPCError | None) -> Exception:
        """Why the workflow of ``run_id`` could not be reached: none, or it ended (and how)."""
        handle = self._handle(run_id)
        try:
            status = (await handle.describe()).status
        except RPCError as described:
            if described.status != RPCStatusCode.NOT_FOUND:
                raise
            return _not_found(run_id)
        if status == WorkflowExecutionStatus.CANCELED:
            return _cancelled(run_id)
        if status == WorkflowExecutionStatus.COMPLETED:
            # The workflow completes when the run completes or fails (or a failed run was
            # cancelled after it ended): its output says which.
            ended = (await handle.result()).status
        elif status in _ENDED:
            ended = _ENDED[status]
        else:
            # Running after all (or continued as new): not a run that ended.
            return exc or UsageError(f"run {run_id!r} has not ended")
        if ended == "cancelled":
            return _cancelled(run_id)
        if what == "cancel" and ended == "completed":
            return NotPendingError(f"run {run_id!r} {ended}; there is nothing to cancel")
        if what == "cancel":
            return _RunFailed(f"run {run_id!r} {ended}")
        return _RunEnded(
            f"run {run_id!r} {ended}: it waits for no {what}. New input "
            "(TemporalRuns.send) starts a new turn; TemporalRuns.resume continues a failed run"
        )
