"""Blobs of the large-payload codec are collected when their run ends, never while it lives."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import functools  # noqa: E402
import sqlite3  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import rounds  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402
from test_temporal_payloads import SIZE, export_logs  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.control import CallView, Confirm  # noqa: E402
from steadyrun.extensions.subagents import Delegate, SubAgents  # noqa: E402
from steadyrun.temporal import (  # noqa: E402
    FolderBlobs,
    LargePayloadCodec,
    SqliteBlobs,
    TemporalApp,
    TemporalOptions,
)
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402


def always(call: CallView) -> Confirm:
    return Confirm(prompt="Publish the export?")


@sr.tool(side_effects=True, policy=always, concurrency_key="")
def publish(day: str) -> str:
    """Publish a day's export.

    Args:
        day: The day.
    """
    return f"published {day}"


def model(request: ModelRequest) -> ModelResponse:
    n = rounds(request)
    if n == 0:
        return tool_calls(("export_logs", {"day": "2024-05-01"}))
    if n == 1:
        return tool_calls(("publish", {"day": "2024-05-01"}))
    return text("published")


def build(tmp: Path, queue: str, blobs: Any) -> tuple[TemporalApp, LargePayloadCodec]:
    agent = sr.Agent(name="exporter", model=FunctionModel(model), tools=[export_logs, publish])
    codec = LargePayloadCodec(blobs)
    options = TemporalOptions(
        task_queue=queue,
        payload_codec=codec,
        retry_interval=timedelta(milliseconds=200),
        heartbeat_timeout=timedelta(seconds=2),
        continue_as_new_after=12,  # the run continues as new carrying the large result
    )
    app = TemporalApp(agents=[agent], store=sr.SqliteStore(tmp / "runs.db"), options=options)
    return app, codec


def blob_count(kind: str, tmp: Path) -> int:
    if kind == "folder":
        root = tmp / "blobs"
        return sum(1 for p in root.glob("*/*") if not p.parts[-2].startswith("."))
    with sqlite3.connect(tmp / "blobs.db") as conn:
        return int(conn.execute("SELECT count(*) FROM steadyrun_blobs").fetchone()[0])


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
async def test_blobs_are_kept_while_runs_live_and_collected_when_they_end(
    temporal_server: Any, tmp_path: Path, kind: str
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    blobs = (
        FolderBlobs(tmp_path / "blobs") if kind == "folder" else SqliteBlobs(tmp_path / "blobs.db")
    )
    app, codec = build(tmp_path, queue, blobs)
    runs = app.runs(client)
    async with app.worker(client):
        first = await runs.start("exporter", run_id="gc-1", input="Export and publish May 1st.")
        pending = await eventually(lambda: runs.pending("gc-1"), lambda p: len(p) == 1)
        # The second run writes the same large result: the same blob, owned by both runs.
        await runs.start("exporter", run_id="gc-2", input="Export and publish May 1st.")
        await eventually(lambda: runs.pending("gc-2"), lambda p: len(p) == 1)
        stored = blob_count(kind, tmp_path)
        assert stored >= 1
        assert {"gc-1", "gc-2"} <= set(await blobs.owners())

        # Both runs live (suspended, after continuing as new with the result carried).
        latest = await client.get_workflow_handle("gc-1").describe()
        assert latest.run_id != first.first_execution_run_id  # gc-1 continued as new
        assert await codec.collect(client, grace=timedelta(0)) == 0
        assert blob_count(kind, tmp_path) == stored

        await runs.decide("gc-1", pending[0].call_id, approve=True)
        out = await first.result()
        assert out.status == "completed" and out.text == "published"
        assert out.generations >= 1  # it did continue as new with the blob in its input

        # Ended, but within the grace: kept, so its result and history still decode.
        assert await codec.collect(client) == 0
        assert (await runs.result("gc-1")).text == "published"
        history = await first.fetch_history()
        await app.replayer().replay_workflow(history)

        # Past the grace: gc-1 lets go of its blobs; the one gc-2 shares stays.
        await codec.collect(client, grace=timedelta(0))
        assert "gc-1" not in await blobs.owners()
        assert "gc-2" in await blobs.owners()
        assert 1 <= blob_count(kind, tmp_path) < stored

        # gc-2 goes on with its blobs, replays, and once it ends its blobs go too.
        (waiting,) = await runs.pending("gc-2")
        await runs.decide("gc-2", waiting.call_id, approve=True)
        out2 = await runs.result("gc-2")
        assert out2.status == "completed"
        history2 = await client.get_workflow_handle("gc-2").fetch_history()
        await app.replayer().replay_workflow(history2)
        assert await codec.collect(client, grace=timedelta(0)) >= 1
        assert blob_count(kind, tmp_path) == 0
        assert await blobs.owners() == []


async def test_collect_for_a_deleted_run_only_touches_that_run(
    temporal_server: Any, tmp_path: Path
) -> None:
    """After deleting a run, ``collect(runs=[id])`` frees its blobs at once; others keep theirs."""
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    blobs = SqliteBlobs(tmp_path / "blobs.db")
    app, codec = build(tmp_path, queue, blobs)
    runs = app.runs(client)
    async with app.worker(client):
        for run_id in ("del-1", "del-2"):
            await runs.start("exporter", run_id=run_id, input="Export and publish May 1st.")
            (item,) = await eventually(
                functools.partial(runs.pending, run_id), lambda p: len(p) == 1
            )
            await runs.decide(run_id, item.call_id, approve=True)
            assert (await runs.result(run_id)).status == "completed"
        stored = blob_count("sqlite", tmp_path)
        assert await codec.collect(client, grace=timedelta(0), runs=["del-1"]) >= 1
        assert await blobs.owners() == ["del-2"]
        # The tool result both runs wrote is one blob, still del-2's.
        assert 1 <= blob_count("sqlite", tmp_path) < stored
        assert await codec.collect(client, grace=timedelta(0), runs=["del-2"]) >= 1
        assert blob_count("sqlite", tmp_path) == 0
    assert SIZE > 128 * 1024  # the export is above the codec's threshold


def lead_model(request: ModelRequest) -> ModelResponse:
    n = rounds(request)
    if n == 0:
        return tool_calls(("delegate_exporter", {"task": "Export May 1st."}))
    if n == 1:
        return tool_calls(("publish", {"day": "2024-05-01"}))
    return text("published")


def child_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("export_logs", {"day": "2024-05-01"}))
    return text("exported")


async def test_a_closed_childs_blobs_stay_while_its_parent_lives(
    temporal_server: Any, tmp_path: Path
) -> None:
    """The parent's history holds its child's input and result: they go with the parent."""
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    blobs = SqliteBlobs(tmp_path / "blobs.db")
    codec = LargePayloadCodec(blobs)
    subagents = SubAgents(
        [
            Delegate(
                name="exporter",
                description="Exports logs.",
                tools=[export_logs],
                model=FunctionModel(child_model),
            )
        ],
        general=False,
    )
    lead = sr.Agent(
        name="lead", model=FunctionModel(lead_model), tools=[publish], extensions=[subagents]
    )
    options = TemporalOptions(
        task_queue=queue,
        payload_codec=codec,
        retry_interval=timedelta(milliseconds=200),
        heartbeat_timeout=timedelta(seconds=2),
    )
    app = TemporalApp(agents=[lead], store=sr.SqliteStore(tmp_path / "runs.db"), options=options)
    runs = app.runs(client)
    async with app.worker(client):
        handle = await runs.start("lead", run_id="lead-gc", input="Export and publish.")
        (item,) = await eventually(lambda: runs.pending("lead-gc"), lambda p: len(p) == 1)
        owners = await blobs.owners()
        (child,) = [o for o in owners if o.startswith("lead-gc/")]
        child_desc = await client.get_workflow_handle(child).describe()
        assert child_desc.close_time is not None  # the child ended; its parent waits
        stored = blob_count("sqlite", tmp_path)

        assert await codec.collect(client, grace=timedelta(0)) == 0
        assert child in await blobs.owners()
        assert blob_count("sqlite", tmp_path) == stored

        await runs.decide("lead-gc", item.call_id, approve=True)
        assert (await handle.result()).text == "published"
        await app.replayer().replay_workflow(await handle.fetch_history())
        assert await codec.collect(client, grace=timedelta(0)) >= 1
        assert await blobs.owners() == []
        assert blob_count("sqlite", tmp_path) == 0
