"""The activities of ``AgentWorkflow``: model calls, tool bodies, and writes to the app's store.

They run in the worker, where the agents, their models, tools and dependencies live. A tool
body's outcome (what it returned, the control signal or exception it raised) comes back as a
``ToolOutcome``; the workflow turns it into the record's next state with steadyrun's own
``CallRunner``. Only the loss of the worker (or a timeout) fails the activity itself, and only
then does Temporal's retry policy apply.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError

from steadyrun._codec import from_plain, to_plain
from steadyrun._errors import ConflictError, NotPendingError, StoreError, UsageError
from steadyrun.background import Materializer
from steadyrun.chat import MediaRef, ModelRequest, ModelResponse, Usage
from steadyrun.control import (
    AwaitExternal,
    Complete,
    ControlSignal,
    Detach,
    HostFailure,
    InputRequired,
)
from steadyrun.media import MediaOptions, MediaPreparer, supplying
from steadyrun.models import ModelClient, resolve_model
from steadyrun.records import CallRecord, RunSnapshot, Step
from steadyrun.runtime import Agent
from steadyrun.runtime._extension import ModelCall, ModelNext, ToolCall, TurnView
from steadyrun.stores import FeedMessage, Store
from steadyrun.stores._leases import Fence, LeaseLostError, fenced
from steadyrun.stores._live_open import live_feed
from steadyrun.temporal._background import (
    ACTIVITY_BACKGROUND,
    BackgroundInput,
    BackgroundOutcome,
    run_operation,
)
from steadyrun.temporal._claim import engine_claim
from steadyrun.temporal._extio import (
    ACTIVITY_EXTENSION,
    HookInput,
    HookOutput,
    instances_for,
    run_hook,
)
from steadyrun.temporal._extmw import (
    ACTIVITY_MIDDLEWARE,
    ACTIVITY_MODEL_WRAPPED,
    MiddlewareInput,
    MiddlewareOutput,
    WrappedModelInput,
    WrappedModelOutput,
    fill_instructions,
    run_middleware,
    wrap_model_chain,
    wrap_tool_chain,
)
from steadyrun.temporal._handover import (
    ACTIVITY_HANDOVER,
    HandoverInput,
    HandoverOutcome,
    call_hook,
)
from steadyrun.temporal._payloads import (
    ACTIVITY_CHILD_END,
    ACTIVITY_LOAD,
    ACTIVITY_MODEL,
    ACTIVITY_RECORD,
    ACTIVITY_TOOL,
    Carried,
    ChildEnd,
    Loaded,
    ModelCallInput,
    RecordInput,
    RunOutput,
    ToolCallInput,
    ToolOutcome,
    update_from_plain,
)
from steadyrun.temporal._taskrecords import record_task, recorded_tasks, task_records
from steadyrun.tools import Tool, ToolArgumentsError, ToolContext

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = ["Activities"]


def _describe(exc: BaseException) -> str:
    return str(exc)


_FENCES_KEPT = 10_000
"""Fences a worker keeps (a few hundred bytes each); the oldest goes first."""


class Activities:
    """The activities of one ``TemporalApp`` (bound methods, registered with its worker)."""

    def __init__(self, app: AppView, *, task_output: Materializer | None = None) -> None:
        self.app = app
        self.task_output = task_output
        self.media = MediaPreparer(app.media or MediaOptions(), app.texts)
        # The fences record activities wrote under, by run and workflow run. A run's claim is
        # its workflow's for good, so it is read once per worker, not once per batch; a
        # fence gone stale (the run deleted and started again, taken by another engine) is
        # refused by the store's own check, and then read again.
        self._fences: dict[tuple[str, str | None], Fence] = {}

    def all(self) -> list[Callable[..., Any]]:
        """The activity functions to register."""
        return [
            self.model,
            self.tool,
            self.record,
            self.background,
            self.load,
            self.handover,
            self.extension,
            self.model_wrapped,
            self.middleware,
            self.child_end,
        ]

    def _agent(self, name: str) -> Agent:
        try:
            return self.app.agent(name)
        except KeyError as exc:
            raise ApplicationError(str(exc), type="UsageError", non_retryable=True) from None

    # -- model ------------------------------------------------------------------------------

    @activity.defn(name=ACTIVITY_MODEL)
    async def model(self, inp: ModelCallInput) -> dict[str, Any]:
        """One model call of a run (media are prepared here, where they can be read)."""
        response = await self._respond(inp, None)
        return to_plain(response, ModelResponse)  # type: ignore[no-any-return]

    @activity.defn(name=ACTIVITY_MODEL_WRAPPED)
    async def model_wrapped(self, inp: WrappedModelInput) -> WrappedModelOutput:
        """A model call inside I/O extensions' instructions and ``wrap_model`` (``_extmw``)."""
        call = inp.call
        agent = self._agent(call.agent)
        found = instances_for(self.app, agent, call.run_id, inp.states, inp.subagent)
        view = from_plain(inp.view, TurnView)

        async def wrap(request: ModelRequest, respond: ModelNext) -> ModelResponse:
            # The instructions first, as the built-in engine builds the request before the
            # middleware sees it.
            request = replace(
                request, instructions=fill_instructions(request.instructions, found, view)
            )
            model_call = ModelCall(
                run_id=call.run_id,
                model_call_id=call.model_call_id,
                agent=call.agent,
                subagent=inp.subagent,
                request=request,
            )
            response: ModelResponse = await wrap_model_chain(found, inp.chain, model_call, respond)
            return response

        response = await self._respond(call, wrap)
        usage = Usage()
        for ext in found.values():
            usage = usage + ext.take_usage()
        return WrappedModelOutput(
            response=to_plain(response, ModelResponse),
            states={n: to_plain(e.save_state(), Any) for n, e in found.items()},
            usage=to_plain(usage, Usage),
        )

    async def _respond(
        self,
        inp: ModelCallInput,
        wrap: Callable[[ModelRequest, ModelNext], Awaitable[ModelResponse]] | None,
    ) -> ModelResponse:
        agent = self._agent(inp.agent)
        client: ModelClient = agent.client
        if inp.purpose == "summary" and agent.context is not None:
            summary = agent.context.summary_model
            client = resolve_model(summary) if summary is not None else agent.client
        request = from_plain(inp.request, ModelRequest)

        async def respond(call: ModelCall) -> ModelResponse:
            return await client.respond(call.request)

        try:
            # A model call can take minutes: the heartbeat lets Temporal notice a lost worker
            # within heartbeat_timeout instead of model_timeout.
            async with self._beating():
                request, supply = await self.media.prepare(request, client)
                with supplying(supply):
                    if wrap is None:
                        response = await client.respond(request)
                    else:
                        response = await wrap(request, respond)
        except Exception as exc:
            if getattr(exc, "retryable", True) is False:
                raise ApplicationError(
                    f"{type(exc).__name__}: {exc}", type=type(exc).__name__, non_retryable=True
                ) from exc
            raise
        return response

    # -- tool -------------------------------------------------------------------------------

    @activity.defn(name=ACTIVITY_TOOL)
    async def tool(self, inp: ToolCallInput) -> ToolOutcome:
        """One tool body; heartbeats while it runs, so the loss of this worker is noticed."""
        agent = self._agent(inp.agent)
        tool = agent.toolset.get(inp.name)
        if tool is None:
            raise ApplicationError(
                f"agent {inp.agent!r} has no tool {inp.name!r} in this worker",
                type="UsageError",
                non_retryable=True,
            )
        try:
            args = tool.validate(inp.arguments)
        except ToolArgumentsError as exc:
            return ToolOutcome(kind="error", error_type="ToolArgumentsError", text=str(exc))
        ctx = ToolContext(
            run_id=inp.run_id,
            call_id=inp.call_id,
            tool_name=tool.name,
            provider_call_id=inp.provider_call_id,
            deps=agent.deps,
            can_suspend=inp.can_suspend,
            input_state=inp.input_state if inp.answered else None,
            input_response=inp.input_response if inp.answered else None,
            edited_arguments=inp.edited_arguments,
            texts=self.app.texts,
            extensions=instances_for(
                self.app, agent, inp.run_id, inp.extensions, subagent=inp.subagent
            ),
        )
        invoke = partial(tool.invoke, args, ctx)
        if inp.wraps and inp.record is not None:
            # I/O extensions' wrap_tool around the body, here (``_extmw``).
            call = ToolCall(
                record=from_plain(inp.record, CallRecord), tool=tool, args=args, context=ctx
            )
            invoke = partial(wrap_tool_chain, ctx.extensions, inp.wraps, call, _body)
        async with self._beating():
            outcome = await _run_tool(tool, invoke)
        outcome.extensions = {n: to_plain(e.save_state(), Any) for n, e in ctx.extensions.items()}
        if ctx.usage is not None:
            outcome.usage = to_plain(ctx.usage, Usage)
        outcome.media = [to_plain(m, MediaRef) for m in ctx.media]
        return outcome

    @contextlib.asynccontextmanager
    async def _beating(self) -> AsyncIterator[None]:
        """Heartbeat while the body runs (outside an activity, as in unit tests, nothing)."""
        # A local activity has no heartbeat of its own (its workflow task is kept alive).
        if not activity.in_activity() or activity.info().is_local:
            yield
            return
        beat = asyncio.create_task(self._heartbeat())
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat

    async def _heartbeat(self) -> None:
        interval = max(self.app.options.heartbeat_timeout.total_seconds() / 3, 0.1)
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    # -- extensions that do I/O -------------------------------------------------------------

    @activity.defn(name=ACTIVITY_EXTENSION)
    async def extension(self, inp: HookInput) -> HookOutput:
        """An observer hook of an extension that does I/O (memory recall, extraction...)."""
        self._agent(inp.agent)
        async with self._beating():
            return await run_hook(self.app, inp)

    @activity.defn(name=ACTIVITY_MIDDLEWARE)
    async def middleware(self, inp: MiddlewareInput) -> MiddlewareOutput:
        """``review_batch`` or ``recover_call`` of extensions that do I/O (``_extmw``)."""
        self._agent(inp.agent)
        try:
            async with self._beating():
                return await run_middleware(self.app, inp)
        except UsageError as exc:
            raise ApplicationError(str(exc), type="UsageError", non_retryable=True) from exc

    # -- on_handover ------------------------------------------------------------------------

    @activity.defn(name=ACTIVITY_HANDOVER)
    async def handover(self, inp: HandoverInput) -> HandoverOutcome:
        """The host's ``on_handover`` hook for a record about to be handed over."""
        hook = self.app.on_handover
        if hook is None:
            raise ApplicationError(
                "this worker's TemporalApp has no on_handover hook (TemporalApp(on_handover=...)"
                " must be the same on every worker)",
                type="UsageError",
                non_retryable=True,
            )
        async with self._beating():
            return await call_hook(hook, inp)

    # -- background tools -------------------------------------------------------------------

    @activity.defn(name=ACTIVITY_BACKGROUND)
    async def background(self, inp: BackgroundInput) -> BackgroundOutcome:
        """A ``BackgroundTool`` operation: started, resumed, or recovered from a heartbeat."""
        tool = self.app.background.get(inp.name)
        if tool is None:
            raise ApplicationError(
                f"this worker's TemporalApp has no background tool {inp.name!r}",
                type="UsageError",
                non_retryable=True,
            )
        interval = max(self.app.options.heartbeat_timeout.total_seconds() / 3, 0.1)
        records = task_records(self.app.store)
        return await run_operation(tool, inp, interval, self.task_output, records)

    @activity.defn(name=ACTIVITY_CHILD_END)
    async def child_end(self, run_id: str) -> ChildEnd:
        """Wait for a sub-agent's child workflow that an earlier run of its parent started.

        A resumed parent takes over the child a terminated run of it abandoned: Temporal
        gives a child's result only to the run that started it, so this waits for it here.
        """
        handle = activity.client().get_workflow_handle(run_id, result_type=RunOutput)
        async with self._beating():
            try:
                return ChildEnd(output=await handle.result())  # across its continue-as-new
            except WorkflowFailureError as exc:
                if isinstance(exc.cause, CancelledError):
                    return ChildEnd(cancelled=True)
                cause = exc.cause if exc.cause is not None else exc
                return ChildEnd(error=f"{type(cause).__name__}: {cause}")

    # -- records ----------------------------------------------------------------------------

    @activity.defn(name=ACTIVITY_RECORD)
    async def record(self, inp: RecordInput) -> None:
        """Apply a run's writes to the app's store, in order (each write is idempotent)."""
        store = self.app.store
        if store is None:
            return
        run_id = inp.run_id
        info = activity.info() if activity.in_activity() else None
        workflow_id = info.workflow_id if info is not None else None
        # A batch waits on the store (a lock, a slow disk): the heartbeat tells a lost worker
        # from a slow write within heartbeat_timeout instead of record_timeout.
        async with self._beating():
            # A new workflow run (a start after a delete, a continue-as-new) claims afresh.
            key = (run_id.split("/", 1)[0], info.workflow_run_id if info else None)
            fence = self._fences.get(key)
            try:
                if fence is None:
                    fence = await self._claim(store, key, run_id, workflow_id)
                with fenced(fence):  # its own writes: they wake no built-in worker
                    await self._apply(store, run_id, inp)
            except LeaseLostError:
                if self._fences.pop(key, None) is None:
                    raise
                # The fence was cached and went stale: claim again and write the batch
                # again (every write is idempotent: a retry replays them all anyway).
                fence = await self._claim(store, key, run_id, workflow_id)
                with fenced(fence):
                    await self._apply(store, run_id, inp)
        await saved(store, run_id)

    async def _claim(
        self, store: Store, key: tuple[str, str | None], run_id: str, workflow_id: str | None
    ) -> Fence:
        fence = await engine_claim(store, run_id, workflow_id or run_id)
        if len(self._fences) >= _FENCES_KEPT:
            del self._fences[next(iter(self._fences))]  # the oldest: its run likely ended
        self._fences[key] = fence
        return fence

    @activity.defn(name=ACTIVITY_LOAD)
    async def load(self, run_id: str) -> Loaded:
        """A run's last saved step and unconsumed input, read from the app's store.

        A run whose workflow ended (completed, failed, terminated) continues in a new
        workflow run from here, as the built-in engine resumes a run from its store.
        """
        store = self.app.store
        if store is None:
            raise ApplicationError(
                f"run {run_id!r} cannot be continued: its workflow ended and this worker's "
                "TemporalApp has no store to continue it from (TemporalApp(store=...))",
                type="UsageError",
                non_retryable=True,
            )
        async with self._beating():
            snap = await store.load(run_id)
            if snap is None:
                return Loaded()
            claimed = snap.checkpoint.claimed_through
            last = await store.pending(run_id, claimed)
            feed = (await store.claim(run_id, last)).messages if last else []
            # The tasks that ended in earlier workflow runs: the task tools still find them.
            tasks = task_records(store)
            ended, updates = (
                await recorded_tasks(tasks, run_id, self.app.background) if tasks else ([], {})
            )
        # Only the unconsumed input travels; the numbering of the rest stays the store's.
        offset = feed[0].seq - 1 if feed else claimed
        return Loaded(
            carried=Carried(
                snapshot=to_plain(snap, RunSnapshot),
                feed=[to_plain(m, FeedMessage) for m in feed],
                consumed=offset,
                generation=0,
                feed_offset=offset,
                tasks=ended,
                task_updates=updates,
            )
        )

    async def _apply(self, store: Store, run_id: str, inp: RecordInput) -> None:
        for op in inp.ops:
            if op.op == "save_step":
                await store.save_step(run_id, from_plain(op.data, Step))
            elif op.op == "save_call":
                await store.save_call(run_id, from_plain(op.data, CallRecord))
            elif op.op == "update_call":
                assert op.call_id is not None
                try:
                    await store.update_call(run_id, op.call_id, update_from_plain(op.data))
                except (ConflictError, NotPendingError):
                    # Host answers are final in the store: a retry replays answers whose record
                    # has moved on since (the workflow decided them; the store has them).
                    continue
            elif op.op == "append":
                await store.append(run_id, from_plain(op.data, FeedMessage))
            elif op.op == "consume":
                await store.consume(run_id, op.through)
            elif op.op == "task":
                tasks = task_records(store)
                if tasks is not None:
                    await record_task(tasks, op.data)
            else:
                raise ApplicationError(f"unknown record op {op.op!r}", non_retryable=True)


async def saved(store: Store, run_id: str) -> None:
    """Tell the run's followers (the page, ``runs tail``) on the store's live feed: reload it.

    A step was recorded: they show it now instead of at their next poll. Sent only while
    someone may follow; a note lost costs a follower one poll interval.
    """
    feed = live_feed(store)
    if feed is None or not feed.followed():
        return
    try:
        await feed.publish({"run": run_id, "t": "saved"})
    except Exception:  # a display must never fail a record
        activity.logger.debug("live note of run %r not sent", run_id, exc_info=True)


async def _body(call: ToolCall) -> Any:
    return await call.tool.invoke(call.args, call.context)


async def _run_tool(tool: Tool, invoke: Callable[[], Awaitable[Any]]) -> ToolOutcome:
    """Run the body (``invoke``: with its arguments, maybe wrapped) and say how it ended."""
    try:
        value = await invoke()
    except Complete as signal:
        try:
            plain = to_plain(signal.value, Any)
            text = tool.render(signal.value)
        except Exception as exc:
            return ToolOutcome(kind="error", error_type=type(exc).__name__, text=str(exc))
        return ToolOutcome(kind="complete", text=text, value=plain, fixed=signal.fixed)
    except AwaitExternal as signal:
        return _handover(ToolOutcome(kind="await"), signal.payload)
    except Detach as signal:
        return _handover(ToolOutcome(kind="detach", receipt=signal.receipt), signal.payload)
    except InputRequired as signal:
        out = ToolOutcome(
            kind="input",
            prompt=signal.prompt,
            response_schema=signal.response_schema,
        )
        try:
            out.state = to_plain(signal.state, Any)
        except StoreError as exc:
            return ToolOutcome(kind="error", error_type="StoreError", text=str(exc))
        return out
    except ControlSignal as signal:
        return ToolOutcome(kind="signal", error_type=type(signal).__name__)
    except HostFailure as exc:
        return ToolOutcome(kind="host_failure", text=str(exc))
    except TimeoutError as exc:
        return ToolOutcome(kind="timeout", text=str(exc))
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the activity itself is cancelled (the workflow's timeout, or cancel)
        return ToolOutcome(kind="cancelled")
    except Exception as exc:
        return ToolOutcome(kind="error", error_type=type(exc).__name__, text=str(exc))
    try:
        text = tool.render(value)
        plain = to_plain(value, Any) if tool.completion else None
    except Exception as exc:
        return ToolOutcome(kind="unrenderable", error_type=type(exc).__name__, text=str(exc))
    return ToolOutcome(kind="returned", text=text, value=plain)


def _handover(out: ToolOutcome, payload: Any) -> ToolOutcome:
    try:
        out.value = to_plain(payload, Any)
    except StoreError as exc:
        return ToolOutcome(kind="error", error_type="StoreError", text=str(exc))
    return out
