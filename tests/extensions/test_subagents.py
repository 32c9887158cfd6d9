"""Sub-agents and typed delegates: child runs under the delegation call, durable across crashes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pydantic
import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.control import Confirm, await_external
from steadyrun.extensions import Delegate, SubAgents, child_run_id
from steadyrun.stores import Store
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls

SUB = "You are a sub-agent"


def is_sub(request: sr.ModelRequest) -> bool:
    return request.instructions.startswith(SUB)


def tool_results(request: sr.ModelRequest) -> list[str]:
    return [p.content for m in request.messages if m.role == "tool" for p in m.parts]  # type: ignore[union-attr]


def task_of(request: sr.ModelRequest) -> str:
    return request.messages[0].text


async def test_a_delegation_runs_a_sub_agent_with_the_main_tools() -> None:
    ledger: list[str] = []

    @sr.tool(side_effects=True)
    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        ledger.append(order_id)
        return f"refunded {order_id}"

    @sr.tool(main_only=True)
    async def escalate() -> str:
        """Only for the main agent."""
        return ""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_sub(request):
            assert [t.name for t in request.tools] == ["refund"]
            if not tool_results(request):
                return tool_calls(("refund", {"order_id": task_of(request)}))
            return text(f"sub: {tool_results(request)[0]}")
        if not tool_results(request):
            return tool_calls(("delegate", {"task": "A-1"}))
        return text(f"main: {tool_results(request)[0]}")

    agent = sr.Agent(
        name="main",
        model=FunctionModel(respond),
        tools=[refund, escalate],
        extensions=[SubAgents()],
    )
    store = sr.MemoryStore()
    result = await sr.Runtime(store).run(agent, run_id="r", input="refund A-1")
    assert result.text == "main: sub: refunded A-1"
    assert ledger == ["A-1"]
    sub = result.call("m1.c1/m1.c1")
    assert sub.parent_id == "m1.c1" and sub.name == "refund" and sub.status == "succeeded"
    # Two main model calls and two of the sub-agent, each counted once.
    assert result.usage.requests == 4
    child = await store.load(child_run_id("r", "m1.c1"))
    assert child is not None and child.run.status == "completed"
    # Stored with the run: a reload returns the same records.
    again = await sr.Runtime(store, agents=[agent]).resume("r")
    assert again.call("m1.c1/m1.c1").parent_id == "m1.c1"


async def test_delegations_of_one_response_run_in_parallel() -> None:
    started: set[str] = set()
    both = asyncio.Event()

    @sr.tool(concurrency_key="")
    async def research(topic: str) -> str:
        """Research a topic.

        Args:
            topic: The topic.
        """
        started.add(topic)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 10)  # only returns if both run at once
        return f"notes on {topic}"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_sub(request):
            if not tool_results(request):
                return tool_calls(("research", {"topic": task_of(request)}))
            return text(tool_results(request)[0])
        if not tool_results(request):
            return tool_calls(("delegate", {"task": "cats"}), ("delegate", {"task": "dogs"}))
        return text(" | ".join(tool_results(request)))

    agent = sr.Agent(
        name="main", model=FunctionModel(respond), tools=[research], extensions=[SubAgents()]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.text == "notes on cats | notes on dogs"


class Verdict(pydantic.BaseModel):
    """A reviewer's verdict."""

    approve: bool
    reason: str


async def test_a_typed_delegate_returns_a_validated_result() -> None:
    reviewer_model = ScriptedModel(
        [
            text("looks fine to me"),  # plain text: corrected to use submit_result
            tool_calls(("submit_result", {"result": {"approve": "maybe"}})),  # invalid
            tool_calls(("submit_result", {"result": {"approve": True, "reason": "tests pass"}})),
        ]
    )

    @sr.tool
    async def read_diff() -> str:
        """The reviewer's own tool."""
        return "diff"

    reviewer = Delegate(
        name="reviewer",
        description="Review a change and decide.",
        instructions="Review the change.",
        tools=[read_diff],
        model=reviewer_model,
        output=Verdict,
        limits=sr.Limits(max_iterations=5, corrections=2),
    )
    main = ScriptedModel(
        [tool_calls(("delegate_reviewer", {"task": "review PR 7"})), text("approved")]
    )
    agent = sr.Agent(name="main", model=main, extensions=[SubAgents([reviewer], general=False)])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.text == "approved"
    assert json.loads(result.call("m1.c1").result or "") == {
        "approve": True,
        "reason": "tests pass",
    }
    assert [t.name for t in main.requests[0].tools] == ["delegate_reviewer"]
    assert [t.name for t in reviewer_model.requests[0].tools] == ["read_diff", "submit_result"]
    invalid = [c for c in result.calls if c.parent_id and c.status == "failed"]
    assert len(invalid) == 1 and invalid[0].name == "submit_result"
    assert result.usage.requests == 2 + 3


async def test_a_delegate_over_its_budget_fails_the_delegation_call() -> None:
    looping = ScriptedModel([tool_calls(("noop", {}))] * 3)

    @sr.tool
    async def noop() -> str:
        """Does nothing."""
        return ""

    worker = Delegate(
        name="worker",
        description="Works forever.",
        tools=[noop],
        model=looping,
        limits=sr.Limits(max_iterations=2),
    )
    main = ScriptedModel([tool_calls(("delegate_worker", {"task": "x"})), text("gave up")])
    agent = sr.Agent(name="main", model=main, extensions=[SubAgents([worker], general=False)])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    record = result.call("m1.c1")
    assert record.status == "failed"
    assert "did not finish" in (record.error or "") and "max_iterations=2" in (record.error or "")
    assert result.text == "gave up"


async def test_sub_agent_calls_cannot_suspend_or_wait_for_a_person() -> None:
    @sr.tool
    async def wait_for_bank() -> str:
        """Waits for an external system."""
        await_external({"ask": "bank"})
        return ""

    @sr.tool(policy=lambda view: Confirm(prompt="ok?"))
    async def wire_money() -> str:
        """Needs a person's confirmation."""
        return "wired"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_sub(request):
            if not tool_results(request):
                return tool_calls(("wait_for_bank", {}), ("wire_money", {}))
            return text(" / ".join(tool_results(request)))
        if not tool_results(request):
            return tool_calls(("delegate", {"task": "pay"}))
        return text("done")

    agent = sr.Agent(
        name="main",
        model=FunctionModel(respond),
        tools=[wait_for_bank, wire_money],
        extensions=[SubAgents()],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.status == "completed"
    subs = {c.name: c for c in result.calls if c.parent_id}
    assert subs["wait_for_bank"].status == "failed" and subs["wire_money"].status == "failed"
    assert "not possible here" in (subs["wire_money"].error or "")
    assert "not possible here" in (subs["wait_for_bank"].error or "")


def delegating_agent(model: sr.ModelClient, *tools: sr.Tool) -> sr.Agent:
    return sr.Agent(name="main", model=model, tools=list(tools), extensions=[SubAgents()])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_crash_mid_sub_agent_resumes_the_child_without_repeating_it(
    kind: str, tmp_path: Path
) -> None:
    store: Store = sr.MemoryStore() if kind == "memory" else sr.SqliteStore(tmp_path / "r.db")
    crash = asyncio.Event()
    ledger: list[str] = []
    stall = {"on": True}

    @sr.tool(side_effects=True)
    async def charge(order_id: str) -> str:
        """Charge (side effects).

        Args:
            order_id: The order.
        """
        ledger.append(f"charge {order_id}")
        return "charged"

    @sr.tool(side_effects=False)
    async def lookup(order_id: str) -> str:
        """Read only; hangs the first time.

        Args:
            order_id: The order.
        """
        ledger.append(f"lookup {order_id}")
        if stall["on"]:
            crash.set()
            await hang()
        return "found"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        results = tool_results(request)
        if is_sub(request):
            if not results:
                return tool_calls(("charge", {"order_id": "A"}))
            if len(results) == 1:
                return tool_calls(("lookup", {"order_id": "A"}))
            return text(f"sub saw {results}")
        if not results:
            return tool_calls(("delegate", {"task": "charge A"}))
        return text(f"main: {results[0]}")

    agent = delegating_agent(FunctionModel(respond), charge, lookup)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), crash)
    assert ledger == ["charge A", "lookup A"]

    stall["on"] = False
    result = await sr.Runtime(store, agents=[agent]).resume("r")
    assert result.status == "completed"
    assert ledger == ["charge A", "lookup A"]  # nothing ran again: the child resumed
    assert result.text is not None and "interrupted" in result.text  # lookup settled by traits
    delegation = result.call("m1.c1")
    assert delegation.status == "succeeded"
    subs = [c for c in result.calls if c.parent_id == "m1.c1"]
    assert [c.name for c in subs] == ["charge", "lookup"]
    assert [c.status for c in subs] == ["succeeded", "interrupted"]
    await store.close()


def charging_agent(crash: asyncio.Event, ledger: list[str]) -> sr.Agent:
    """A delegation whose sub-agent dies inside ``charge``, with ``lookup`` queued behind it."""

    @sr.tool(side_effects=True)
    async def charge(order_id: str) -> str:
        """Charge (side effects, runs alone); the process dies inside it.

        Args:
            order_id: The order.
        """
        ledger.append(f"charge {order_id}")
        crash.set()
        await hang()
        return "charged"

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order_id: str) -> str:
        """Read only; queued behind charge at the crash.

        Args:
            order_id: The order.
        """
        ledger.append(f"lookup {order_id}")
        return "found"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_sub(request):
            return tool_calls(("charge", {"order_id": "A"}), ("lookup", {"order_id": "A"}))
        if not tool_results(request):
            return tool_calls(("delegate", {"task": "charge A"}))
        return text(f"main: {tool_results(request)[0]}")

    return delegating_agent(FunctionModel(respond), charge, lookup)


async def check_closed_child(store: Store, result: sr.RunResult, ledger: list[str]) -> None:
    """The delegation needs review; the child run is ended and its records are copied."""
    assert result.status == "completed" and ledger == ["charge A"]  # nothing ran again
    delegation = result.call("m1.c1")
    assert delegation.status == "needs_review"
    assert "charge" in (delegation.result or "")
    assert result.text == f"main: {delegation.result}"
    child = await store.load(child_run_id("r", "m1.c1"))
    assert child is not None
    assert (child.run.status, child.run.error_kind) == ("failed", "SubAgentInterrupted")
    assert "charge" in (child.run.error or "") and "m1.c1" in (child.run.error or "")
    assert child.checkpoint.phase == "done"
    by_name = {c.name: c for c in child.calls}
    assert by_name["charge"].status == "needs_review"
    assert "may or may not have taken effect" in (by_name["charge"].result or "")
    assert by_name["lookup"].status == "cancelled"  # queued: it will never run
    # What the child did before the crash is under the delegation call, as for a finished one.
    copies = {c.name: c for c in result.calls if c.parent_id == "m1.c1"}
    assert {n: c.status for n, c in copies.items()} == {
        "charge": "needs_review",
        "lookup": "cancelled",
    }
    assert copies["charge"].id == "m1.c1/m1.c1"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_crash_during_a_sub_agents_side_effect_makes_the_delegation_need_review(
    kind: str, tmp_path: Path
) -> None:
    store: Store = sr.MemoryStore() if kind == "memory" else sr.SqliteStore(tmp_path / "r.db")
    crash = asyncio.Event()
    ledger: list[str] = []
    agent = charging_agent(crash, ledger)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), crash)
    child = await store.load(child_run_id("r", "m1.c1"))
    assert child is not None and child.run.status == "running"
    result = await sr.Runtime(store, agents=[agent]).resume("r")
    await check_closed_child(store, result, ledger)
    # Resuming again changes nothing and runs nothing.
    again = await sr.Runtime(store, agents=[agent]).resume("r")
    assert again.calls == result.calls and ledger == ["charge A"]
    await store.close()


class DieBeforeTheReview(sr.MemoryStore):
    """Dies when recovery records the delegation as needing review (the child already ended)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.crashed = asyncio.Event()

    async def save_call(self, run_id: str, call: sr.CallRecord) -> None:
        if self.armed and call.id == "m1.c1" and call.status == "needs_review":
            self.crashed.set()
            await hang()
        await super().save_call(run_id, call)


async def test_a_crash_after_the_child_was_ended_still_makes_the_delegation_need_review() -> None:
    store = DieBeforeTheReview()
    crash = asyncio.Event()
    ledger: list[str] = []
    agent = charging_agent(crash, ledger)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), crash)
    store.armed = True
    await crash_when(sr.Runtime(store, agents=[agent]).resume("r"), store.crashed)
    child = await store.load(child_run_id("r", "m1.c1"))
    assert child is not None and child.run.status == "failed"  # ended before the crash
    store.armed = False
    result = await sr.Runtime(store, agents=[agent]).resume("r")
    await check_closed_child(store, result, ledger)  # not resumed, not failed: reviewed


async def test_strict_settlement_holds_a_delegation_that_needs_review() -> None:
    store = sr.MemoryStore()
    crash = asyncio.Event()

    @sr.tool(side_effects=True)
    async def charge() -> str:
        """Charge; dies inside."""
        crash.set()
        await hang()
        return ""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_sub(request):
            return tool_calls(("charge", {}))
        return tool_calls(("delegate", {"task": "charge"}))

    agent = replace(delegating_agent(FunctionModel(respond), charge), strict_settlement=True)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), crash)
    result = await sr.Runtime(store, agents=[agent]).resume("r")
    assert result.status == "suspended"
    assert result.call("m1.c1").status == "needs_review"


async def test_sub_agents_need_delegates_or_the_general_tool() -> None:
    with pytest.raises(sr.UsageError):
        SubAgents(general=False)
    with pytest.raises(sr.UsageError):
        SubAgents([Delegate(name="a", description="x"), Delegate(name="a", description="y")])
    with pytest.raises(sr.UsageError):
        Delegate(name="bad name!", description="x")
