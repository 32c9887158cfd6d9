"""A delegation in flight when the parent continues as new: the child runs once, its result once."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import last_results, rounds  # noqa: E402
from temporalio.client import WorkflowExecutionStatus  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions.subagents import Delegate, SubAgents  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402

RAN: list[str] = []


@sr.tool(concurrency_key="")
async def slow_survey(topic: str) -> str:
    """Survey a topic (takes a while).

    Args:
        topic: The topic.
    """
    RAN.append(topic)
    await asyncio.sleep(3)
    return f"survey of {topic}"


@sr.tool(concurrency_key="")
def note(text: str) -> str:
    """Take a note.

    Args:
        text: The note.
    """
    return f"noted {text}"


def lead_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        # The note settles while the delegation runs: the parent saves records meanwhile.
        return tool_calls(
            ("delegate_surveyor", {"task": "Survey tides"}), ("note", {"text": "started"})
        )
    if rounds(request) == 1:
        return tool_calls(("note", {"text": "done"}))
    return text("lead: " + last_results(request))


def surveyor_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("slow_survey", {"topic": "tides"}))
    return text(last_results(request))


def build(tmp: Path, queue: str) -> TemporalApp:
    subagents = SubAgents(
        [
            Delegate(
                name="surveyor",
                description="Surveys topics.",
                tools=[slow_survey],
                model=FunctionModel(surveyor_model),
            )
        ],
        general=False,
    )
    lead = sr.Agent(
        name="lead", model=FunctionModel(lead_model), tools=[note], extensions=[subagents]
    )
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
        continue_as_new_after=3,  # every step of the parent asks to continue as new
    )
    return TemporalApp(agents=[lead], store=sr.SqliteStore(tmp / "runs.db"), options=options)


async def test_a_delegation_in_flight_survives_continue_as_new(
    temporal_server: Any, tmp_path: Path
) -> None:
    RAN.clear()
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build(tmp_path, queue)
    async with app.worker(client):
        handle = await app.runs(client).start("lead", run_id="can-1", input="Survey the tides.")
        out = await handle.result()
        store = sr.SqliteStore(tmp_path / "runs.db")
        snap = await store.load("can-1")
        await store.close()
        assert snap is not None
        (delegation,) = [c for c in snap.calls if c.name == "delegate_surveyor"]
        child_id = f"can-1/{delegation.id}"
        child_runs = await eventually(
            lambda: _runs_of(client, child_id),
            lambda found: any(r.status == WorkflowExecutionStatus.COMPLETED for r in found),
        )
        parent_runs = await eventually(
            lambda: _runs_of(client, "can-1"),
            lambda found: (
                len(found) == out.generations + 1 and all(r.close_time is not None for r in found)
            ),
        )
        first_child = await client.get_workflow_handle(
            child_id, run_id=min(child_runs, key=lambda r: r.start_time).run_id
        ).describe()
        child_parent_run = first_child.parent_run_id

    assert out.status == "completed" and out.text == "lead: noted done"
    assert out.generations >= 1  # the parent did continue as new
    # The child ran once and completed (continuing as new itself on the way, which its parent
    # follows): nothing cancelled, nothing requeued.
    assert RAN == ["tides"]
    statuses = sorted(r.status for r in child_runs)
    assert statuses.count(WorkflowExecutionStatus.COMPLETED) == 1
    assert set(statuses) <= {
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.CONTINUED_AS_NEW,
    }
    # The parent run that started the child continued as new only after the child had ended.
    (starter,) = [r for r in parent_runs if r.run_id == child_parent_run]
    assert starter.status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    assert starter.close_time >= max(r.close_time for r in child_runs)
    assert delegation.status == "succeeded" and delegation.result == "survey of tides"
    subs = [c for c in snap.calls if c.parent_id == delegation.id]
    assert [(c.name, c.status) for c in subs] == [("slow_survey", "succeeded")]
    # Each tool result reached the model once.
    assert [c.name for c in snap.calls if c.parent_id is None].count("delegate_surveyor") == 1


async def _runs_of(client: Any, workflow_id: str) -> list[Any]:
    return [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
