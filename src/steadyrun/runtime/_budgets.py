"""Usage budgets: bounds on what a run spends, checked before each model call.

A ``Budget`` bounds model requests, input, output and total tokens, tool calls and (with a
price table) cost, for the whole run (``Limits.budget``) or for each turn
(``Limits.turn_budget``). The counts are the run's stored usage: ``RunRecord.usage`` is saved
in the step that stores the response it comes from, so a crash neither loses nor repeats a
count, and a resumed run decides exactly as an uninterrupted one would have.

What the checks need besides the usage lives in the checkpoint (``BUDGET_STATE``), and only
when a budget or a price table is configured: the counts when the current turn began, the
usage priced per model, the budgets a person raised for this run, and why it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from steadyrun._codec import from_plain, to_plain
from steadyrun._errors import BudgetExceeded, UsageError
from steadyrun.chat import Usage
from steadyrun.records import CallRecord, Checkpoint
from steadyrun.runtime._agent import Agent, model_key
from steadyrun.runtime._limits import MEASURES, Budget, Limits, Price, price_of, prices_cost

if TYPE_CHECKING:
    from steadyrun.runtime._state import RunState

__all__ = [
    "BUDGET_STATE",
    "Budget",
    "BudgetStatus",
    "Price",
    "Spent",
    "account_usage",
    "budget_status",
    "check_budget",
    "held_budget",
    "raise_in",
]

BUDGET_STATE = "steadyrun.budget"
"""Checkpoint ``extra`` key of the budget state (see the module docstring)."""

Scope = Literal["run", "turn"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Spent:
    """What a run (or a turn) has used, in the measures of a ``Budget``.

    Attributes:
        requests: Model calls.
        input_tokens: Prompt tokens.
        output_tokens: Generated tokens.
        total_tokens: Input plus output tokens.
        tool_calls: Tool calls that started.
        cost: Cost by ``Limits.prices`` (0 without a price table).
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    tool_calls: int = 0
    cost: float = 0.0

    def since(self, start: Spent) -> Spent:
        """What was used after ``start`` (taken from this run earlier)."""
        values = {m: getattr(self, m) - getattr(start, m) for m in MEASURES}
        return Spent(**values)


@dataclass(kw_only=True, frozen=True, slots=True)
class BudgetStatus:
    """A run's budgets and what it used against them (``Runtime.budget``).

    Attributes:
        budget: The run's budget in force (the agent's, with what was raised for the run).
        turn_budget: Its budget per turn in force.
        spent: What the run used.
        turn_spent: What its current (or last) turn used, counted from the first budget
            check of the turn (zero without a turn budget).
        exceeded: Why the run stopped, while it is stopped by a budget.
    """

    budget: Budget | None
    turn_budget: Budget | None
    spent: Spent
    turn_spent: Spent
    exceeded: BudgetExceeded | None


# -- the state in the checkpoint -----------------------------------------------------------


def _state(cp: Checkpoint) -> dict[str, Any]:
    value = cp.extra.get(BUDGET_STATE)
    return value if isinstance(value, dict) else {}


def _in_force(limits: Limits, state: dict[str, Any]) -> tuple[Budget | None, Budget | None]:
    raised = state.get("raised") or {}
    out = []
    for scope, base in (("run", limits.budget), ("turn", limits.turn_budget)):
        given = raised.get(scope)
        if given is not None:
            base = (base or Budget()).updated(from_plain(given, Budget))
        out.append(base)
    return out[0], out[1]


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(**{f.name: getattr(a, f.name) - getattr(b, f.name) for f in fields(Usage)})


def account_usage(state: RunState, agent: Agent) -> None:
    """Attribute the usage added since the last save to the agent's model (before a save).

    Only with a price table: the cost is priced per model, so a run resumed under an agent
    version with another model prices each part of its usage at its own model's price.
    """
    current = _state(state.cp)
    if not agent.limits.prices and "priced" not in current:
        return
    priced: dict[str, Any] = dict(current.get("priced") or {})
    attributed = Usage()
    for plain in priced.values():
        attributed = attributed + from_plain(plain, Usage)
    delta = _minus(state.run.usage, attributed)
    if all(getattr(delta, f.name) == 0 for f in fields(Usage)):
        return
    if any(getattr(delta, f.name) < 0 for f in fields(Usage)):
        # Usage only grows; a stored total below what was priced means the run's usage was
        # replaced (an edited record): price it again from scratch, at the current model.
        priced, delta = {}, state.run.usage
    key = model_key(agent)
    before = from_plain(priced[key], Usage) if key in priced else Usage()
    priced[key] = to_plain(before + delta, Usage)
    state.cp.extra[BUDGET_STATE] = {**current, "priced": priced}


def _tool_calls(calls: Mapping[str, CallRecord] | list[CallRecord]) -> int:
    records = calls.values() if isinstance(calls, Mapping) else calls
    return sum(1 for c in records if c.parent_id is None and c.started_at is not None)


def _spent(
    usage: Usage, tool_calls: int, state: dict[str, Any], limits: Limits, model: str
) -> Spent:
    cost = 0.0
    if limits.prices:
        fallback = price_of(limits.prices, model)
        rest = usage
        for key, plain in (state.get("priced") or {}).items():
            part = from_plain(plain, Usage)
            rest = _minus(rest, part)
            price = price_of(limits.prices, key) or fallback
            cost += price.cost(part) if price is not None else 0.0
        if fallback is not None and rest.input_tokens + rest.output_tokens > 0:
            cost += fallback.cost(rest)  # not attributed yet: the current model's
    return Spent(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        tool_calls=tool_calls,
        cost=cost,
    )


def _fits(measure: str, used: float, limit: float) -> bool:
    # The next model call adds one request, at least one token and some cost, but no tool
    # call of its own: the calls it may ask for run as a batch the budget never cuts.
    if measure == "tool_calls":
        return used <= limit
    return used < limit


def check_budget(state: RunState, agent: Agent) -> BudgetExceeded | None:
    """Whether the run may make its next model call; why not, when a budget is used up.

    Records the counts when a turn begins (for the turn budget) and the reason it stops (for
    ``RunResult.budget_exceeded`` and ``Runtime.budget``), in the checkpoint: saved with the
    run's next step.
    """
    limits = agent.limits
    current = _state(state.cp)
    budget, turn_budget = _in_force(limits, current)
    if budget is None and turn_budget is None:
        if "exceeded" in current:  # an agent version without budgets: nothing holds it now
            state.cp.extra[BUDGET_STATE] = {k: v for k, v in current.items() if k != "exceeded"}
        return None
    new = dict(current)
    spent = _spent(state.run.usage, _tool_calls(state.calls), current, limits, model_key(agent))
    turn_spent = Spent()
    if turn_budget is not None:
        if new.get("turn") != state.cp.turn or "turn_start" not in new:
            new["turn"], new["turn_start"] = state.cp.turn, to_plain(spent, Spent)
        turn_spent = spent.since(from_plain(new["turn_start"], Spent))
    exceeded = None
    scopes: list[tuple[Scope, Budget | None, Spent]] = [
        ("run", budget, spent),
        ("turn", turn_budget, turn_spent),
    ]
    for scope, bound, used in scopes:
        if bound is None or exceeded is not None:
            continue
        for measure in MEASURES:
            limit = getattr(bound, measure)
            if limit is not None and not _fits(measure, getattr(used, measure), limit):
                exceeded = _exceeded(scope, measure, limit, getattr(used, measure))
                break
    new.pop("exceeded", None)
    if exceeded is not None:
        new["exceeded"] = {
            "scope": exceeded.scope,
            "measure": exceeded.measure,
            "limit": exceeded.limit,
            "used": exceeded.used,
        }
    if new != current:
        state.cp.extra[BUDGET_STATE] = new
    return exceeded


def _exceeded(scope: Scope, measure: str, limit: float, used: float) -> BudgetExceeded:
    whose = "the run's budget" if scope == "run" else "the budget of this turn"
    shown = f"{used:.6g}" if isinstance(used, float) else str(used)
    return BudgetExceeded(
        f"{whose} of {measure} is used up ({shown} used, limit {limit}); no further model call "
        "is made: raise it (Runtime.raise_budget or the agent's Limits) and resume the run",
        scope=scope,
        measure=measure,
        limit=limit,
        used=used,
    )


def held_budget(cp: Checkpoint) -> BudgetExceeded | None:
    """Why the run stopped at its last budget check, if a budget stopped it."""
    found = _state(cp).get("exceeded")
    if not isinstance(found, dict):
        return None
    return _exceeded(found["scope"], found["measure"], found["limit"], found["used"])


def raise_in(
    cp: Checkpoint, limits: Limits | None, budget: Budget | None, turn_budget: Budget | None
) -> None:
    """Record budgets raised for one run in its checkpoint (``Runtime.raise_budget``).

    The limits each sets replace the agent's (and those raised before); the others stay.
    """
    if budget is None and turn_budget is None:
        raise UsageError("raise_budget needs budget=Budget(...) or turn_budget=Budget(...)")
    for given in (budget, turn_budget):
        if given is not None and not isinstance(given, Budget):
            raise UsageError(f"a budget must be a Budget, got {type(given).__name__}")
    if prices_cost(budget, turn_budget) and (limits is None or not limits.prices):
        raise UsageError(
            "a cost budget needs prices: give the agent Limits(prices={model: Price(...)}) "
            "(and this runtime the agent)"
        )
    current = _state(cp)
    raised = dict(current.get("raised") or {})
    for scope, given in (("run", budget), ("turn", turn_budget)):
        if given is not None:
            before = from_plain(raised[scope], Budget) if scope in raised else Budget()
            raised[scope] = to_plain(before.updated(given), Budget)
    cp.extra[BUDGET_STATE] = {**current, "raised": raised}


def budget_status(
    usage: Usage, cp: Checkpoint, calls: list[CallRecord], agent: Agent | None
) -> BudgetStatus:
    """A stored run's budgets and what it used (``agent``: its agent, when known)."""
    limits = agent.limits if agent is not None else Limits()
    model = model_key(agent) if agent is not None else ""
    current = _state(cp)
    budget, turn_budget = _in_force(limits, current)
    spent = _spent(usage, _tool_calls(calls), current, limits, model)
    turn_spent = Spent()
    if turn_budget is not None and current.get("turn") == cp.turn and "turn_start" in current:
        turn_spent = spent.since(from_plain(current["turn_start"], Spent))
    return BudgetStatus(
        budget=budget,
        turn_budget=turn_budget,
        spent=spent,
        turn_spent=turn_spent,
        exceeded=held_budget(cp),
    )
