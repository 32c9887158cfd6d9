"""What a user defines: an ``Agent`` and the ``Limits`` that bound its runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from steadyrun._errors import UsageError
from steadyrun.chat import ModelSettings
from steadyrun.context import ContextPolicy, read_tool
from steadyrun.models import ModelClient, check_model_spec, resolve_model
from steadyrun.runtime._budgets import Budget, Price, check_limits_budgets, check_prices
from steadyrun.runtime._completion import CompletionFallback, CompletionValidator, Guard
from steadyrun.runtime._extension import Extension
from steadyrun.runtime._extset import check_extensions
from steadyrun.tools import Tool, ToolSet

__all__ = ["Agent", "ContextReducer", "Limits", "ReducerView"]


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


@dataclass(kw_only=True, frozen=True, slots=True)
class Limits:
    """Bounds of a run.

    Attributes:
        max_iterations: Model calls per turn; new input resets the count.
        max_turns: Turns per run (``None``: no limit). A turn answers one claim of input.
        max_concurrent_tool_calls: Calls of one batch running at once.
        corrections: Corrections the model may use per run (e.g. retrying tool calls cut off
            by the length limit).
        budget: What the whole run may use (requests, tokens, tool calls, cost); checked
            before each model call (see ``Budget``). ``None``: no bound.
        turn_budget: What each turn may use, counted from the turn's first model call.
        prices: The price of each model, by the name the agent's model has (its spec such
            as ``"openai:gpt-4.1"``, or the part after ``provider:``); a ``cost`` budget needs
            the agent's model in it.
        on_budget: What a used-up budget does: ``suspend`` the run (a person raises the budget
            with ``Runtime.raise_budget`` and resumes it) or ``fail`` it with
            ``BudgetExceeded`` (a raise and a resume continue it too). Sub-agent runs, which
            cannot suspend, fail.
    """

    max_iterations: int = 20
    max_turns: int | None = None
    max_concurrent_tool_calls: int = 4
    corrections: int = 1
    budget: Budget | None = None
    turn_budget: Budget | None = None
    prices: Mapping[str, Price] = field(default_factory=dict)
    on_budget: Literal["suspend", "fail"] = "suspend"

    def __post_init__(self) -> None:
        problems = []
        if self.max_iterations < 1:
            problems.append(f"max_iterations must be at least 1, got {self.max_iterations}")
        if self.max_turns is not None and self.max_turns < 1:
            problems.append(f"max_turns must be at least 1 or None, got {self.max_turns}")
        if self.max_concurrent_tool_calls < 1:
            problems.append(
                "max_concurrent_tool_calls must be at least 1, "
                f"got {self.max_concurrent_tool_calls}"
            )
        if self.corrections < 0:
            problems.append(f"corrections must be 0 or more, got {self.corrections}")
        problems += check_limits_budgets(self)
        if problems:
            raise UsageError("invalid Limits: " + "; ".join(problems))


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
