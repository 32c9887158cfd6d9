"""What bounds a run: ``Limits``, with the usage ``Budget``s and model ``Price``s it holds.

These are the settings, checked when they are built; what a run spent against them, and the
checks before each model call, are in ``_budgets.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Literal

from steadyrun._errors import UsageError
from steadyrun.chat import Usage

__all__ = ["MEASURES", "Budget", "Limits", "Price", "price_of", "prices_cost"]

MEASURES = ("requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls", "cost")


@dataclass(kw_only=True, frozen=True, slots=True)
class Budget:
    """Limits on what a run (or one of its turns) may use; ``None`` leaves a measure unbounded.

    Before each model call the runtime compares what was used so far with each limit. The
    call is made only if it fits: a request is left (``requests``), a token is left (the
    token limits), the cost has not reached ``cost``, and the tool calls made are not more
    than ``tool_calls``. A call that is made is never cut, so the last one may take the
    tokens or cost past the limit, and a batch the model asked for runs whole.

    Attributes:
        requests: Model calls.
        input_tokens: Prompt tokens (cached ones included).
        output_tokens: Generated tokens (reasoning included).
        total_tokens: Input plus output tokens.
        tool_calls: Tool calls that started (calls refused before they ran are not counted;
            sub-agents' own calls neither).
        cost: Cost in the currency of ``Limits.prices``, which it needs.
    """

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        problems = []
        for name in MEASURES:
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if name != "cost" and not isinstance(value, int):
                number = False
            if not number or not math.isfinite(value) or value < 0:
                kind = "a number" if name == "cost" else "an int"
                problems.append(f"{name} must be {kind} of 0 or more, or None; got {value!r}")
        if problems:
            raise UsageError("invalid Budget: " + "; ".join(problems))

    def updated(self, other: Budget) -> Budget:
        """This budget with the limits ``other`` sets (those it leaves ``None`` are kept)."""
        given = {f.name: getattr(other, f.name) for f in fields(other)}
        return replace(self, **{k: v for k, v in given.items() if v is not None})


@dataclass(kw_only=True, frozen=True, slots=True)
class Price:
    """What one model costs, per million tokens, in a currency of your choice.

    Attributes:
        input: Per million prompt tokens that were not served from or written to a cache.
        output: Per million generated tokens (reasoning included).
        cache_read: Per million prompt tokens read from a provider cache (default: ``input``).
        cache_write: Per million prompt tokens written to a provider cache (default:
            ``input``).
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        problems = []
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0:
                problems.append(f"{name} must be a number of 0 or more, got {value!r}")
        if problems:
            raise UsageError("invalid Price: " + "; ".join(problems))

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at this price."""
        read = self.cache_read if self.cache_read is not None else self.input
        write = self.cache_write if self.cache_write is not None else self.input
        # Usage counts cached prompt tokens, read and written, inside input_tokens.
        plain = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        total = (
            plain * self.input
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
        )
        return total / 1_000_000


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
        problems += _budget_problems(self)
        if problems:
            raise UsageError("invalid Limits: " + "; ".join(problems))


def price_of(prices: Mapping[str, Price], model: str) -> Price | None:
    """The price of ``model``: by its full name, else by the part after ``provider:``."""
    found = prices.get(model)
    if found is None and ":" in model:
        found = prices.get(model.split(":", 1)[1])
    return found


def _budget_problems(limits: Limits) -> list[str]:
    """Problems of the budget settings of ``Limits`` (for its own check)."""
    problems = []
    for name in ("budget", "turn_budget"):
        value = getattr(limits, name)
        if value is not None and not isinstance(value, Budget):
            problems.append(f"{name} must be a Budget or None, got {type(value).__name__}")
    if limits.on_budget not in ("suspend", "fail"):
        problems.append(f"on_budget must be 'suspend' or 'fail', got {limits.on_budget!r}")
    bad = [k for k, v in limits.prices.items() if not isinstance(v, Price)]
    if bad:
        problems.append(f"prices must map model names to Price, not for {sorted(bad)}")
    if prices_cost(limits.budget, limits.turn_budget) and not limits.prices:
        problems.append("a cost budget needs prices (Limits.prices: model name -> Price)")
    return problems


def prices_cost(*budgets: Budget | None) -> bool:
    return any(b is not None and b.cost is not None for b in budgets)
