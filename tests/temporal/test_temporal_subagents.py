"""Sub-agents on Temporal: delegations run as child workflows; cancellation follows parent/child."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import last_results, lookup_order, rounds  # noqa: E402
from temporalio.client import WorkflowExecutionStatus  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions.subagents import Delegate, SubAgents  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402


@sr.tool(concurrency_key="")
async def wait_for_bank(order_id: str) -> str:
    """Wait for the bank (a long time).

    Args:
        order_id: The order.
    """
    await asyncio.sleep(3600)
    return "never"


def lead_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        task = "Find order A-1" if "look" in request.messages[-1].text.lower() else "Wait"
        name = "delegate_researcher" if task.startswith("Find") else "delegate_waiter"
        return tool_calls((name, {"task": task}))
    return text("lead: " + last_results(request))


def researcher_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("lookup_order", {"order_id": "A-1"}))
    return text("found " + last_results(request))


def waiter_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("wait_for_bank", {"order_id": "A-1"}))
    return text("waited")


def build(tmp: Path, queue: str) -> TemporalApp:
    subagents = SubAgents(
        [
            Delegate(
                name="researcher",
                description="Researches orders.",
                tools=[lookup_order],
                model=FunctionModel(researcher_model),
            ),
            Delegate(
                name="waiter",
                description="Waits for the bank.",
                tools=[wait_for_bank],
                model=FunctionModel(waiter_model),
            ),
        ],
        general=False,
    )
    lead = sr.Agent(name="lead", model=FunctionModel(lead_model), extensions=[subagents])
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
    )
    return TemporalApp(agents=[lead], store=sr.SqliteStore(tmp / "runs.db"), options=options)


async def test_a_delegation_runs_as_a_child_workflow(temporal_server: Any, tmp_path: Path) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build(tmp_path, queue)
    assert app.agent("lead.researcher").name == "lead.researcher"  # registered by name
    runs = app.runs(client)
    async with app.worker(client):
        handle = await runs.start("lead", run_id="lead-1", input="Look up my order.")
        out = await handle.result()
        history = await handle.fetch_history()
        store = sr.SqliteStore(tmp_path / "runs.db")
        snap = await store.load("lead-1")
        assert snap is not None
        (delegation,) = [c for c in snap.calls if c.parent_id is None]
        child_id = f"lead-1/{delegation.id}"
        child = await client.get_workflow_handle(child_id).describe()
        child_snap = await store.load(child_id)
        await store.close()

    expected = "found " + '{"id": "A-1", "charged_cents": 9998}'
    assert out.status == "completed" and out.text == "lead: " + expected
    # The child is a workflow of its own, started by the run's workflow.
    assert child.parent_id == "lead-1" and child.status == WorkflowExecutionStatus.COMPLETED
    assert child.workflow_type == "steadyrun.AgentWorkflow"
    # Records: the child run under its own id, its calls copied under the delegation call.
    assert delegation.name == "delegate_researcher" and delegation.status == "succeeded"
    assert delegation.result == expected
    (sub,) = [c for c in snap.calls if c.parent_id == delegation.id]
    assert sub.name == "lookup_order" and sub.status == "succeeded"
    assert sub.id.startswith(f"{delegation.id}/")
    assert child_snap is not None and child_snap.run.status == "completed"
    assert child_snap.run.agent == "lead.researcher" and child_snap.run.text == expected
    await app.replayer().replay_workflow(history)


async def test_cancelling_the_parent_cancels_the_child(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build(tmp_path, queue)
    runs = app.runs(client)
    store = sr.SqliteStore(tmp_path / "runs.db")
    async with app.worker(client):
        handle = await runs.start("lead", run_id="lead-2", input="Wait for the bank.")

        async def child_running() -> str | None:
            snap = await store.load("lead-2")
            if snap is None or not snap.calls:
                return None
            child = await store.load(f"lead-2/{snap.calls[0].id}")
            running = child is not None and any(c.status == "running" for c in child.calls)
            return child.run.run_id if running and child is not None else None

        child_id = await eventually(child_running, lambda found: found is not None)
        assert child_id is not None
        await runs.cancel("lead-2")
        with pytest.raises(sr.RunCancelledError):
            await handle.result()
        child = client.get_workflow_handle(child_id)
        await eventually(
            lambda: child.describe(), lambda d: d.status == WorkflowExecutionStatus.CANCELED
        )
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        # The store shows both runs cancelled, with their open calls settled.
        parent_snap = await eventually(
            lambda: store.load("lead-2"), lambda s: s is not None and s.run.status == "cancelled"
        )
        child_snap = await eventually(
            lambda: store.load(child_id), lambda s: s is not None and s.run.status == "cancelled"
        )
        history = await handle.fetch_history()
    await store.close()
    await app.replayer().replay_workflow(history)  # the cancellation replays too
    assert parent_snap is not None and child_snap is not None
    assert [c.status for c in parent_snap.calls] == ["cancelled"]
    assert [(c.name, c.status) for c in child_snap.calls] == [("wait_for_bank", "cancelled")]
