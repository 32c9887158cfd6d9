"""Model calls and tool bodies of ``AgentWorkflow`` as activities (and delegations as children).

``WorkflowExecution`` is steadyrun's own ``Execution`` with two pieces swapped: its model is the
``steadyrun.model`` activity, and its ``CallRunner`` runs the agent's own tools as
``steadyrun.tool`` activities. Tools of extensions and the context policy's read tool work on
the run's own state and run in the workflow (a deterministic extension's tools run in the
activity when an I/O extension's ``wrap_tool`` wraps them: ``_extmw``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun.background import BackgroundTool
    from steadyrun.background._recovery import TaskRecovery
    from steadyrun.chat import MediaRef, ModelRequest, ModelResponse, Usage
    from steadyrun.context._read_tool import READ_TOOL
    from steadyrun.control import Complete, ControlSignal, HostFailure
    from steadyrun.media import MediaPreparer, MediaSupply
    from steadyrun.records import CallRecord
    from steadyrun.runtime import Agent
    from steadyrun.runtime._calls import CallRunner
    from steadyrun.runtime._extension import ModelCall, ToolCall, TurnView
    from steadyrun.runtime._loop import Execution
    from steadyrun.temporal._extio import io_tool_owners, route_hooks
    from steadyrun.temporal._extmw import (
        ACTIVITY_MODEL_WRAPPED,
        Moved,
        Routing,
        WrappedModelInput,
        WrappedModelOutput,
        model_parts,
        route_middleware,
        tool_parts,
    )
    from steadyrun.temporal._outcomes import Returned, Unrenderable, outcome_value
    from steadyrun.temporal._payloads import (
        ACTIVITY_MODEL,
        ACTIVITY_TOOL,
        ModelCallInput,
        ToolCallInput,
        ToolOutcome,
    )
    from steadyrun.temporal._subagents import Delegation, delegations, run_delegation
    from steadyrun.temporal._wchildren import ChildTurns
    from steadyrun.temporal._wforks import Forks
    from steadyrun.temporal._wtasks import TASK_TOOLS, WorkflowTasks
    from steadyrun.tools import Tool
    from steadyrun.tools._threads import sync_bodies_on_the_loop

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = ["Engine", "NoMedia", "WorkflowExecution"]


# -- model and tool calls as activities ---------------------------------------------------


class NoMedia(MediaPreparer):
    """Media are prepared where they can be read: in the model activity, not the workflow."""

    async def prepare(self, request: ModelRequest, client: Any) -> tuple[ModelRequest, MediaSupply]:
        return request, MediaSupply()


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


@dataclass(kw_only=True, slots=True)
class Engine:
    """What the workflow-side runners need to start activities."""

    app: AppView
    agent: Agent
    agent_tool_names: frozenset[str]
    delegations: dict[str, Delegation]
    background: dict[str, BackgroundTool]
    io_tools: dict[str, str]
    ext_tools: dict[str, str]  # every extension's tools: tool name -> extension name
    moved: Moved  # which hooks of I/O extensions run in activities (the run's patches)
    forks: Forks  # forked skills, whose loads run as child workflows
    tasks: WorkflowTasks | None = None  # the workflow's background tasks (with ``background``)
    children: ChildTurns | None = None  # sub-agents that may signal their result
    shared: dict[str, Any] | None = None  # a child's parent's extension states (``_wshared``)
    shared_set: Any = None  # the child's instances of them, as its last turn left them

    @classmethod
    def of(cls, app: AppView, agent: Agent, shared: dict[str, Any] | None = None) -> Engine:
        """The engine of ``agent``: its own tools run as activities, built-in ones here.

        Delegation tools of its ``SubAgents`` extension run as child workflows, and tools of
        the app's ``background`` tools as heartbeating activities. Called in the workflow,
        once per workflow run, before its loop: it decides the run's ``Moved`` patches.
        """
        # Tools of extensions that do I/O run as activities, like the agent's own.
        io_tools = io_tool_owners(agent)
        built_in = {t.name for ext in agent.extensions for t in ext.tools()} - set(io_tools)
        if agent.context is not None:
            built_in.add(READ_TOOL)
        own = frozenset(n for n in agent.toolset.names if n not in built_in)
        background = {n: t for n, t in app.background.items() if n in own}
        return cls(
            app=app,
            agent=agent,
            agent_tool_names=own,
            delegations=delegations(agent),
            background=background,
            io_tools=io_tools,
            ext_tools={t.name: ext.name for ext in agent.extensions for t in ext.tools()},
            moved=Moved.decide(agent),
            forks=Forks.of(agent),
            shared=shared,
        )


class _ActivityModel:
    """A ``ModelClient`` whose ``respond`` is the ``steadyrun.model`` activity."""

    def __init__(self, engine: Engine, run_id: str, purpose: str) -> None:
        self.engine = engine
        self.run_id = run_id
        self.purpose = purpose
        self.calls = 0

    async def respond(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return await self.call(f"{self.purpose}{self.calls}", request)

    def input(self, model_call_id: str, request: ModelRequest) -> ModelCallInput:
        """The activity's input for one call."""
        return ModelCallInput(
            agent=self.engine.agent.name,
            run_id=self.run_id,
            model_call_id=model_call_id,
            request=to_plain(request, ModelRequest),
            purpose="summary" if self.purpose == "summary" else "turn",
        )

    async def call(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        inp = self.input(model_call_id, request)
        plain = await self.execute(ACTIVITY_MODEL, inp, dict, model_call_id)
        return from_plain(plain, ModelResponse)

    async def wrapped(self, inp: WrappedModelInput) -> WrappedModelOutput:
        """The call inside I/O extensions' instructions and ``wrap_model`` (``_extmw``)."""
        out: WrappedModelOutput = await self.execute(
            ACTIVITY_MODEL_WRAPPED, inp, WrappedModelOutput, inp.call.model_call_id
        )
        return out

    async def execute(self, name: str, inp: Any, result_type: type, model_call_id: str) -> Any:
        """The model activity ``name``, again when a lost worker cut its attempts short."""
        options = self.engine.app.options
        lost = 0
        while True:
            try:
                return await workflow.execute_activity(
                    name,
                    inp,
                    result_type=result_type,
                    start_to_close_timeout=options.model_timeout,
                    heartbeat_timeout=options.heartbeat_timeout,
                    retry_policy=RetryPolicy(
                        maximum_attempts=options.model_attempts,
                        initial_interval=options.retry_interval,
                        non_retryable_error_types=["UsageError", "NotImplementedError"],
                    ),
                    summary=f"{self.engine.agent.name} {model_call_id}",
                )
            except ActivityError as exc:
                if isinstance(exc.cause, CancelledError) and workflow.patched(PATCH_MODEL_CANCEL):
                    # Only the run's cancel cancels a model call: it is that cancel, not a
                    # failed call (the run failed, its cancel spent; histories from before).
                    raise asyncio.CancelledError() from None
                # A lost worker is not a failed model call: the built-in engine just calls
                # again, so its heartbeat timeouts do not use up model_attempts (new runs).
                if not (
                    _lost_worker(exc)
                    and lost < LOST_WORKER_ROUNDS
                    and workflow.patched(PATCH_LOST_WORKER)
                ):
                    raise
                lost += 1


@dataclass(kw_only=True, slots=True)
class _ActivityCalls(CallRunner):
    """``CallRunner`` whose tool bodies run as ``steadyrun.tool`` activities.

    Tools the agent was given run in the worker; tools of extensions and the context policy's
    read tool work on the run's own state, so they run here, deterministically; delegation
    tools of ``SubAgents`` start a child workflow and wait for it.
    """

    engine: Engine
    invoker: _ToolInvoker | None = None
    subagent: bool = False  # the run is a sub-agent's (it forks no skill)

    async def _body(self, call: ToolCall) -> Any:
        invoker = self.invoker
        assert invoker is not None
        own = self.engine.agent_tool_names
        delegated = self.engine.delegations

        background = self.engine.background

        tasks = self.engine.tasks if background else None
        wrapped = bool(tool_parts(self.extensions, self.engine.moved))

        async def invoke(c: ToolCall) -> Any:
            if tasks is not None and c.tool.name in background:
                return await tasks.call(background[c.tool.name], c)
            if tasks is not None and c.tool.name in TASK_TOOLS:
                # The agent's task tools answer from the tasks this workflow holds.
                return await tasks.task_tool(c.tool.name, c.args, c.context.run_id)
            fork = self.engine.forks.of_call(c)
            if fork is not None:
                # A forked skill's sub-agent: a child workflow, as a delegation's.
                forks = self.engine.forks
                return await forks.run(fork, c, self.save, subagent=self.subagent)
            moved = (
                wrapped and c.tool.name in self.engine.ext_tools and c.tool.name not in delegated
            )
            if c.tool.name in own or moved:
                # With I/O extensions wrapping tools, a deterministic extension's tools run
                # in the activity too, inside their wrap (its state goes along).
                return await invoker(c)
            if c.tool.name in delegated:
                heartbeat = self.engine.app.options.heartbeat_timeout
                return await run_delegation(
                    delegated[c.tool.name], c, self.save, self.engine.children, heartbeat
                )
            with sync_bodies_on_the_loop():  # the workflow's loop takes no thread's answer
                return await c.tool.invoke(c.args, c.context)

        if self.extensions is None:
            return await invoke(call)
        return await self.extensions.run_tool(call, invoke)

    def _returned(self, record: CallRecord, tool: Tool, value: Any) -> CallRecord:
        if isinstance(value, Returned):
            rendered = cast(Tool, _Rendered(tool, value.text))
            return CallRunner._returned(self, record, rendered, value.value)
        if isinstance(value, Unrenderable):
            rendered = cast(Tool, _Rendered(tool, None, value.error))
            return CallRunner._returned(self, record, rendered, None)
        return CallRunner._returned(self, record, tool, value)

    def _signalled(self, record: CallRecord, tool: Tool, signal: ControlSignal) -> CallRecord:
        if isinstance(signal, Complete) and isinstance(signal.value, Returned):
            rendered = cast(Tool, _Rendered(tool, signal.value.text))
            plain = Complete(signal.value.value, fixed=signal.fixed)
            return CallRunner._signalled(self, record, rendered, plain)
        return CallRunner._signalled(self, record, tool, signal)


class _ToolInvoker:
    """Replaces ``Tool.invoke`` for the agent's own tools inside the workflow."""

    def __init__(self, engine: Engine, wraps: list[str], *, subagent: bool = False) -> None:
        self.engine = engine
        self.wraps = wraps
        self.subagent = subagent

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
            subagent=self.subagent,
        )
        owner = self.engine.io_tools.get(tool.name)
        if self.wraps:
            # I/O extensions' wrap_tool runs around the body in the activity (``_extmw``).
            inp.wraps = self.wraps
            inp.record = to_plain(record, CallRecord)
            owner = self.engine.ext_tools.get(tool.name)
        names = {*self.wraps, *([owner] if owner is not None else [])}
        inp.extensions = {
            n: to_plain(ctx.extensions[n].save_state(), Any) for n in names if n in ctx.extensions
        }
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
            if isinstance(cause, CancelledError):
                raise asyncio.CancelledError() from None  # the run is being cancelled
            raise HostFailure(
                f"its worker was lost or failed ({type(cause).__name__}: {cause}); "
                f"{'it was not retried' if limited else 'retries ran out'}"
            ) from None
        for name, state in out.extensions.items():
            if name in ctx.extensions:
                ctx.extensions[name].restore_state(state)
        if out.usage is not None:
            ctx.report_usage(from_plain(out.usage, Usage))
        for plain in out.media:
            ctx.media.append(from_plain(plain, MediaRef))
        return outcome_value(out)


class WorkflowExecution(Execution):
    """steadyrun's ``Execution`` with model calls and tool bodies as activities."""

    def __init__(self, *, engine: Engine, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        old = self.calls
        self.calls = _ActivityCalls(
            **{f.name: getattr(old, f.name) for f in fields(CallRunner)},
            engine=engine,
            subagent=self.subagent,
        )
        self.engine = engine
        self.calls.invoker = _ToolInvoker(
            engine, tool_parts(self.ext, engine.moved), subagent=self.subagent
        )
        self.model = _ActivityModel(engine, self.state.run_id, "turn")
        self.routing = Routing(
            app=engine.app, agent=self.agent.name, run_id=self.state.run_id, subagent=self.subagent
        )
        if self.ext is not None:
            self.routing.reported = route_hooks(
                engine.app, self.agent, self.ext, self.state.run_id, self.subagent
            )
            route_middleware(engine.moved, self.ext, self.routing)
            if engine.tasks is not None:
                for inst in self.ext.instances:
                    if isinstance(inst, TaskRecovery):
                        # Recovery asks the workflow's tasks, not a task store.
                        inst.manager = engine.tasks.recovery_source()  # type: ignore[assignment]
        if self.context is not None:
            self.context.model = _ActivityModel(engine, self.state.run_id, "summary")

    async def _call_model(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        if self.ext is None:
            return await self.model.call(model_call_id, request)

        ext, cp = self.ext, self.state.cp

        async def respond(call: ModelCall) -> ModelResponse:
            chain, states = model_parts(ext, self.engine.moved)
            if not states:
                return await self.model.call(model_call_id, call.request)
            view = TurnView(
                run_id=call.run_id,
                agent=call.agent,
                subagent=call.subagent,
                turn=cp.turn,
                iteration=cp.iteration,
            )
            out = await self.model.wrapped(
                WrappedModelInput(
                    call=self.model.input(model_call_id, call.request),
                    subagent=self.subagent,
                    chain=chain,
                    states=states,
                    view=to_plain(view, TurnView),
                )
            )
            self.routing.take(out, ext.by_name)
            return from_plain(out.response, ModelResponse)

        call = ModelCall(
            run_id=self.state.run_id,
            model_call_id=model_call_id,
            agent=self.agent.name,
            subagent=self.subagent,
            request=request,
        )
        return await self.ext.call_model(call, respond)


PATCH_MODEL_CANCEL = "steadyrun.model-call-cancelled-is-the-runs-cancel"
"""The patch under which a model call cancelled with the run cancels the run."""

PATCH_LOST_WORKER = "steadyrun.model-lost-worker-again"
"""Marks runs whose model call is scheduled again when its last attempt lost its worker."""

LOST_WORKER_ROUNDS = 20
"""Rounds of ``model_attempts`` a model call may lose to lost workers before the run fails
(a model call that kills its worker each time would otherwise go on forever)."""


def _lost_worker(exc: ActivityError) -> bool:
    """Whether the activity's last attempt ended because its worker stopped heartbeating."""
    cause = exc.cause
    return isinstance(cause, ActivityTimeoutError) and cause.type == TimeoutType.HEARTBEAT
