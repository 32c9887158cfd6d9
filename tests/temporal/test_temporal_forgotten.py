"""A run whose workflow Temporal forgot (the namespace's retention) goes on from the store.

On the built-in engine a completed run takes new input for as long as the store keeps it.
On Temporal a closed workflow is deleted after the namespace's retention; the app's store
still has the run, so new input (``TemporalRuns.send``) starts a workflow that continues the
run from its last step there, as for any ended run. An id neither Temporal nor the store
knows is still ``RunNotFoundError``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_parity_kit import build_parity_app  # noqa: E402
from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402
from steadyrun.temporal._quiet import forget  # noqa: E402


async def test_new_input_continues_a_run_whose_workflow_was_deleted(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = app.runs(client)  # with the app's store: a forgotten run is found there
    run_id = f"old-{uuid.uuid4().hex}"
    async with app.worker(client):
        first = await runs.run("chat", run_id=run_id, input="Hello.")
        assert first.status == "completed"
        await forget(client, run_id, settle=60.0)  # what retention does to a closed workflow
        with pytest.raises(sr.RunNotFoundError):
            await runs.status(run_id)  # Temporal has no workflow for it now
        with pytest.raises(sr.RunNotFoundError):  # a client without the store cannot know
            await TemporalRuns(client, task_queue=queue).send(run_id, "Hello?")
        sent = await runs.send(run_id, "And you?")
        assert sent is not None and sent.content == "And you?"
        second = await runs.result(run_id)
        await forget(client, run_id, settle=60.0)
        third = await runs.run("chat", run_id=run_id, input="Bye.")  # a start, as built-in
    assert second.status == "completed" and second.text == "turn 2: And you?"
    assert third.status == "completed" and third.text == "turn 3: Bye."
    store = sr.SqliteStore(tmp_path / "runs.db")
    try:
        snap = await store.load(run_id)
    finally:
        await store.close()
    assert snap is not None and snap.run.status == "completed"
    assert [m.text for m in snap.context if m.role == "user"] == ["Hello.", "And you?", "Bye."]


async def test_input_for_an_id_nobody_knows_is_run_not_found(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    async with app.worker(client):
        for runs in (app.runs(client), TemporalRuns(client, task_queue=queue)):
            with pytest.raises(sr.RunNotFoundError):
                await runs.send(f"never-{uuid.uuid4().hex}", "Hello?")


async def test_a_start_for_a_forgotten_run_of_another_agent_is_refused(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"mine-{uuid.uuid4().hex}"
    async with app.worker(client):
        assert (await runs.run("chat", run_id=run_id, input="Hello.")).status == "completed"
        await forget(client, run_id, settle=60.0)
        with pytest.raises(sr.UsageError, match="belongs to agent 'chat'"):
            await runs.run("wire", run_id=run_id, input="Wire 10.")
    store = sr.SqliteStore(tmp_path / "runs.db")
    try:
        snap = await store.load(run_id)
    finally:
        await store.close()
    assert snap is not None and snap.run.agent == "chat"  # its records untouched
    assert [m.id for m in snap.context if m.role == "user"] == [f"{run_id}:input"]
