"""A sub-agent's background calls on the built-in engine: adopted, told, and followed up.

A delegation's child run adopts a slow background call as any run does: its model gets the
launch receipt, it ends its turn, the delegation's result reaches the parent at once. When the
task ends, the notification goes to the child run's feed; the worker that resumes the run tree
gives the child a new turn (its own agent, as a sub-agent) and tells the parent what the child
answered, in a system message the parent takes in a new turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import steadyrun as sr
from bgkit import Build, Registry
from steadyrun.background import MemoryTaskStore, SqliteTaskStore, TaskManager
from steadyrun.control import Confirm
from steadyrun.extensions import SubAgents
from steadyrun.service import Operations, Worker
from steadyrun.testing import ScriptedModel, text, tool_calls


async def eventually(check: Callable[[], Awaitable[bool]], what: str, seconds: float = 30) -> None:
    """Wait until ``check`` holds; the cap only keeps a broken run from hanging."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not await check():
        if loop.time() > end:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


def system_texts(request: sr.ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "system"]


@pytest.fixture(params=["memory", "sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[sr.Store, object]:
    if request.param == "memory":
        return sr.MemoryStore(), MemoryTaskStore()
    return sr.SqliteStore(tmp_path / "runs.db"), SqliteTaskStore(tmp_path / "tasks.db")


async def test_an_adopted_tasks_ending_wakes_its_run_for_a_worker(
    stores: tuple[sr.Store, object],
) -> None:
    # The task's watcher is started inside the run's execution; its notification must count
    # as a wake-up (not as the run's own write), or no worker would ever resume the run.
    store, task_store = stores
    reg = Registry()
    manager = TaskManager(task_store, store, [Build(reg)], lease=1.0, poll=0.02)  # type: ignore[arg-type]
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("started"), text("told")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    runtime = sr.Runtime(store, agents=[agent])
    async with manager:
        first = await runtime.run(agent, run_id="r", input="go")
        assert first.text == "started"
        worker = Worker(runtime, poll=0.05)
        working = asyncio.create_task(worker.run())
        reg.gate("r/m1.c1").set()

        async def told() -> bool:
            snap = await store.load("r")
            return snap is not None and snap.checkpoint.turn == 2 and snap.run.status == "completed"

        await eventually(told, "the worker resumes the run with its task's ending")
        worker.stop()
        await working
    assert "completed" in system_texts(model.requests[2])[0]
    await store.close()


async def test_a_sub_agents_task_is_adopted_and_its_ending_is_a_new_turn_of_the_child(
    stores: tuple[sr.Store, object],
) -> None:
    store, task_store = stores
    reg = Registry()
    manager = TaskManager(task_store, store, [Build(reg)], lease=1.0, poll=0.02)  # type: ignore[arg-type]
    model = ScriptedModel(
        [
            tool_calls(("delegate", {"task": "build the shop"})),  # parent
            tool_calls(("build", {"repo": "shop"})),  # child
            tool_calls(("task_status", {"task_id": "r/m1.c1/m1.c1"})),  # child: its own task
            text("started the build"),  # child: the delegation's result
            tool_calls(("task_status", {"task_id": "r/m1.c1/m1.c1"})),  # parent: not its own
            text("delegated"),  # parent: its first turn ends, the task going
            text("the shop is built"),  # child, in a new turn: the notification
            text("told"),  # parent, in a new turn: what the child answered
        ]
    )
    agent = sr.Agent(
        name="a", model=model, tools=manager.tools(), extensions=[SubAgents(), manager.recovery()]
    )
    runtime = sr.Runtime(store, agents=[agent])
    runtime.use_tasks(manager)
    async with manager:
        first = await runtime.run(agent, run_id="r", input="build the shop")
        # The child got the receipt and ended its turn; the delegation's result came at once.
        assert first.status == "completed" and first.text == "delegated"
        child = await store.load("r/m1.c1")
        assert child is not None and child.run.status == "completed"
        receipt = json.loads(child.calls[0].result or "")
        assert receipt["task_id"] == "r/m1.c1/m1.c1" and receipt["status"] == "running"
        assert (child.calls[1].result or "").startswith("task r/m1.c1/m1.c1 (build shop): running")
        parent = await store.load("r")
        assert parent is not None
        calls = {c.id: c for c in parent.calls}
        assert calls["m1.c1"].result == "started the build"
        assert calls["m2.c1"].status == "failed"  # a run sees only its own tasks
        assert calls["m1.c1/m1.c1"].parent_id == "m1.c1"  # the child's calls, copied
        (task,) = await manager.store.list_tasks("r/m1.c1")
        assert task.status == "running" and await manager.store.list_tasks("r") == []

        worker = Worker(runtime, poll=0.05)
        working = asyncio.create_task(worker.run())
        reg.gate("r/m1.c1/m1.c1").set()

        async def told() -> bool:
            snap = await store.load("r")
            return snap is not None and snap.checkpoint.turn == 2 and snap.run.status == "completed"

        await eventually(told, "the parent is told what its sub-agent answered")
        worker.stop()
        await working
    assert worker.stats.errors == 0
    child = await store.load("r/m1.c1")
    assert child is not None and child.run.status == "completed" and child.checkpoint.turn == 2
    assert [m.text for m in child.context if m.role == "assistant"][-1] == "the shop is built"
    ending = 'Background task r/m1.c1/m1.c1 (build shop) completed:\n{"built": "r/m1.c1/m1.c1"}'
    assert system_texts(model.requests[6]) == [ending]
    (note,) = system_texts(model.requests[7])
    assert note == sr.Texts().subagent_follow_up.format(call_id="m1.c1", text="the shop is built")
    parent = await store.load("r")
    assert parent is not None
    assert [m.text for m in parent.context if m.role == "assistant"][-1] == "told"
    assert reg.starts == {"r/m1.c1/m1.c1": 1}
    (task,) = await manager.store.list_tasks("r/m1.c1")
    assert task.status == "completed" and task.notified
    await store.close()


@sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Ship it?"), concurrency_key="")
def ship(what: str) -> str:
    """Ship something (after a person approves).

    Args:
        what: What to ship.
    """
    return f"shipped {what}"


async def test_cancelling_the_parent_stops_its_sub_agents_tasks() -> None:
    store, task_store = sr.MemoryStore(), MemoryTaskStore()
    reg = Registry()
    manager = TaskManager(task_store, store, [Build(reg)], lease=1.0, poll=0.02)
    model = ScriptedModel(
        [
            tool_calls(("delegate", {"task": "build the shop"})),
            tool_calls(("build", {"repo": "shop"})),
            text("started the build"),
            tool_calls(("ship", {"what": "shop"})),  # the parent waits for a decision
        ]
    )
    agent = sr.Agent(
        name="a", model=model, tools=[*manager.tools(), ship], extensions=[SubAgents()]
    )
    runtime = sr.Runtime(store, agents=[agent])
    async with manager:
        first = await runtime.run(agent, run_id="r", input="build and ship")
        assert first.status == "suspended"
        await Operations(store, tasks=task_store).cancel("r", by="ann")

        async def stopped() -> bool:
            (task,) = await task_store.list_tasks("r/m1.c1")
            return task.status == "cancelled"

        await eventually(stopped, "the sub-agent's task is cancelled with its parent")
    assert reg.stops == ["r/m1.c1/m1.c1"]
    parent = await store.load("r")
    assert parent is not None and parent.run.status == "cancelled"
