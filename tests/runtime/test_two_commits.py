"""Two commits per loop iteration: the response's step with its calls' starts, then the settled
calls with the next step. Each start is still durable before its body runs."""

from __future__ import annotations

from typing import Any

import pytest

import steadyrun as sr
from steadyrun.records import CallRecord, Step
from steadyrun.stores._leases import LeaseLostError
from steadyrun.testing import ScriptedModel, text, tool_calls


class Counting(sr.MemoryStore):
    """A memory store logging its writes: ``("step", phase, calls)``, ``("call", id, status)``."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[Any, ...]] = []

    async def save_step(self, run_id: str, step: Step) -> None:
        await super().save_step(run_id, step)
        statuses = sorted((c.id, c.status) for c in step.calls)
        self.writes.append(("step", step.checkpoint.phase, statuses))

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        await super().save_call(run_id, call)
        self.writes.append(("call", call.id, call.status))


async def test_a_one_call_iteration_makes_two_writes_and_the_start_is_durable_first() -> None:
    store = Counting()
    seen: list[str | None] = []

    @sr.tool(side_effects=True)
    async def ship(order: int, ctx: sr.ToolContext) -> str:
        """Ship.

        Args:
            order: The order.
        """
        stored = await store.load_call(ctx.run_id, ctx.call_id)
        seen.append(stored.status if stored is not None else None)
        return f"shipped {order}"

    model = ScriptedModel([tool_calls(("ship", {"order": 1})), text("done")])
    agent = sr.Agent(name="a", model=model, tools=[ship])
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed"
    assert seen == ["running"]  # the body ran after its start was written
    assert store.writes[1:3] == [
        ("step", "batch", [("m1.c1", "running")]),  # the response, with the call's start
        ("step", "model", [("m1.c1", "succeeded")]),  # the result, with the next step
    ]
    assert not [w for w in store.writes if w[0] == "call"]


async def test_calls_that_start_later_have_their_start_written_before_their_body() -> None:
    store = Counting()
    seen: dict[str, str | None] = {}

    @sr.tool  # no concurrency declared: each call runs alone, one after the other
    async def step(name: str, ctx: sr.ToolContext) -> str:
        """One step.

        Args:
            name: Its name.
        """
        stored = await store.load_call(ctx.run_id, ctx.call_id)
        seen[name] = stored.status if stored is not None else None
        return name

    batch = tool_calls(("step", {"name": "a"}), ("step", {"name": "b"}), ("step", {"name": "c"}))
    model = ScriptedModel([batch, text("done")])
    result = await sr.Runtime(store).run(
        sr.Agent(name="a", model=model, tools=[step]), run_id="r", input="x"
    )
    assert result.status == "completed"
    assert seen == {"a": "running", "b": "running", "c": "running"}
    opened = store.writes[1]
    assert opened[:2] == ("step", "batch")
    assert ("m1.c1", "running") in opened[2]  # the first start rides with the response
    assert ("m1.c2", "queued") in opened[2] and ("m1.c3", "queued") in opened[2]
    later = [w for w in store.writes if w[0] == "call"]
    assert ("call", "m1.c2", "running") in later and ("call", "m1.c3", "running") in later
    closing = store.writes[-2] if store.writes[-1][1] == "done" else store.writes[-1]
    assert ("m1.c3", "succeeded") in closing[2]  # the last settle rides with the next step


async def test_a_settled_call_survives_a_step_refused_for_a_lost_claim() -> None:
    class LosesClaim(sr.MemoryStore):
        async def save_step(self, run_id: str, step: Step) -> None:
            if any(c.status == "succeeded" for c in step.calls):
                raise LeaseLostError("the claim moved on")
            await super().save_step(run_id, step)

    store = LosesClaim()

    @sr.tool(side_effects=True)
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return f"paid {amount}"

    model = ScriptedModel([tool_calls(("pay", {"amount": 5})), text("done")])
    agent = sr.Agent(name="a", model=model, tools=[pay])
    with pytest.raises(LeaseLostError):
        await sr.Runtime(store).run(agent, run_id="r", input="x")
    stored = await store.load_call("r", "m1.c1")
    assert stored is not None and stored.status == "succeeded"  # the only word on the body
    snap = await store.load("r")
    assert snap is not None and snap.checkpoint.phase == "batch"  # the step itself was refused


async def test_observers_hear_of_a_settle_once_it_is_saved() -> None:
    store = Counting()
    heard: list[int] = []

    class Listener(sr.Observer):
        async def on_tool_settle(self, run_id: str, call: sr.CallRecord) -> None:
            stored = await store.load_call(run_id, call.id)
            assert stored is not None and stored.status == call.status
            heard.append(len(store.writes))

    @sr.tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    model = ScriptedModel([tool_calls(("noop", {})), text("done")])
    runtime = sr.Runtime(store, observers=[Listener()])
    result = await runtime.run(sr.Agent(name="a", model=model, tools=[noop]), run_id="r", input="x")
    assert result.status == "completed" and result.observer_errors == 0
    assert heard == [3]  # after the first step, the response's and the results'
