"""Agent versions: a run records the fingerprint of its agent; what a resume under another does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.control import CallView, Confirm, require_input
from steadyrun.runtime import agent_fingerprint
from steadyrun.stores import Store
from steadyrun.testing import FunctionModel, text, tool_calls

Refunds = list[tuple[str, Any]]


def always_confirm(call: CallView) -> Confirm:
    return Confirm(prompt=f"Refund {call.arguments}?")


def refund_v1(done: Refunds) -> sr.Tool:
    @sr.tool(side_effects=True, policy=always_confirm, concurrency_key="")
    def refund(order_id: str, amount_cents: int) -> str:
        """Refund an order.

        Args:
            order_id: The order.
            amount_cents: Cents to refund.
        """
        done.append(("v1", (order_id, amount_cents)))
        return f"refunded {amount_cents} on {order_id}"

    return refund


def refund_with_reason(done: Refunds) -> sr.Tool:
    """A compatible new schema: one more optional argument."""

    @sr.tool(side_effects=True, policy=always_confirm, concurrency_key="")
    def refund(order_id: str, amount_cents: int, reason: str = "") -> str:
        """Refund an order.

        Args:
            order_id: The order.
            amount_cents: Cents to refund.
            reason: Why.
        """
        done.append(("v2", (order_id, amount_cents, reason)))
        return f"refunded {amount_cents} on {order_id}"

    return refund


def refund_in_euros(done: Refunds) -> sr.Tool:
    """A schema that no longer accepts the stored arguments (amount_cents is gone)."""

    @sr.tool(side_effects=True, policy=always_confirm, concurrency_key="")
    def refund(order_id: str, amount_eur: float) -> str:
        """Refund an order.

        Args:
            order_id: The order.
            amount_eur: Euros to refund.
        """
        done.append(("eur", (order_id, amount_eur)))
        return f"refunded {amount_eur} EUR on {order_id}"

    return refund


@sr.tool(side_effects=False, concurrency_key="")
def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order.
    """
    return f"{order_id}: paid"


def results(request: sr.ModelRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


def support_model() -> FunctionModel:
    """Asks for one refund, then repeats back what it heard."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        heard = results(request)
        if not heard:
            return tool_calls(("refund", {"order_id": "A", "amount_cents": 500}))
        return text(f"Heard: {heard[-1].content}")

    return FunctionModel(respond)


def support(tools: list[sr.Tool], model: FunctionModel, instructions: str = "Help.") -> sr.Agent:
    return sr.Agent(name="support", model=model, tools=tools, instructions=instructions)


async def suspended_on_refund(store: Store, done: Refunds) -> FunctionModel:
    model = support_model()
    result = await sr.Runtime(store).run(
        support([refund_v1(done), lookup], model), run_id="t", input="refund A"
    )
    assert result.status == "suspended" and result.call("m1.c1").status == "awaiting_decision"
    return model


# -- the fingerprint -----------------------------------------------------------------------


async def test_each_run_records_the_fingerprint_of_its_agent() -> None:
    store = sr.MemoryStore()
    done: Refunds = []
    agent = support([refund_v1(done), lookup], support_model())
    await sr.Runtime(store).run(agent, run_id="t", input="refund A")
    snap = await store.load("t")
    assert snap is not None
    fingerprint = agent_fingerprint(agent, "t")
    assert snap.run.agent_version == fingerprint.version
    assert fingerprint.model == "function" and sorted(fingerprint.tools) == ["lookup", "refund"]


def test_the_fingerprint_follows_instructions_tool_schemas_and_model() -> None:
    done: Refunds = []
    model = support_model()
    base = agent_fingerprint(support([refund_v1(done), lookup], model)).version
    same = support([lookup, refund_v1(done)], model)  # another order, a new but equal tool
    assert agent_fingerprint(same).version == base

    @sr.tool(side_effects=False, concurrency_key="")
    def lookup_reworded(order_id: str) -> str:
        """Find an order (only the words changed).

        Args:
            order_id: Which order to find.
        """
        return ""

    reworded = sr.Agent(
        name="support",
        model=model,
        tools=[refund_v1(done), sr.tool(name="lookup")(lookup_reworded.function)],
        instructions="Help.",
    )
    assert agent_fingerprint(reworded).version == base  # descriptions are not the schema
    changed = [
        support([refund_v1(done), lookup], model, instructions="Help kindly."),
        support([refund_with_reason(done), lookup], model),
        support([refund_v1(done)], model),
        sr.Agent(
            name="support",
            model=FunctionModel(model._fn, name="other"),
            tools=[refund_v1(done), lookup],
            instructions="Help.",
        ),
    ]
    versions = {agent_fingerprint(a).version for a in changed}
    assert len(versions) == 4 and base not in versions


# -- resuming under another version --------------------------------------------------------


async def test_a_compatible_change_proceeds(store: Store) -> None:
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    later = sr.Runtime(store, agents=[support([refund_v1(done), lookup], model, "Be brief.")])
    await later.decide("t", "m1.c1", approve=True)
    result = await later.resume("t")
    assert result.status == "completed" and result.text == "Heard: refunded 500 on A"
    assert done == [("v1", ("A", 500))]
    snap = await store.load("t")
    assert snap is not None
    assert snap.run.agent_version == agent_fingerprint(later._agents["support"], "t").version


async def test_a_pending_call_whose_tool_was_removed_is_not_run_and_the_model_is_told(
    store: Store,
) -> None:
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    later = sr.Runtime(store, agents=[support([lookup], model)])
    result = await later.resume("t")
    assert result.status == "completed"
    assert done == []  # never executed
    call = result.call("m1.c1")
    assert call.status == "failed" and call.error is not None
    assert "refund" in call.error and "no longer" in call.error
    heard = results(model.requests[-1])
    assert heard[-1].is_error and heard[-1].content == call.error
    assert result.text == f"Heard: {call.error}"
    assert await later.pending("t") == []


async def test_an_approved_call_whose_tool_was_removed_is_not_run(store: Store) -> None:
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    await sr.Runtime(store).decide("t", "m1.c1", approve=True)
    result = await sr.Runtime(store, agents=[support([lookup], model)]).resume("t")
    assert result.status == "completed" and done == []
    assert result.call("m1.c1").status == "failed"


async def test_an_approved_call_whose_tool_changed_asks_for_a_new_decision(store: Store) -> None:
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    v1 = support([refund_v1(done), lookup], model)
    await sr.Runtime(store, agents=[v1]).decide(
        "t", "m1.c1", approve=True, arguments={"order_id": "A", "amount_cents": 400}
    )
    later = sr.Runtime(store, agents=[support([refund_with_reason(done), lookup], model)])
    result = await later.resume("t")
    assert result.status == "suspended" and done == []  # not run on the old approval
    old, new = result.call("m1.c1"), result.call("m1.c1.v2")
    assert old.status == "cancelled" and old.decision is not None and old.decision.approve
    assert old.notes["steadyrun.superseded_by"] == "m1.c1.v2"
    assert (new.status, new.decision, new.arguments) == (
        "awaiting_decision",
        None,
        old.arguments,  # the model's own arguments: the edit was approved for the old tool
    )
    (item,) = await later.pending("t")
    assert (item.kind, item.call_id, item.name) == ("decision", "m1.c1.v2", "refund")
    with pytest.raises(sr.ConflictError):  # its decision stays, final, on the old record
        await later.decide("t", "m1.c1", approve=True)
    snap = await store.load("t")
    assert snap is not None and snap.checkpoint.batch == ["m1.c1.v2"]
    blocks = [b for b in snap.blocks if b.kind == "tool_call"]
    assert [b.call_id for b in blocks] == ["m1.c1.v2"]

    await later.decide("t", "m1.c1.v2", approve=True)
    finished = await later.resume("t")
    assert finished.status == "completed" and finished.text == "Heard: refunded 500 on A"
    assert done == [("v2", ("A", 500, ""))]
    assert len(results(model.requests[-1])) == 1  # the model sees one result for its call


async def test_a_call_waiting_for_a_decision_is_asked_again_under_a_changed_tool() -> None:
    store = sr.MemoryStore()
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    later = sr.Runtime(store, agents=[support([refund_with_reason(done), lookup], model)])
    result = await later.resume("t")
    assert result.status == "suspended"
    assert [(i.kind, i.call_id) for i in await later.pending("t")] == [("decision", "m1.c1.v2")]
    with pytest.raises(sr.NotPendingError):  # the old record takes no decision any more
        await later.decide("t", "m1.c1", approve=True)
    # Resuming again changes nothing more: the new call is the current one.
    again = await later.resume("t")
    assert [c.id for c in again.calls] == ["m1.c1", "m1.c1.v2"] and done == []


async def test_a_changed_schema_that_refuses_the_stored_arguments_settles_the_call(
    store: Store,
) -> None:
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    await sr.Runtime(store).decide("t", "m1.c1", approve=True)
    later = sr.Runtime(store, agents=[support([refund_in_euros(done), lookup], model)])
    result = await later.resume("t")
    assert result.status == "completed" and done == []
    call = result.call("m1.c1")
    assert call.status == "failed" and call.error is not None
    assert "changed" in call.error and "amount_cents" in call.error
    assert result.text == f"Heard: {call.error}"


async def test_a_rejected_call_stays_rejected_whatever_its_tool_became() -> None:
    store = sr.MemoryStore()
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    await sr.Runtime(store).decide("t", "m1.c1", approve=False, reason="no")
    later = sr.Runtime(store, agents=[support([refund_with_reason(done), lookup], model)])
    result = await later.resume("t")
    assert result.status == "completed" and result.call("m1.c1").status == "rejected"
    assert done == []


async def test_an_input_request_whose_tool_was_removed_is_settled() -> None:
    @sr.tool(side_effects=True)
    def ask(question: str) -> str:
        """Ask the customer.

        Args:
            question: What to ask.
        """
        require_input(question, response_schema={"type": "string"})
        return ""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        heard = results(request)
        return (
            text(f"Heard: {heard[-1].content}") if heard else tool_calls(("ask", {"question": "?"}))
        )

    model = FunctionModel(respond)
    store = sr.MemoryStore()
    first = await sr.Runtime(store).run(
        sr.Agent(name="support", model=model, tools=[ask, lookup]), run_id="t", input="hi"
    )
    assert first.status == "suspended"
    result = await sr.Runtime(
        store, agents=[sr.Agent(name="support", model=model, tools=[lookup])]
    ).resume("t")
    assert result.status == "completed" and result.call("m1.c1").status == "failed"
    assert "no longer" in (result.text or "")


async def test_the_model_is_told_in_the_runs_language() -> None:
    store = sr.MemoryStore()
    done: Refunds = []
    model = await suspended_on_refund(store, done)
    later = sr.Runtime(store, agents=[support([lookup], model)], texts=sr.Texts.chinese())
    result = await later.resume("t")
    error = result.call("m1.c1").error or ""
    assert error == sr.Texts.chinese().tool_removed.format(name="refund", call_id="call_1")


# -- pinned versions -------------------------------------------------------------------------


async def test_an_app_pins_older_versions_and_each_run_resumes_under_its_own() -> None:
    store = sr.MemoryStore()
    done: Refunds = []
    model = support_model()
    v1 = support([refund_v1(done), lookup], model)
    v2 = support([refund_with_reason(done), lookup], model, "Be brief.")
    await sr.Runtime(store).run(v1, run_id="old", input="refund A")
    runtime = sr.Runtime(store, agents=[v1, v2])  # the last one listed is the current one
    assert runtime._agents["support"] is v2
    await runtime.run(v2, run_id="new", input="refund A")
    for run_id in ("old", "new"):
        await runtime.decide(run_id, "m1.c1", approve=True)
    old, new = await runtime.resume("old"), await runtime.resume("new")
    assert (old.status, new.status) == ("completed", "completed")
    assert done == [("v1", ("A", 500)), ("v2", ("A", 500, ""))]
    # A run of a version no longer listed goes on under the current one, by the rules.
    await sr.Runtime(store).run(
        support([refund_v1(done), lookup], model, "Old words."), run_id="older", input="x"
    )
    moved = await runtime.resume("older")
    assert moved.status == "suspended" and moved.call("m1.c1.v2").status == "awaiting_decision"


async def test_two_agents_of_one_name_with_the_same_fingerprint_are_refused() -> None:
    model = support_model()
    done: Refunds = []
    with pytest.raises(sr.UsageError, match="two different agents"):
        sr.Runtime(
            sr.MemoryStore(),
            agents=[support([refund_v1(done)], model), support([refund_v1(done)], model)],
        )


async def test_versions_with_instructions_of_a_function_are_told_apart_by_run() -> None:
    model = support_model()
    done: Refunds = []

    def personal(run_id: str) -> str:
        return f"Help {run_id}."

    builder: Callable[[str], str] = personal
    v1 = sr.Agent(name="support", model=model, tools=[refund_v1(done)], instructions=builder)
    v2 = sr.Agent(
        name="support", model=model, tools=[refund_with_reason(done)], instructions=builder
    )
    store = sr.MemoryStore()
    await sr.Runtime(store).run(v1, run_id="a", input="refund")
    runtime = sr.Runtime(store, agents=[v1, v2])
    await runtime.decide("a", "m1.c1", approve=True)
    assert (await runtime.resume("a")).status == "completed"
    assert done == [("v1", ("A", 500))]


async def test_a_run_records_the_agents_version_as_it_is_when_the_run_executes() -> None:
    # The version a run records is remembered per agent (hashing it again for each run was
    # 1% of the service's CPU); an agent changed in place between runs is hashed anew.
    store = sr.MemoryStore()
    done: Refunds = []
    agent = support([refund_v1(done), lookup], support_model())
    runtime = sr.Runtime(store)
    versions = []
    for i, change in enumerate(("Help.", "Help politely.", "Help.")):
        agent.instructions = change
        if i == 2:
            other = support_model()
            other.name = "another"
            agent.model = other
        await runtime.run(agent, run_id=f"r{i}", input="refund A")
        snap = await store.load(f"r{i}")
        assert snap is not None
        assert snap.run.agent_version == agent_fingerprint(agent, f"r{i}").version
        versions.append(snap.run.agent_version)
    assert len(set(versions)) == 3
    per_run = support([lookup], support_model(), instructions="x")
    per_run.instructions = lambda run_id: f"Help run {run_id}."
    for run_id in ("a", "b"):
        await runtime.run(per_run, run_id=run_id, input="refund A")
    a, b = await store.load("a"), await store.load("b")
    assert a is not None and b is not None
    assert a.run.agent_version == agent_fingerprint(per_run, "a").version
    assert b.run.agent_version == agent_fingerprint(per_run, "b").version != a.run.agent_version


async def test_an_unchanged_agent_is_hashed_once_for_all_its_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from steadyrun.runtime import _versions

    hashed: list[object] = []
    digest = _versions._digest

    def counting(value: object, size: int) -> str:
        hashed.append(value)
        return digest(value, size)

    monkeypatch.setattr(_versions, "_digest", counting)
    agent = support([lookup], support_model())
    runtime = sr.Runtime(sr.MemoryStore())
    await runtime.run(agent, run_id="r0", input="refund A")
    first = len(hashed)
    for i in range(1, 5):
        await runtime.run(agent, run_id=f"r{i}", input="refund A")
    assert len(hashed) == first, hashed[first:]  # nothing hashed again for the later runs
