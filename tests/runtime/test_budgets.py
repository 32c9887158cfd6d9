"""Usage budgets: per run and per turn, checked before each model call, suspend or fail."""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun.chat import ToolResultPart, Usage
from steadyrun.testing import FunctionModel, text, tool_calls


@sr.tool(side_effects=False, concurrency_key="")
def step(n: int) -> str:
    """Do one step.

    Args:
        n: Its number.
    """
    return f"step {n} done"


def _done(request: sr.ModelRequest) -> int:
    return sum(1 for m in request.messages for p in m.parts if isinstance(p, ToolResultPart))


def stepper(steps: int, *, per_call: Usage | None = None) -> FunctionModel:
    """A model that asks for ``steps`` steps one by one, then answers; fixed usage per call."""
    usage = per_call or Usage(requests=1, input_tokens=100, output_tokens=10)

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        done = _done(request)
        response = tool_calls(("step", {"n": done + 1})) if done < steps else text("All done.")
        response.usage = usage
        return response

    return FunctionModel(respond, name="stepper")


def agent(model: FunctionModel, **limits: object) -> sr.Agent:
    return sr.Agent(name="worker", model=model, tools=[step], limits=sr.Limits(**limits))  # type: ignore[arg-type]


async def test_a_token_budget_exceeded_mid_run_suspends_it_with_the_reason() -> None:
    store = sr.MemoryStore()
    model = stepper(5)
    runtime = sr.Runtime(store)
    result = await runtime.run(
        agent(model, budget=sr.Budget(total_tokens=250)), run_id="r", input="go"
    )
    # 110 tokens per call: before the fourth call 330 >= 250, so three calls were made.
    assert result.status == "suspended"
    assert len(model.requests) == 3
    reason = result.budget_exceeded
    assert isinstance(reason, sr.BudgetExceeded)
    assert (reason.scope, reason.measure, reason.limit, reason.used) == (
        "run",
        "total_tokens",
        250,
        330,
    )
    assert "total_tokens" in str(reason) and "raise_budget" in str(reason)
    assert result.error is None
    # Resuming without a raise changes nothing and asks the model nothing.
    again = await runtime.resume("r")
    assert again.status == "suspended" and again.budget_exceeded is not None
    assert len(model.requests) == 3

    # A person lifts it: the run's budget is raised, and the run completes.
    await runtime.raise_budget("r", budget=sr.Budget(total_tokens=10_000))
    done = await runtime.resume("r")
    assert done.status == "completed" and done.text == "All done."
    assert done.budget_exceeded is None
    assert done.usage.total_tokens == 6 * 110 and done.usage.requests == 6
    status = await runtime.budget("r")
    assert status.budget == sr.Budget(total_tokens=10_000)
    assert status.spent.total_tokens == 660 and status.exceeded is None


async def test_raising_the_agents_budget_and_resuming_completes_the_run() -> None:
    store = sr.MemoryStore()
    model = stepper(3)
    first = sr.Runtime(store)
    result = await first.run(
        agent(model, budget=sr.Budget(output_tokens=15)), run_id="r", input="go"
    )
    assert result.status == "suspended" and len(model.requests) == 2
    assert result.budget_exceeded is not None and result.budget_exceeded.measure == "output_tokens"
    later = sr.Runtime(store, agents=[agent(model, budget=sr.Budget(output_tokens=100))])
    done = await later.resume("r")
    assert done.status == "completed" and len(model.requests) == 4


async def test_a_request_budget_allows_exactly_that_many_model_calls() -> None:
    model = stepper(5)
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, budget=sr.Budget(requests=2)), run_id="r", input="go"
    )
    assert result.status == "suspended" and len(model.requests) == 2
    assert result.budget_exceeded is not None
    assert (result.budget_exceeded.measure, result.budget_exceeded.used) == ("requests", 2)


async def test_a_tool_call_budget_stops_the_run_once_it_is_passed() -> None:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if _done(request) == 0:
            return tool_calls(("step", {"n": 1}), ("step", {"n": 2}), ("step", {"n": 3}))
        return text("three done") if _done(request) == 3 else tool_calls(("step", {"n": 4}))

    model = FunctionModel(respond)
    within = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, budget=sr.Budget(tool_calls=3)), run_id="r", input="go"
    )
    assert within.status == "completed"  # three calls made: the model may still answer
    over = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, budget=sr.Budget(tool_calls=2)), run_id="r", input="go"
    )
    # The batch the model asked for ran whole (a budget never cuts a batch); no model call after.
    assert over.status == "suspended"
    assert over.budget_exceeded is not None
    assert (over.budget_exceeded.measure, over.budget_exceeded.used) == ("tool_calls", 3)
    assert [c.status for c in over.calls] == ["succeeded"] * 3


async def test_a_turn_budget_counts_each_turn_on_its_own() -> None:
    model = stepper(1)  # each turn: one call for the step, one for the answer (but see below)
    runtime = sr.Runtime(sr.MemoryStore())
    worker = agent(model, turn_budget=sr.Budget(requests=2))
    first = await runtime.run(worker, run_id="r", input="one")
    assert first.status == "completed" and len(model.requests) == 2
    # The second turn: the step is done already, so the model answers in one call.
    second = await runtime.run(worker, run_id="r", input="two")
    assert second.status == "completed" and len(model.requests) == 3
    status = await runtime.budget("r")
    assert (status.turn_spent.requests, status.spent.requests) == (1, 3)

    # A run budget still counts the whole run.
    model2 = stepper(1)
    both = agent(model2, budget=sr.Budget(requests=3), turn_budget=sr.Budget(requests=2))
    runtime2 = sr.Runtime(sr.MemoryStore())
    await runtime2.run(both, run_id="r", input="one")
    await runtime2.run(both, run_id="r", input="two")
    third = await runtime2.run(both, run_id="r", input="three")
    assert third.status == "suspended" and len(model2.requests) == 3
    assert third.budget_exceeded is not None and third.budget_exceeded.scope == "run"


async def test_a_turn_budget_suspends_within_the_turn() -> None:
    model = stepper(5)
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, turn_budget=sr.Budget(input_tokens=300)), run_id="r", input="go"
    )
    assert result.status == "suspended" and len(model.requests) == 3
    assert result.budget_exceeded is not None
    assert (result.budget_exceeded.scope, result.budget_exceeded.measure) == (
        "turn",
        "input_tokens",
    )


async def test_a_cost_budget_prices_usage_by_the_table() -> None:
    prices = {"stepper": sr.Price(input=2.0, output=10.0)}  # per million tokens
    model = stepper(5, per_call=Usage(requests=1, input_tokens=100_000, output_tokens=10_000))
    runtime = sr.Runtime(sr.MemoryStore())
    # 0.2 + 0.1 = 0.30 per call: the fourth call would start at 0.90 >= 0.8.
    result = await runtime.run(
        agent(model, budget=sr.Budget(cost=0.8), prices=prices), run_id="r", input="go"
    )
    assert result.status == "suspended" and len(model.requests) == 3
    assert result.budget_exceeded is not None
    assert result.budget_exceeded.measure == "cost"
    assert result.budget_exceeded.used == pytest.approx(0.9)
    status = await runtime.budget("r")
    assert status.spent.cost == pytest.approx(0.9)


def test_cached_input_is_priced_as_cache_reads() -> None:
    price = sr.Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=400_000,
        cache_write_tokens=100_000,
    )
    # 500k uncached at 3.0, 400k read at 0.3, 100k written at 3.75, 100k out at 15.0.
    assert price.cost(usage) == pytest.approx(1.5 + 0.12 + 0.375 + 1.5)
    assert sr.Price(input=1.0, output=1.0).cost(usage) == pytest.approx(1.1)


async def test_a_budget_configured_to_fail_fails_the_run_and_a_raise_resumes_it() -> None:
    model = stepper(3)
    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    worker = agent(model, budget=sr.Budget(requests=1), on_budget="fail")
    result = await runtime.run(worker, run_id="r", input="go")
    assert result.status == "failed" and len(model.requests) == 1
    assert isinstance(result.error, sr.BudgetExceeded)
    assert result.budget_exceeded is not None and result.budget_exceeded.limit == 1
    with pytest.raises(sr.BudgetExceeded):
        result.raise_for_status()
    await runtime.raise_budget("r", budget=sr.Budget(requests=10))
    done = await runtime.resume("r")
    assert done.status == "completed" and done.error is None


async def test_a_raise_keeps_the_agents_other_limits_and_survives_a_reload() -> None:
    model = stepper(5)
    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    worker = agent(model, budget=sr.Budget(requests=2, output_tokens=1000))
    await runtime.run(worker, run_id="r", input="go")
    await runtime.raise_budget("r", budget=sr.Budget(requests=4))
    status = await sr.Runtime(store, agents=[worker]).budget("r")
    assert status.budget == sr.Budget(requests=4, output_tokens=1000)
    result = await sr.Runtime(store, agents=[worker]).resume("r")
    assert result.status == "suspended" and len(model.requests) == 4


async def test_raise_budget_refuses_unknown_runs_and_cost_without_prices() -> None:
    runtime = sr.Runtime(sr.MemoryStore())
    with pytest.raises(sr.RunNotFoundError):
        await runtime.raise_budget("nope", budget=sr.Budget(requests=1))
    worker = agent(stepper(1), budget=sr.Budget(requests=1))
    await runtime.run(worker, run_id="r", input="go")
    with pytest.raises(sr.UsageError, match="prices"):
        await runtime.raise_budget("r", budget=sr.Budget(cost=1.0))
    with pytest.raises(sr.UsageError, match="budget"):
        await runtime.raise_budget("r")


def test_bad_budgets_and_prices_are_refused_when_defined() -> None:
    with pytest.raises(sr.UsageError, match="requests"):
        sr.Budget(requests=-1)
    with pytest.raises(sr.UsageError, match="prices"):
        sr.Limits(budget=sr.Budget(cost=1.0))
    with pytest.raises(sr.UsageError, match="on_budget"):
        sr.Limits(on_budget="pause")  # type: ignore[arg-type]
    with pytest.raises(sr.UsageError, match="no price for model 'stepper'"):
        agent(
            stepper(1),
            turn_budget=sr.Budget(cost=1.0),
            prices={"other": sr.Price(input=1, output=1)},
        )
    with pytest.raises(sr.UsageError, match="input"):
        sr.Price(input=-1.0, output=1.0)


async def test_runs_without_budgets_store_no_budget_state() -> None:
    store = sr.MemoryStore()
    await sr.Runtime(store).run(agent(stepper(1)), run_id="r", input="go")
    snap = await store.load("r")
    assert snap is not None and "steadyrun.budget" not in snap.checkpoint.extra


async def test_a_sub_agent_over_its_budget_fails_and_the_model_is_told_why() -> None:
    from steadyrun.extensions import Delegate, SubAgents
    from steadyrun.testing import ScriptedModel

    child = stepper(5)
    worker = Delegate(
        name="worker",
        description="Does the steps.",
        tools=[step],
        model=child,
        limits=sr.Limits(budget=sr.Budget(requests=2)),
    )
    main = ScriptedModel([tool_calls(("delegate_worker", {"task": "steps"})), text("gave up")])
    parent = sr.Agent(name="main", model=main, extensions=[SubAgents([worker], general=False)])
    result = await sr.Runtime(sr.MemoryStore()).run(parent, run_id="r", input="go")
    assert result.text == "gave up" and len(child.requests) == 2
    record = result.call("m1.c1")
    assert record.status == "failed"
    why = sr.Texts().subagent_over_budget.format(measure="requests", limit="2")
    assert (record.error or "").endswith(sr.Texts().subagent_failed.format(why=why))
    assert result.usage.requests == 2 + 2  # the child's usage is counted in the parent


def test_budget_exceeded_pickles_with_its_attributes() -> None:
    import pickle

    stop = sr.BudgetExceeded("m", scope="turn", measure="cost", limit=1.5, used=2.0)
    again = pickle.loads(pickle.dumps(stop))
    assert (type(again), again.scope, again.measure, again.limit, again.used, str(again)) == (
        sr.BudgetExceeded,
        "turn",
        "cost",
        1.5,
        2.0,
        "m",
    )
