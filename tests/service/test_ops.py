"""Operations: idempotent start, one successor per completed run, cancelling a run tree."""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun import ConflictError, RunCancelledError
from steadyrun.control import CallView, Confirm
from steadyrun.service._ops import Operations
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text, tool_calls


def _confirm(call: CallView) -> Confirm:
    return Confirm(prompt=f"Ship {call.arguments['item']}?")


@sr.tool(side_effects=True, policy=_confirm)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    return f"shipped {item}"


def _respond(request: sr.ModelRequest) -> sr.ModelResponse:
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    if not any(m.role == "tool" for m in request.messages[last_user:]):
        return tool_calls(("ship", {"item": request.messages[last_user].text}))
    users = [m.text for m in request.messages if m.role == "user"]
    return text("done: " + ", ".join(users))


def _agent() -> sr.Agent:
    return sr.Agent(name="shipper", model=FunctionModel(_respond), tools=[ship])


async def _approve_all(ops: Operations, run_id: str) -> None:
    for item in await ops.runtime.pending(run_id):
        await ops.runtime.decide(run_id, item.call_id, approve=True)


async def test_start_is_idempotent_and_conflicts_on_a_different_request() -> None:
    ops = Operations(MemoryStore(), agents=[_agent()])
    first = await ops.start("r1", "shipper", "a book")
    assert first.created
    again = await ops.start("r1", "shipper", "a book")
    assert not again.created
    with pytest.raises(ConflictError):
        await ops.start("r1", "shipper", "a lamp")
    await ops.drive("r1")
    assert (await ops.start("r1", "shipper", "a book")).status == "suspended"
    with pytest.raises(ConflictError):
        await ops.start("r1", "shipper", "a lamp")
    await _approve_all(ops, "r1")
    await ops.drive("r1")
    assert (await ops.start("r1", "shipper", "a book")).status == "completed"
    with pytest.raises(sr.UsageError):
        await ops.start("r2", "nobody", "a book")


async def test_a_run_started_otherwise_conflicts() -> None:
    store = MemoryStore()
    ops = Operations(store, agents=[_agent()])
    await ops.runtime.run(_agent_of(ops), run_id="r1", input="a book")
    with pytest.raises(ConflictError):
        await ops.start("r1", "shipper", "a book")


def _agent_of(ops: Operations) -> sr.Agent:
    return ops.agent("shipper")


async def test_a_completed_run_has_one_successor_with_its_history() -> None:
    ops = Operations(MemoryStore(), agents=[_agent()])
    await ops.start("r1", "shipper", "a book")
    await ops.drive("r1")
    with pytest.raises(sr.NotPendingError):
        await ops.continue_run("r1", "r2", "a lamp")  # not completed yet
    await _approve_all(ops, "r1")
    await ops.drive("r1")
    started = await ops.continue_run("r1", "r2", "a lamp")
    assert started.created
    assert not (await ops.continue_run("r1", "r2", "a lamp")).created  # the same request
    with pytest.raises(ConflictError):
        await ops.continue_run("r1", "r3", "a lamp")  # a second successor
    with pytest.raises(ConflictError):
        await ops.continue_run("r1", "r2", "a chair")  # another input for it
    await ops.drive("r2")
    await _approve_all(ops, "r2")
    await ops.drive("r2")
    pred = await ops.store.load("r1")
    succ = await ops.store.load("r2")
    assert pred is not None and succ is not None
    assert succ.run.status == "completed"
    assert succ.run.text == "done: a book, a lamp"
    assert [m.text for m in succ.context[: len(pred.context)]] == [m.text for m in pred.context]
    assert (await ops.start("r2", "shipper", "a lamp", extra={"continues": "r1"})).run_id == "r2"


async def test_cancel_settles_open_calls_and_refuses_resume() -> None:
    ops = Operations(MemoryStore(), agents=[_agent()])
    await ops.start("r1", "shipper", "a book")
    await ops.drive("r1")
    [item] = await ops.runtime.pending("r1")
    done = await ops.cancel("r1")
    assert done.runs == ["r1"] and done.calls == [("r1", item.call_id)]
    snap = await ops.store.load("r1")
    assert snap is not None and snap.run.status == "cancelled"
    assert [c.status for c in snap.calls] == ["cancelled"]
    assert await ops.runtime.pending("r1") == []
    with pytest.raises(RunCancelledError):
        await ops.runtime.resume("r1")
    assert (await ops.cancel("r1")).runs == []  # again: nothing changes
    await ops.drive("r1")  # a worker leaves it alone
    with pytest.raises(sr.RunNotFoundError):
        await ops.cancel("nope")


async def test_cancel_cancels_sub_agent_runs() -> None:
    store = MemoryStore()
    ops = Operations(store, agents=[_agent()])
    await ops.start("r1", "shipper", "a book")
    await ops.drive("r1")
    [item] = await ops.runtime.pending("r1")
    # A sub-agent run of the open call, as a delegation would have left it.
    child = f"r1/{item.call_id}"
    await ops.runtime.run(_agent_of(ops), run_id=child, input="a lamp")
    done = await ops.cancel("r1")
    assert done.runs == [child, "r1"]
    snap = await store.load(child)
    assert snap is not None and snap.run.status == "cancelled"
    assert all(c.status == "cancelled" for c in snap.calls)


async def test_a_run_started_but_not_executed_yet_can_be_cancelled() -> None:
    store = MemoryStore()
    ops = Operations(store, agents=[_agent()])
    await ops.start("w-1", "shipper", "a lamp")
    done = await ops.cancel("w-1")
    assert done.runs == ["w-1"]
    snap = await store.load("w-1")
    assert snap is not None and snap.run.status == "cancelled" and snap.run.agent == "shipper"
    with pytest.raises(RunCancelledError):
        await ops.runtime.resume("w-1")
    with pytest.raises(sr.RunNotFoundError):
        await ops.cancel("never-started")


async def test_cancel_stops_the_runs_background_tasks() -> None:
    from steadyrun.background import MemoryTaskStore, Task

    store, tasks = MemoryStore(), MemoryTaskStore()
    ops = Operations(store, agents=[_agent()], tasks=tasks)
    await ops.start("b-1", "shipper", "a desk")
    await ops.drive("b-1")
    await tasks.insert(Task(id="b-1/x", run_id="b-1", call_id="x", tool="build", arguments="{}"))
    await tasks.insert(Task(id="b-2/y", run_id="b-2", call_id="y", tool="build", arguments="{}"))
    await ops.cancel("b-1")
    mine, other = await tasks.get("b-1/x"), await tasks.get("b-2/y")
    assert mine is not None and mine.cancel_requested
    assert other is not None and not other.cancel_requested
