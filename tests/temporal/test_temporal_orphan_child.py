"""A terminated parent's abandoned child, and the parent's ``resume`` (issue 24 parity).

Delegations start their child workflow ``ABANDON``: a parent terminated (not cancelled)
while a delegation waits leaves the child running. A ``resume`` of the parent runs the
delegation again; on the built-in engine that goes on with the child run from the store.
Here the resumed parent takes the lingering child over (or, once the child ended, starts it
again from the store): the parent's answer is the child's, and no effect of the child repeats.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import Deps, effect, effects, last_results, rounds  # noqa: E402
from temporalio.client import WorkflowExecutionStatus  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions.subagents import Delegate, SubAgents  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions, TemporalRuns  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402


@sr.tool(side_effects=True, concurrency_key="")
def gated_charge(order_id: str, ctx: sr.ToolContext) -> str:
    """Charge an order once the gate opens (the test opens it).

    Args:
        order_id: The order.
    """
    deps: Deps = ctx.deps
    effect(deps, f"started {order_id}")
    gate = deps.effects.with_name("gate")
    while not gate.exists():
        time.sleep(0.05)
    effect(deps, f"charge {order_id}")
    return f"charged {order_id}"


def lead_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("delegate_charger", {"task": "Charge A-1"}))
    return text("lead: " + last_results(request))


def charger_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("gated_charge", {"order_id": "A-1"}))
    return text("child: " + last_results(request))


def build(tmp: Path, queue: str) -> TemporalApp:
    deps = Deps(effects=tmp / "fx")
    charger = Delegate(
        name="charger",
        description="Charges orders.",
        tools=[gated_charge],
        model=FunctionModel(charger_model),
    )
    subagents = SubAgents([charger], general=False)
    lead = sr.Agent(name="lead", model=FunctionModel(lead_model), extensions=[subagents], deps=deps)
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
    )
    return TemporalApp(agents=[lead], store=sr.SqliteStore(tmp / "runs.db"), options=options)


async def _terminated_mid_delegation(
    client: Any, runs: TemporalRuns, tmp: Path, run_id: str
) -> str:
    """Start the lead, terminate it while its child's charge waits; the child's run id."""
    handle = await runs.start("lead", run_id=run_id, input="Charge my order.")
    await eventually(lambda: asyncio.to_thread(effects, tmp / "fx"), lambda fx: bool(fx))
    await handle.terminate("an operator stopped it")  # the workflow fails mid-delegation
    children = [w.id async for w in client.list_workflows(f"WorkflowId STARTS_WITH '{run_id}/'")]
    (child,) = children
    described = await client.get_workflow_handle(child).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING  # abandoned, going on
    return str(child)


async def _waits_for_child(client: Any, run_id: str) -> bool:
    history = await client.get_workflow_handle(run_id).fetch_history()
    return any(
        e.activity_task_scheduled_event_attributes.activity_type.name == "steadyrun.subagent-end"
        for e in history.events
    )


async def _assert_once(tmp: Path, out: Any, run_id: str) -> None:
    assert out.status == "completed", out
    assert out.text == "lead: child: charged A-1"
    assert effects(tmp / "fx") == ["started A-1", "charge A-1"]  # nothing ran twice
    store = sr.SqliteStore(tmp / "runs.db")
    snap = await eventually(
        lambda: store.load(run_id), lambda s: s is not None and s.run.status == "completed"
    )
    await store.close()
    assert snap is not None
    # The delegation has the child's answer, and the child's charge under it, once.
    assert [(c.name, c.status, c.result) for c in snap.calls] == [
        ("delegate_charger", "succeeded", "child: charged A-1"),
        ("gated_charge", "succeeded", "charged A-1"),
    ]


async def test_a_resumed_parent_takes_over_its_lingering_child(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build(tmp_path, queue)
    runs = app.runs(client)
    run_id = f"orphan-{uuid.uuid4().hex[:8]}"
    async with app.worker(client):
        child = await _terminated_mid_delegation(client, runs, tmp_path, run_id)
        await runs.resume(run_id)
        # The resumed parent waits for the same child, not a second one.
        await eventually(lambda: _waits_for_child(client, run_id), lambda found: found)
        (tmp_path / "gate").touch()
        out = await asyncio.wait_for(runs.result(run_id), 60)
        history = await client.get_workflow_handle(run_id).fetch_history()
        child_history = await client.get_workflow_handle(child).fetch_history()
        child_runs = [w async for w in client.list_workflows(f"WorkflowId = '{child}'")]
    await _assert_once(tmp_path, out, run_id)
    assert len(child_runs) == 1  # taken over, never started again
    await app.replayer().replay_workflow(history)
    await app.replayer().replay_workflow(child_history)


async def test_a_resumed_parent_whose_child_ended_meanwhile_takes_its_stored_answer(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build(tmp_path, queue)
    runs = app.runs(client)
    run_id = f"orphan-{uuid.uuid4().hex[:8]}"
    async with app.worker(client):
        child = await _terminated_mid_delegation(client, runs, tmp_path, run_id)
        (tmp_path / "gate").touch()
        done = client.get_workflow_handle(child)
        await eventually(
            lambda: done.describe(), lambda d: d.status == WorkflowExecutionStatus.COMPLETED
        )
        await runs.resume(run_id)
        out = await asyncio.wait_for(runs.result(run_id), 60)
        history = await client.get_workflow_handle(run_id).fetch_history()
    await _assert_once(tmp_path, out, run_id)
    await app.replayer().replay_workflow(history)
