"""One executor per run, in one process: two runtimes on one store exclude each other."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import steadyrun as sr
from steadyrun import RunBusyError
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.control import Confirm
from steadyrun.runtime._claims import Claims, owner_died, owner_id
from steadyrun.stores import LeaseLostError
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls


def _approval_agent(
    ledger: list[str], gate: asyncio.Event | None = None, *, first: bool = False
) -> sr.Agent:
    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Refund?"))
    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        ledger.append(order_id)
        if gate is not None:
            await gate.wait()
        return f"refunded {order_id}"

    script = [tool_calls(("refund", {"order_id": "A"}))] if first else []
    script.append(text("done"))
    return sr.Agent(name="support", model=ScriptedModel(script), tools=[refund])


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)  # noqa: ASYNC110 (a condition of a list, not an event)
    raise AssertionError("the condition never held")


async def _suspended(store: sr.MemoryStore, ledger: list[str]) -> str:
    agent = _approval_agent(ledger, first=True)
    result = await sr.Runtime(store).run(agent, run_id="t", input="refund A")
    assert result.status == "suspended"
    call_id = result.calls[0].id
    await sr.Runtime(store).decide("t", call_id, approve=True)
    return call_id


async def test_a_second_runtime_gets_run_busy_while_the_first_executes() -> None:
    store = sr.MemoryStore()
    ledger: list[str] = []
    await _suspended(store, ledger)
    gate = asyncio.Event()
    first = sr.Runtime(store, agents=[_approval_agent(ledger, gate)], owner="first")
    second = sr.Runtime(store, agents=[_approval_agent(ledger)], owner="second")
    running = asyncio.create_task(first.resume("t"))
    await _until(lambda: bool(ledger))
    with pytest.raises(RunBusyError) as caught:
        await second.resume("t")
    assert caught.value.owner == "first" and caught.value.run_id == "t"
    assert caught.value.expires_at is not None
    gate.set()
    assert (await running).status == "completed"
    assert ledger == ["A"]  # the body ran once
    again = await second.resume("t")  # the claim is free again: the run is done
    assert again.status == "completed" and ledger == ["A"]


async def test_two_resumes_at_once_execute_the_approved_body_once() -> None:
    for _ in range(20):
        store = sr.MemoryStore()
        ledger: list[str] = []
        await _suspended(store, ledger)
        runtimes = [sr.Runtime(store, agents=[_approval_agent(ledger)]) for _ in range(2)]
        results = await asyncio.gather(*(r.resume("t") for r in runtimes), return_exceptions=True)
        assert ledger == ["A"]
        busy = [r for r in results if isinstance(r, RunBusyError)]
        done = [r for r in results if isinstance(r, sr.RunResult)]
        assert len(busy) + len(done) == 2 and done and done[0].status == "completed"
        snap = await store.load("t")
        assert snap is not None and [c.status for c in snap.calls] == ["succeeded"]


async def test_resume_waits_for_the_claim_when_asked() -> None:
    store = sr.MemoryStore()
    ledger: list[str] = []
    await _suspended(store, ledger)
    gate = asyncio.Event()
    first = sr.Runtime(store, agents=[_approval_agent(ledger, gate)])
    second = sr.Runtime(store, agents=[_approval_agent(ledger)])
    running = asyncio.create_task(first.resume("t"))
    await _until(lambda: bool(ledger))
    waiting = asyncio.create_task(second.resume("t", wait=10))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    gate.set()
    assert (await running).status == "completed"
    assert (await waiting).status == "completed"
    assert ledger == ["A"]


async def test_an_executor_that_lost_its_claim_starts_no_call_and_makes_no_model_call() -> None:
    store = sr.MemoryStore()
    calls: list[str] = []
    revoked = asyncio.Event()

    @sr.tool(side_effects=False)
    async def slow(n: int) -> str:
        """Take a while.

        Args:
            n: Which.
        """
        calls.append(f"slow {n}")
        # Another executor takes the run over while this body runs (a stalled worker).
        await store.leases.revoke("t", "thief", 30)
        revoked.set()
        return "ok"

    asked: list[int] = []

    def respond(request: ModelRequest) -> ModelResponse:
        asked.append(len(request.messages))
        return tool_calls(("slow", {"n": len(asked)}))

    agent = sr.Agent(name="a", model=FunctionModel(respond), tools=[slow])
    with pytest.raises(LeaseLostError):
        await sr.Runtime(store).run(agent, run_id="t", input="go")
    assert calls == ["slow 1"] and len(asked) == 1  # nothing after the loss
    snap = await store.load("t")
    # How the body ended is still recorded (a fact, it starts nothing); nothing after it is.
    assert snap is not None and [c.status for c in snap.calls] == ["succeeded"]
    assert snap.run.steps == 2  # the batch's own step was refused


async def test_the_claim_is_renewed_while_a_long_tool_runs() -> None:
    store = sr.MemoryStore()
    started, release = asyncio.Event(), asyncio.Event()

    @sr.tool(side_effects=False)
    async def long(n: int) -> str:
        """Run long.

        Args:
            n: Which.
        """
        started.set()
        await release.wait()  # held until the test saw the claim renewed twice
        return "ok"

    agent = sr.Agent(
        name="a",
        model=ScriptedModel([tool_calls(("long", {"n": 1})), text("done")]),
        tools=[long],
    )
    runtime = sr.Runtime(store, claim_ttl=1.0)
    other = sr.Runtime(store, agents=[agent], owner="other")
    task = asyncio.create_task(runtime.run(agent, run_id="t", input="go"))
    await started.wait()
    first = await store.leases.holder("t")
    assert first is not None
    # Past the claim's first expiry (and half a ttl more) it is still held: it was renewed.
    await asyncio.sleep((first.expires_at - datetime.now(UTC)).total_seconds() + 0.5)
    holder = await store.leases.holder("t")
    assert holder is not None and holder.token == first.token  # the same claim, renewed
    assert holder.expires_at > first.expires_at
    with pytest.raises(RunBusyError):
        await other.resume("t")
    release.set()
    assert (await task).status == "completed"


async def test_retrying_a_start_after_a_crash_adds_the_input_once() -> None:
    store = sr.MemoryStore()
    seen: list[list[str]] = []

    def respond(request: ModelRequest) -> ModelResponse:
        seen.append([m.text for m in request.messages if m.role == "user"])
        return text("hello")

    agent = sr.Agent(name="a", model=FunctionModel(respond))
    runtime = sr.Runtime(store)
    await runtime.run(agent, run_id="t", input="hi")
    # A crash after the first step: the run is stored running, its turn unfinished.
    snap = await store.load("t")
    assert snap is not None
    from dataclasses import replace

    from steadyrun.records import Step

    cut = replace(snap.run, status="running", steps=snap.run.steps + 1)
    await store.save_step("t", Step(run=cut, checkpoint=replace(snap.checkpoint, phase="model")))
    await runtime.run(agent, run_id="t", input="hi")  # the usual "start or resume" retry
    assert seen[-1].count("hi") == 1
    # Once idle, the same text again is a new turn.
    await runtime.run(agent, run_id="t", input="hi")
    assert seen[-1].count("hi") == 2


async def test_claims_wait_rejects_a_negative_wait() -> None:
    store = sr.MemoryStore()
    with pytest.raises(sr.UsageError):
        await Claims(store.leases, "me", 5).take("t", wait=-1)


def test_owner_died_only_for_a_dead_process_of_this_host() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = owner_id("x").replace(f":{os.getpid()}:", f":{child.pid}:")
    assert owner_died(dead)
    assert not owner_died(owner_id("x"))  # this process
    assert not owner_died(f"another-host:{child.pid}:x")
    assert not owner_died("a worker named by hand")


async def test_a_claim_of_a_killed_process_is_taken_at_once() -> None:
    store = sr.MemoryStore()
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()
    dead = owner_id("x").replace(f":{os.getpid()}:", f":{child.pid}:")
    assert await store.leases.acquire("t", dead, 60) is not None
    lease = await Claims(store.leases, owner_id("me"), 5).take("t")
    assert lease.token == 2


async def test_a_claim_this_process_left_behind_is_taken_at_once() -> None:
    # An executor of this process stopped without releasing (its store failed, say):
    # nothing here holds the claim any more, so a new runtime need not wait for the expiry.
    store = sr.MemoryStore()
    left = await store.leases.acquire("t", owner_id("gone"), 60)
    assert left is not None
    lease = await Claims(store.leases, owner_id("me"), 5).take("t")
    assert lease.token == left.token + 1


async def test_a_claim_held_by_a_live_executor_of_this_process_is_not_taken() -> None:
    store = sr.MemoryStore()
    holder = Claims(store.leases, owner_id("live"), 5)
    async with holder.executing("t"):
        with pytest.raises(RunBusyError):
            await Claims(store.leases, owner_id("me"), 5).take("t")
