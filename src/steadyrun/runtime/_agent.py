"""What a user defines: an ``Agent`` and the ``Limits`` that bound its runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.chat import ModelSettings
from steadyrun.context import ContextPolicy, read_tool
from steadyrun.models import ModelClient, check_model_spec, resolve_model
from steadyrun.runtime._completion import CompletionFallback, CompletionValidator, Guard
from steadyrun.runtime._extension import Extension
from steadyrun.runtime._extset import check_extensions
from steadyrun.runtime._limits import Limits, price_of, prices_cost
from steadyrun.tools import Tool, ToolSet

__all__ = ["Agent", "ContextReducer", "Limits", "ReducerView", "check_prices", "model_key"]


@dataclass(kw_only=True, frozen=True, slots=True)
class ReducerView:
    """What a context reducer knows about the model call it runs before.

    Attributes:
        run_id: The run.
        model_call_id: The model call about to be made.
        turn: The run's turn.
        iteration: The model call's number within the turn.
    """

    run_id: str
    model_call_id: str
    turn: int
    iteration: int


ContextReducer = Callable[..., Any]
"""``(view: ReducerView, request: ModelRequest) -> list[Message] | None`` (sync or async)."""


@dataclass(kw_only=True, eq=False)
class Agent:
    """An agent: instructions, a model and tools, bound by limits.

    The agent holds no run state; one agent serves any number of runs at once.

    Attributes:
        name: Identifies the agent; stored with each run so a resume finds it again.
        model: A ``ModelClient`` (a provider model, or ``ScriptedModel`` in tests).
        instructions: The system instructions, or a function of the run id giving them.
        tools: The tools (``@tool`` functions; plain functions are wrapped).
        limits: Bounds of each run.
        settings: Options for each model call.
        deps: Any object tools receive through ``ToolContext.deps``.
        guard: Reviews candidate text before it is delivered (see ``Guard``).
        completion_validator: Checks completion values; feedback goes to the model.
        completion_fallback: Gives a fixed completion when corrections or iterations run out.
        strict_settlement: When true, a call needing review holds the run (suspended) until
            the host settles it with ``Runtime.settle``.
        correct_length_cut: When true, a text answer cut by the output length limit (finish
            reason ``length``) is not delivered: the model sees it with a note and answers
            again, spending a correction (``Limits.corrections``; when none is left, the
            ``completion_fallback`` or ``CorrectionsExhausted``). When false it is delivered
            as it is, and ``RunResult.finish_reason`` is ``length``. Tool calls cut by the
            limit are always corrected.
        can_suspend: Whether tools may suspend runs of this agent (``await_external``,
            ``require_input``); when false such calls fail with a reason the model sees.
        context: Keeps every run inside the model's window (offloading large results,
            clearing old rounds, summarizing); adds the ``read_offloaded_result`` tool.
        context_reducer: Called before every model call with (``ReducerView``, request); a
            list of messages it returns replaces the run's context (and is what is saved).
        extensions: Extensions (planning, sub-agents, skills, memory, your own); each run gets
            its own instance of each, with its state saved in the run's checkpoint.
    """

    name: str
    model: ModelClient | str
    instructions: str | Callable[[str], str] = ""
    tools: Sequence[Tool | Callable[..., Any]] = field(default_factory=tuple)
    limits: Limits = field(default_factory=Limits)
    settings: ModelSettings = field(default_factory=ModelSettings)
    deps: Any = None
    guard: Guard | None = None
    completion_validator: CompletionValidator | None = None
    completion_fallback: CompletionFallback | None = None
    strict_settlement: bool = False
    correct_length_cut: bool = False
    can_suspend: bool = True
    context: ContextPolicy | None = None
    context_reducer: ContextReducer | None = None
    extensions: Sequence[Extension] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise UsageError("Agent needs a non-empty name; runs store it to find the agent again")
        if isinstance(self.model, str):
            check_model_spec(self.model)  # a bad name or a missing extra: say so now
        elif not isinstance(self.model, ModelClient):
            raise UsageError(
                f"model must be a ModelClient (an object with async respond(request)), "
                f"got {type(self.model).__name__}"
            )
        check_extensions(self.extensions)
        check_prices(self)
        _ = self.toolset  # report tool problems when the agent is defined, not mid-run

    @cached_property
    def toolset(self) -> ToolSet:
        """The agent's tools (and the built-in ones it needs), checked for duplicate names."""
        tools = list(self.tools)
        if self.context is not None:
            # A read-back chunk fits under the offload size: it is never offloaded again.
            tools.append(read_tool(max_bytes=self.context.offload_bytes()))
        for ext in self.extensions:
            tools.extend(ext.tools())
        return ToolSet(tools)

    @cached_property
    def client(self) -> ModelClient:
        """The model client; a model named by a string is created on first use."""
        return resolve_model(self.model)

    def instructions_for(self, run_id: str) -> str:
        """The instructions for one run."""
        return self.instructions(run_id) if callable(self.instructions) else self.instructions


def model_key(agent: Agent) -> str:
    """The name a price table knows the agent's model by.

    The model's spec (``"openai:gpt-4.1"``) when it is named by one; for a client object its
    ``model`` attribute, else its ``name``, else its class name.
    """
    if isinstance(agent.model, str):
        return agent.model
    for attribute in ("model", "name"):
        value = getattr(agent.model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(agent.model).__name__


def check_prices(agent: Agent) -> None:
    """Refuse an agent whose cost budget cannot be priced (when it is defined, not mid-run)."""
    limits = agent.limits
    if not prices_cost(limits.budget, limits.turn_budget):
        return
    key = model_key(agent)
    if price_of(limits.prices, key) is None:
        known = ", ".join(sorted(limits.prices)) or "none"
        raise UsageError(
            f"agent {agent.name!r} has a cost budget but Limits.prices has no price for model "
            f"{key!r} (prices for: {known})"
        )
