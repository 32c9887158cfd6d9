"""``AgentWorkflow``: one steadyrun run as a Temporal workflow.

The workflow runs steadyrun's own loop (``Execution``: turns, admission, batches scheduled by
concurrency keys, recovery, answers, completions, guards, corrections) deterministically. Its
store is a ``MemoryStore`` inside the workflow, rebuilt by replay; every write to it is also
queued for the app's store, where a ``steadyrun.record`` activity applies it. Model calls and
tool bodies are activities; people and systems reach the run through updates and a signal,
and read it through queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._errors import UsageError
    from steadyrun.chat import MediaRef, ModelRequest, ModelResponse, Usage
    from steadyrun.context._read_tool import READ_TOOL
    from steadyrun.control import (
        AwaitExternal,
        Complete,
        ControlSignal,
        Detach,
        HostFailure,
        InputRequired,
    )
    from steadyrun.media import MediaOptions, MediaPreparer, MediaSupply
    from steadyrun.records import (
        CallRecord,
        CallUpdate,
        ContextChange,
        RunSnapshot,
        Step,
        overlay_external,
    )
    from steadyrun.runtime import Agent, PendingItem, RunResult
    from steadyrun.runtime._calls import CallRunner
    from steadyrun.runtime._extension import ModelCall, ToolCall
    from steadyrun.runtime._host import HostOperations
    from steadyrun.runtime._loop import Execution
    from steadyrun.runtime._observers import ObserverSet
    from steadyrun.runtime._state import RunState
    from steadyrun.runtime._texts import Texts
    from steadyrun.stores import FeedMessage, MemoryStore, RunSummary
    from steadyrun.stream import DisplaySnapshot, display_from_run
    from steadyrun.temporal._payloads import (
        ACTIVITY_MODEL,
        ACTIVITY_RECORD,
        ACTIVITY_TOOL,
        WORKFLOW_NAME,
        AnswerArgs,
        Carried,
        DecideArgs,
        ModelCallInput,
        RecordInput,
        RecordOp,
        RunInput,
        RunOutput,
        SendArgs,
        SettleArgs,
        ToolCallInput,
        ToolOutcome,
        update_to_plain,
    )
    from steadyrun.tools import Tool

if TYPE_CHECKING:
    from steadyrun.temporal._app import TemporalApp

__all__ = ["AgentWorkflow", "app_for", "register_app"]

T = TypeVar("T")

_APPS: dict[str, TemporalApp] = {}
_DEFAULT: list[TemporalApp] = []


def register_app(task_queue: str | None, app: TemporalApp) -> None:
    """Make ``app`` the one workflows of ``task_queue`` resolve agents in.

    ``None`` registers it as the fallback (the replayer, which has no task queue of its own).
    """
    if task_queue is None:
        _DEFAULT[:] = [app]
    else:
        _APPS[task_queue] = app


def app_for(task_queue: str) -> TemporalApp:
    """The app registered for ``task_queue`` (or the fallback)."""
    app = _APPS.get(task_queue) or (_DEFAULT[0] if _DEFAULT else None)
    if app is None:
        raise ApplicationError(
            f"no TemporalApp is registered for task queue {task_queue!r} in this worker",
            non_retryable=True,
        )
    return app


def _now(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never suspends (the in-workflow store's operations).

    Queries and update validators are synchronous; the store they read is process memory.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("an in-workflow store operation suspended")


class _ContinueAsNew(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the workflow's store right after a step is saved: continue as new from it."""


# -- the workflow's store -----------------------------------------------------------------


class _Recorder:
    """Writes queued for the app's store, flushed in order by one background task."""

    def __init__(self, run_id: str, enabled: bool, timeout: timedelta) -> None:
        self.run_id = run_id
        self.enabled = enabled
        self.timeout = timeout
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
                # Idempotent writes: retried until the store takes them.
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
            )

    async def drain(self) -> None:
        """Wait until everything queued is written; the flusher stops."""
        self.closing = True
        if self.task is not None:
            await self.task
            self.task = None


class _WorkflowStore(MemoryStore):
    """The run's store inside the workflow: memory, mirrored to the app's store."""

    def __init__(self, recorder: _Recorder, continue_after: int | None) -> None:
        super().__init__()
        self.recorder = recorder
        self.continue_after = continue_after
        self.feed: list[FeedMessage] = []
        self.consumed_through = 0

    async def save_step(self, run_id: str, step: Step) -> None:
        await super().save_step(run_id, step)
        self.recorder.add(RecordOp(op="save_step", data=to_plain(step, Step)))
        if self.continue_after is not None and step.run.status not in ("completed", "failed"):
            info = workflow.info()
            length = info.get_current_history_length()
            if length >= self.continue_after or info.is_continue_as_new_suggested():
                raise _ContinueAsNew()

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
        for plain in carried.feed:
            message = from_plain(plain, FeedMessage)
            stored = await MemoryStore.append(self, run_id, message)
            self.feed.append(stored)
        await MemoryStore.consume(self, run_id, carried.consumed)
        self.consumed_through = carried.consumed


class _DryStore(_WorkflowStore):
    """A read-only view for update validators: host writes are computed, never stored."""

    def __init__(self, inner: _WorkflowStore) -> None:
        self.inner = inner

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self.inner.load(run_id)

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        return await self.inner.load_call(run_id, call_id)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        stored = await self.inner.load_call(run_id, call_id)
        if stored is None:
            raise KeyError(call_id)
        return overlay_external(stored, update)

    async def list_runs(self, **kwargs: Any) -> list[RunSummary]:
        return []


class _Host(HostOperations):
    """steadyrun's host operations on the workflow's store (updates and queries)."""

    def __init__(self, store: _WorkflowStore, agent: Agent) -> None:
        self.store = store
        self._agents = {agent.name: agent}
        self._clock = workflow.now


# -- model and tool calls as activities ---------------------------------------------------


class _NoMedia(MediaPreparer):
    """Media are prepared where they can be read: in the model activity, not the workflow."""

    async def prepare(self, request: ModelRequest, client: Any) -> tuple[ModelRequest, MediaSupply]:
        return request, MediaSupply()


@dataclass(slots=True)
class _Returned:
    """A result the worker rendered already."""

    text: str
    value: Any


class _Rendered:
    """A tool whose ``render`` gives the text the worker rendered (or its rendering error)."""

    def __init__(self, tool: Any, text: str | None, error: Exception | None = None) -> None:
        self.name = tool.name
        self.completion = tool.completion
        self._text = text
        self._error = error

    def render(self, value: Any) -> str:
        if self._error is not None:
            raise self._error
        assert self._text is not None
        return self._text


_ERROR_TYPES: dict[str, type[Exception]] = {}
_SIGNAL_TYPES: dict[str, type[ControlSignal]] = {}


def _error_type(name: str) -> type[Exception]:
    """An exception class named like the one the tool raised (the model reads the name)."""
    found = _ERROR_TYPES.get(name)
    if found is None:
        found = _ERROR_TYPES[name] = type(name, (Exception,), {})
    return found


def _signal_type(name: str) -> type[ControlSignal]:
    found = _SIGNAL_TYPES.get(name)
    if found is None:
        found = _SIGNAL_TYPES[name] = type(name, (ControlSignal,), {})
    return found


@dataclass(kw_only=True, slots=True)
class _Engine:
    """What the workflow-side runners need to start activities."""

    app: TemporalApp
    agent: Agent
    agent_tool_names: frozenset[str]

    @classmethod
    def of(cls, app: TemporalApp, agent: Agent) -> _Engine:
        """The engine of ``agent``: its own tools run as activities, built-in ones here."""
        built_in = {t.name for ext in agent.extensions for t in ext.tools()}
        if agent.context is not None:
            built_in.add(READ_TOOL)
        own = frozenset(n for n in agent.toolset.names if n not in built_in)
        return cls(app=app, agent=agent, agent_tool_names=own)


class _ActivityModel:
    """A ``ModelClient`` whose ``respond`` is the ``steadyrun.model`` activity."""

    def __init__(self, engine: _Engine, run_id: str, purpose: str) -> None:
        self.engine = engine
        self.run_id = run_id
        self.purpose = purpose
        self.calls = 0

    async def respond(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return await self.call(f"{self.purpose}{self.calls}", request)

    async def call(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        options = self.engine.app.options
        plain = await workflow.execute_activity(
            ACTIVITY_MODEL,
            ModelCallInput(
                agent=self.engine.agent.name,
                run_id=self.run_id,
                model_call_id=model_call_id,
                request=to_plain(request, ModelRequest),
                purpose="summary" if self.purpose == "summary" else "turn",
            ),
            result_type=dict,
            start_to_close_timeout=options.model_timeout,
            retry_policy=RetryPolicy(
                maximum_attempts=options.model_attempts,
                initial_interval=options.retry_interval,
                non_retryable_error_types=["UsageError", "NotImplementedError"],
            ),
            summary=f"{self.engine.agent.name} {model_call_id}",
        )
        return from_plain(plain, ModelResponse)


@dataclass(kw_only=True, slots=True)
class _ActivityCalls(CallRunner):
    """``CallRunner`` whose tool bodies run as ``steadyrun.tool`` activities.

    Tools the agent was given run in the worker; tools of extensions and the context policy's
    read tool work on the run's own state, so they run here, deterministically.
    """

    engine: _Engine
    invoker: _ToolInvoker | None = None

    async def _body(self, call: ToolCall) -> Any:
        invoker = self.invoker
        assert invoker is not None
        own = self.engine.agent_tool_names

        async def invoke(c: ToolCall) -> Any:
            if c.tool.name in own:
                return await invoker(c)
            return await c.tool.invoke(c.args, c.context)

        if self.extensions is None:
            return await invoke(call)
        return await self.extensions.run_tool(call, invoke)

    def _returned(self, record: CallRecord, tool: Tool, value: Any) -> CallRecord:
        if isinstance(value, _Returned):
            rendered = cast(Tool, _Rendered(tool, value.text))
            return CallRunner._returned(self, record, rendered, value.value)
        if isinstance(value, _Unrenderable):
            rendered = cast(Tool, _Rendered(tool, None, value.error))
            return CallRunner._returned(self, record, rendered, None)
        return CallRunner._returned(self, record, tool, value)

    def _signalled(self, record: CallRecord, tool: Tool, signal: ControlSignal) -> CallRecord:
        if isinstance(signal, Complete) and isinstance(signal.value, _Returned):
            rendered = cast(Tool, _Rendered(tool, signal.value.text))
            plain = Complete(signal.value.value, fixed=signal.fixed)
            return CallRunner._signalled(self, record, rendered, plain)
        return CallRunner._signalled(self, record, tool, signal)


@dataclass(slots=True)
class _Unrenderable:
    error: Exception


class _ToolInvoker:
    """Replaces ``Tool.invoke`` for the agent's own tools inside the workflow."""

    def __init__(self, engine: _Engine) -> None:
        self.engine = engine

    async def __call__(self, call: ToolCall) -> Any:
        record, tool, ctx = call.record, call.tool, call.context
        options = self.engine.app.options
        limited = tool.side_effects and not tool.replayable
        retry = RetryPolicy(
            maximum_attempts=1 if limited else options.tool_attempts,
            initial_interval=options.retry_interval,
        )
        timeout = options.tool_timeout
        if tool.timeout is not None:
            timeout = timedelta(seconds=tool.timeout) + options.heartbeat_timeout
        inp = ToolCallInput(
            agent=self.engine.agent.name,
            run_id=ctx.run_id,
            call_id=record.id,
            name=tool.name,
            arguments=record.arguments,
            provider_call_id=record.provider_call_id,
            can_suspend=ctx.can_suspend,
            answered=ctx.input_response is not None or ctx.input_state is not None,
            input_state=ctx.input_state,
            input_response=ctx.input_response,
            edited_arguments=ctx.edited_arguments,
        )
        try:
            out = await workflow.execute_activity(
                ACTIVITY_TOOL,
                inp,
                result_type=ToolOutcome,
                activity_id=f"tool:{record.id}:{record.rev}",
                start_to_close_timeout=timeout,
                heartbeat_timeout=options.heartbeat_timeout,
                retry_policy=retry,
                summary=f"{tool.name} {record.id}",
            )
        except ActivityError as exc:
            cause = exc.cause if exc.cause is not None else exc
            raise HostFailure(
                f"its worker was lost or failed ({type(cause).__name__}: {cause}); "
                f"{'it was not retried' if limited else 'retries ran out'}"
            ) from None
        if out.usage is not None:
            ctx.report_usage(from_plain(out.usage, Usage))
        for plain in out.media:
            ctx.media.append(from_plain(plain, MediaRef))
        return _outcome_value(out)


def _outcome_value(out: ToolOutcome) -> Any:
    """What the body returned, or raise what it raised, as the workflow's ``CallRunner`` expects."""
    kind = out.kind
    if kind == "returned":
        return _Returned(out.text or "", out.value)
    if kind == "unrenderable":
        return _Unrenderable(_error_type(out.error_type or "Exception")(out.text or ""))
    if kind == "complete":
        raise Complete(_Returned(out.text or "", out.value), fixed=out.fixed)
    if kind == "await":
        raise AwaitExternal(out.value)
    if kind == "detach":
        raise Detach(out.receipt or "", out.value)
    if kind == "input":
        raise InputRequired(out.prompt or "", out.response_schema, out.state)
    if kind == "signal":
        raise _signal_type(out.error_type or "ControlSignal")()
    if kind == "host_failure":
        raise HostFailure(out.text or "")
    if kind == "timeout":
        raise TimeoutError(out.text or "")
    if kind == "cancelled":
        raise asyncio.CancelledError()
    raise _error_type(out.error_type or "Exception")(out.text or "")


class _WorkflowExecution(Execution):
    """steadyrun's ``Execution`` with model calls and tool bodies as activities."""

    def __init__(self, *, engine: _Engine, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        old = self.calls
        self.calls = _ActivityCalls(
            **{f.name: getattr(old, f.name) for f in fields(CallRunner)}, engine=engine
        )
        self.engine = engine
        self.calls.invoker = _ToolInvoker(engine)
        self.model = _ActivityModel(engine, self.state.run_id, "turn")
        if self.context is not None:
            self.context.model = _ActivityModel(engine, self.state.run_id, "summary")

    async def _call_model(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        if self.ext is None:
            return await self.model.call(model_call_id, request)

        async def respond(call: ModelCall) -> ModelResponse:
            return await self.model.call(model_call_id, call.request)

        call = ModelCall(
            run_id=self.state.run_id,
            model_call_id=model_call_id,
            agent=self.agent.name,
            subagent=self.subagent,
            request=request,
        )
        return await self.ext.call_model(call, respond)


# -- the workflow -------------------------------------------------------------------------


def _usage_error(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """One steadyrun run: the agent's loop, with people and systems reaching it by updates.

    Updates: ``decide`` (``DecideArgs``), ``answer`` (``AnswerArgs``), ``settle``
    (``SettleArgs``), ``send`` (``SendArgs``); each is validated first and a refusal (the same
    typed errors as ``Runtime``: ``NotPendingError``, ``ConflictError``, ...) is returned to the
    caller without entering the history. Signal: ``input`` (``SendArgs``, steering input).
    Queries: ``pending`` (``PendingItem`` plain data), ``snapshot`` (``DisplaySnapshot`` plain
    data), ``status``.
    """

    def __init__(self) -> None:
        self._store: _WorkflowStore | None = None
        self._host: _Host | None = None
        self._dry: _Host | None = None
        self._run_id = ""
        self._agent: Agent | None = None
        self._changed = False

    # -- run --------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: RunInput) -> RunOutput:
        """Drive the run until it completes or fails, waiting inside for whatever it awaits."""
        app = app_for(workflow.info().task_queue)
        agent = app.agent(inp.agent)
        options = app.options
        self._run_id = inp.run_id
        self._agent = agent
        recorder = _Recorder(inp.run_id, app.store is not None, options.record_timeout)
        store = _WorkflowStore(recorder, options.continue_as_new_after)
        self._store = store
        self._host = _Host(store, agent)
        self._dry = _Host(_DryStore(store), agent)
        generation = 0
        if inp.carried is not None:
            await store.restore(inp.run_id, inp.carried)
            generation = inp.carried.generation
        elif inp.input is not None:
            await store.append(
                inp.run_id,
                FeedMessage(id=inp.input_id or f"{inp.run_id}:input", content=inp.input),
            )
        else:
            raise ApplicationError("a new run needs input", type="UsageError", non_retryable=True)
        recorder.start()
        engine = _Engine.of(app, agent)
        texts = app.texts or Texts()
        try:
            result = await self._drive(engine, texts, new=inp.carried is None)
        except _ContinueAsNew:
            await workflow.wait_condition(workflow.all_handlers_finished)
            await recorder.drain()
            carried = await self._carry(generation + 1)
            workflow.continue_as_new(RunInput(agent=inp.agent, run_id=inp.run_id, carried=carried))
        await workflow.wait_condition(workflow.all_handlers_finished)
        await recorder.drain()
        return RunOutput(
            run_id=result.run_id,
            status=result.status,
            text=result.text,
            completion=to_plain(result.completion, Any),
            completion_reason=result.completion_reason,
            error_kind=type(result.error).__name__ if result.error is not None else None,
            error=str(result.error) if result.error is not None else None,
            usage=to_plain(result.usage, Usage),
            generations=generation,
        )

    async def _drive(self, engine: _Engine, texts: Texts, *, new: bool) -> RunResult:
        store, agent = self._store, self._agent
        assert store is not None and agent is not None
        while True:
            self._changed = False
            if new:
                state = RunState.new(self._run_id, agent.name, workflow.now())
            else:
                snap = await store.load(self._run_id)
                assert snap is not None
                state = RunState.restore(snap)
            execution = _WorkflowExecution(
                engine=engine,
                state=state,
                agent=agent,
                store=store,
                observers=ObserverSet([]),
                texts=texts,
                clock=workflow.now,
                media=MediaOptions(),
                media_preparer=_NoMedia(MediaOptions(), texts),
            )
            result = await (execution.start() if new else execution.resume())
            new = False
            if result.status != "suspended":
                return result
            # Suspended: wait here, holding no worker, until a person or system answers.
            await workflow.wait_condition(lambda: self._changed)

    async def _carry(self, generation: int) -> Carried:
        store = self._store
        assert store is not None
        snap = await store.load(self._run_id)
        assert snap is not None
        return Carried(
            snapshot=to_plain(snap, RunSnapshot),
            feed=[to_plain(m, FeedMessage) for m in store.feed],
            consumed=store.consumed_through,
            generation=generation,
        )

    # -- updates ----------------------------------------------------------------------------

    def _check(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            _now(coro)
        except UsageError as exc:
            raise _usage_error(exc) from None

    async def _apply(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            value = await coro
        except UsageError as exc:
            raise _usage_error(exc) from None
        self._changed = True
        return value

    @workflow.update
    async def decide(self, args: DecideArgs) -> dict[str, Any]:
        """Approve or reject a call waiting for a decision; returns the record."""
        assert self._host is not None
        record = await self._apply(self._host.decide(self._run_id, args.call_id, **_decision(args)))
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @decide.validator
    def _validate_decide(self, args: DecideArgs) -> None:
        assert self._dry is not None
        self._check(self._dry.decide(self._run_id, args.call_id, **_decision(args)))

    @workflow.update
    async def answer(self, args: AnswerArgs) -> dict[str, Any]:
        """Answer an input request by its wait id; returns the record."""
        assert self._host is not None
        record = await self._apply(self._host.answer(self._run_id, args.wait_id, args.response))
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @answer.validator
    def _validate_answer(self, args: AnswerArgs) -> None:
        assert self._dry is not None
        self._check(self._dry.answer(self._run_id, args.wait_id, args.response))

    @workflow.update
    async def settle(self, args: SettleArgs) -> dict[str, Any]:
        """Record the outcome of a call the host owns (an awaited result); returns the record."""
        assert self._host is not None
        record = await self._apply(
            self._host.settle(self._run_id, args.call_id, result=args.result, error=args.error)
        )
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @settle.validator
    def _validate_settle(self, args: SettleArgs) -> None:
        assert self._dry is not None
        self._check(
            self._dry.settle(self._run_id, args.call_id, result=args.result, error=args.error)
        )

    @workflow.update
    async def send(self, args: SendArgs) -> dict[str, Any]:
        """Input for the run, taken at its next safe point; returns the feed message."""
        assert self._store is not None
        message = await self._apply(self._store.append(self._run_id, _feed_message(args)))
        return to_plain(message, FeedMessage)  # type: ignore[no-any-return]

    @send.validator
    def _validate_send(self, args: SendArgs) -> None:
        if not args.id or args.role not in ("user", "system"):
            raise ApplicationError(
                "input needs an id and the role user or system", type="UsageError"
            )

    @workflow.signal(name="input")
    async def input(self, args: SendArgs) -> None:
        """Steering input as a signal (fire and forget; a message without an id is dropped)."""
        if not args.id or args.role not in ("user", "system") or self._store is None:
            workflow.logger.warning("input signal without an id or with a bad role dropped")
            return
        await self._apply(self._store.append(self._run_id, _feed_message(args)))

    # -- queries ----------------------------------------------------------------------------

    @workflow.query
    def pending(self) -> list[dict[str, Any]]:
        """What the run waits for (decisions, inputs, awaited results), in call order."""
        if self._host is None:
            return []
        items = _now(self._host.pending(self._run_id))
        return to_plain(items, list[PendingItem])  # type: ignore[no-any-return]

    @workflow.query
    def snapshot(self) -> dict[str, Any]:
        """The display snapshot (what the web page shows), as plain data."""
        if self._store is None or self._agent is None:
            return {}
        snap = _now(self._store.load(self._run_id))
        if snap is None:
            return {}
        display = display_from_run(snap, strict_settlement=self._agent.strict_settlement)
        return to_plain(display, DisplaySnapshot)  # type: ignore[no-any-return]

    @workflow.query
    def status(self) -> str:
        """The run's status (``running``, ``suspended``, ``completed``, ``failed``)."""
        if self._store is None:
            return "running"
        snap = _now(self._store.load(self._run_id))
        return snap.run.status if snap is not None else "running"


def _decision(args: DecideArgs) -> dict[str, Any]:
    return {
        "approve": args.approve,
        "reason": args.reason,
        "arguments": args.arguments,
        "decided_by": args.decided_by,
    }


def _feed_message(args: SendArgs) -> FeedMessage:
    return FeedMessage(id=args.id, revision=args.revision, role=args.role, content=args.content)
