"""The extension interface: what an extension may add to a run, and the inputs of its hooks.

An extension is given to an ``Agent`` as a template. Each run gets its own instance
(``for_run``), shared by the run's main agent and its sub-agents; its state is saved with the
run's checkpoint and restored on resume. Every hook has a no-op default, so an extension
overrides only what it needs.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from steadyrun._errors import UsageError
from steadyrun._texts import Texts
from steadyrun.chat import Message, ModelRequest, ModelResponse, ModelSettings, ToolCallPart, Usage
from steadyrun.models import ModelClient
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.runtime._limits import Limits
from steadyrun.runtime._result import RunResult
from steadyrun.stores import Store
from steadyrun.tools import Tool, ToolContext, ToolSet

__all__ = [
    "AgentView",
    "BatchNext",
    "Extension",
    "ModelCall",
    "ModelNext",
    "RunHandle",
    "ToolBatch",
    "ToolCall",
    "ToolNext",
    "TurnView",
]


@dataclass(kw_only=True, frozen=True, slots=True)
class TurnView:
    """What an extension knows when it writes instruction text for a model call.

    Attributes:
        run_id: The run (for a sub-agent: the sub-agent's own run).
        agent: The name of the agent about to be called.
        subagent: Whether that agent is a sub-agent of the run.
        turn: The run's turn.
        iteration: The model call's number within the turn.
    """

    run_id: str
    agent: str
    subagent: bool
    turn: int
    iteration: int


@dataclass(kw_only=True, frozen=True, slots=True)
class ModelCall:
    """One model call passing through model middleware.

    Attributes:
        run_id: The run.
        model_call_id: The call's id within the run (``m1``, ``m2``...).
        agent: The name of the agent making the call.
        subagent: Whether it is a sub-agent.
        request: What will be sent; middleware may pass on a changed copy.
    """

    run_id: str
    model_call_id: str
    agent: str
    subagent: bool
    request: ModelRequest


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolBatch:
    """The tool calls of one model response, before any of them is recorded.

    Attributes:
        run_id: The run.
        model_call_id: The model call that asked for the calls.
        calls: The calls, in the model's order (not to be reordered or removed: every call the
            model made gets a record and a result).
        denied: Calls that must not run, by index, with the reason the model will see.
    """

    run_id: str
    model_call_id: str
    calls: tuple[ToolCallPart, ...]
    denied: Mapping[int, str] = field(default_factory=dict)

    def deny(self, index: int, reason: str) -> ToolBatch:
        """A copy of the batch in which call ``index`` is refused with ``reason``."""
        if not 0 <= index < len(self.calls):
            raise UsageError(f"no call {index} in a batch of {len(self.calls)}")
        return ToolBatch(
            run_id=self.run_id,
            model_call_id=self.model_call_id,
            calls=self.calls,
            denied={**self.denied, index: reason},
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolCall:
    """One tool call passing through tool middleware, around its body.

    Attributes:
        record: The call's record as it starts (status ``running``).
        tool: The tool.
        args: The validated arguments; middleware may pass on changed ones.
        context: The ``ToolContext`` the body receives.
    """

    record: CallRecord
    tool: Tool
    args: dict[str, Any]
    context: ToolContext


class AgentView(Protocol):
    """What an extension reads of the run's agent (an ``Agent``), through ``RunHandle.agent``."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def client(self) -> ModelClient:
        """The agent's model client."""
        ...

    @property
    def limits(self) -> Limits:
        """The bounds of the agent's runs."""
        ...

    @property
    def settings(self) -> ModelSettings:
        """The options of the agent's model calls."""
        ...

    @property
    def deps(self) -> Any:
        """What the agent's tools receive through ``ToolContext.deps``."""
        ...

    @property
    def toolset(self) -> ToolSet:
        """The agent's tools."""
        ...


class RunHandle(Protocol):
    """A run, as its extensions see it (given to ``Extension.attach``).

    Chiefly: drive a sub-agent as a durable child run. The child's id is derived from the
    delegation call, so running the same delegation again resumes the child from its own
    checkpoint instead of starting it over; its calls are copied under the delegation call.
    The runtime's implementation is ``ExecutionHandle`` (``_handle.py``).
    """

    @property
    def run_id(self) -> str:
        """The run."""
        ...

    @property
    def agent(self) -> AgentView:
        """The run's agent (for a sub-agent run: the sub-agent)."""
        ...

    @property
    def subagent(self) -> bool:
        """Whether this execution is a sub-agent's."""
        ...

    @property
    def store(self) -> Store:
        """The run's store."""
        ...

    @property
    def texts(self) -> Texts:
        """The sentences the runtime writes to the model (extensions write theirs from it)."""
        ...

    def subagent_tools(self) -> list[Tool]:
        """The main agent's tools a sub-agent may use: all but ``main_only`` ones."""
        ...

    async def child_snapshot_calls(self, call_id: str) -> list[CallRecord] | None:
        """The call records of the sub-agent run a delegation call drives (``None``: none yet)."""
        ...

    async def child_snapshot(self, call_id: str) -> RunSnapshot | None:
        """The sub-agent run a delegation call drives, as stored (``None``: none yet)."""
        ...

    async def end_child(self, call_id: str, child: RunSnapshot, reason: str) -> list[CallRecord]:
        """End the sub-agent run of a delegation that will not resume, and copy its records."""
        ...

    async def run_subagent(self, agent: AgentView, *, call_id: str, task: str) -> RunResult:
        """Drive the sub-agent run (``agent``: an ``Agent``) of delegation ``call_id``."""
        ...

    async def record_subcalls(self, parent_id: str, calls: list[CallRecord]) -> list[CallRecord]:
        """Copy a sub-agent's call records into this run, under the delegation call."""
        ...


ModelNext = Callable[[ModelCall], Awaitable[ModelResponse]]
"""The rest of the model middleware chain (finally: the model)."""
BatchNext = Callable[[ToolBatch], Awaitable[ToolBatch]]
"""The rest of the batch review chain (finally: the batch as it is)."""
ToolNext = Callable[[ToolCall], Awaitable[Any]]
"""The rest of the tool middleware chain (finally: the tool's body)."""


class Extension:
    """Base class of extensions; override the hooks you need.

    Class attributes:
        name: Unique among a run's extensions; keys the extension's saved state.
        reserved_tokens: Tokens the extension adds to every model request (its instruction
            text, say); context management keeps that much of the window free.

    The runtime calls, per run: ``for_run`` (a fresh instance), then ``restore_state`` (with
    the saved state, or ``None`` for a new run), then ``attach`` (the run's handle). Hooks of
    one instance may run concurrently (parallel tool calls, sub-agents): guard shared state
    with an ``asyncio.Lock`` where two hooks could interleave across an ``await``.
    """

    name: str = ""
    reserved_tokens: int = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def for_run(self) -> Extension:
        """A new instance for one run; by default a shallow copy of the template."""
        return copy.copy(self)

    def attach(self, handle: RunHandle) -> None:
        """Called once per execution with the run's handle (sub-agents, usage, the store)."""

    def save_state(self) -> Any:
        """The extension's state for the checkpoint: plain data (JSON types), or ``None``."""
        return None

    def restore_state(self, state: Any) -> None:
        """Load state saved by ``save_state``; ``None`` for a new run (set defaults here)."""

    def publish(self) -> Any:
        """What the run shows of this extension (a plan, say) in results; ``None``: nothing."""
        return None

    def take_usage(self) -> Usage:
        """Usage of the extension's own model calls since the last time it was taken."""
        return Usage()

    def of(self, ctx: ToolContext) -> Any:
        """This extension's instance for the run a tool call belongs to.

        Tools are built once from the template; inside a tool body, ``self.of(ctx)`` finds the
        run's own instance (with the run's state).
        """
        instance = ctx.extensions.get(self.name)
        if instance is None:
            raise UsageError(f"extension {self.name!r} is not part of run {ctx.run_id!r}")
        return instance

    # -- what it adds ------------------------------------------------------------------------

    def instructions(self, view: TurnView) -> str | None:
        """Text appended to the agent's instructions for one model call."""
        return None

    def tools(self) -> Sequence[Tool]:
        """Tools the extension gives the agent (built once, from the template)."""
        return ()

    # -- middleware --------------------------------------------------------------------------

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        """Around each model call: change the request, the response, or answer it yourself."""
        return await next(call)

    async def review_batch(self, batch: ToolBatch, next: BatchNext) -> ToolBatch:
        """The outer stage: sees a response's whole batch before anything is recorded."""
        return await next(batch)

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        """The inner stage, around a tool's body: return a value, raise, or call ``next``."""
        return await next(call)

    async def recover_call(self, record: CallRecord) -> CallRecord | None:
        """On resume, settle or re-queue a started call of this extension's tools.

        Return ``None`` to leave the call to the runtime's rule (by its traits), or the record
        the call becomes (a higher ``rev``): settled, or ``queued`` to run its body again when
        the extension knows that is safe (a sub-agent that resumes from its own checkpoint).
        """
        return None

    # -- observers ---------------------------------------------------------------------------

    async def on_claim(self, run_id: str, messages: Sequence[Message]) -> None:
        """New input entered the run's context (the start of a turn, or steering)."""

    async def on_model_output(
        self, run_id: str, model_call_id: str, response: ModelResponse
    ) -> None:
        """A model call of the run returned."""

    async def on_tool_outcome(self, run_id: str, record: CallRecord) -> None:
        """A tool call settled (or was handed over)."""

    async def on_restore(self, run_id: str) -> None:
        """The run was loaded from its store to be resumed."""

    async def on_complete(self, run_id: str, messages: Sequence[Message]) -> None:
        """The run completed with this context."""


def overrides(ext: Extension, method: str) -> bool:
    """Whether ``ext`` implements ``method`` itself (unset hooks are skipped entirely)."""
    return getattr(type(ext), method) is not getattr(Extension, method)
