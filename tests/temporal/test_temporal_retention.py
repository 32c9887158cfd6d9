"""Retention on Temporal: ended runs past their time go with their workflow history and blobs.

``Operations(..., engine=TemporalEngine(...)).apply_retention`` deletes a due run as the
engine's ``delete`` does (store rows, workflow history, the large-payload codec's blobs), and
a ``TemporalEngine(retention=...)`` makes those passes itself while its app is open, as a
built-in ``Worker(retention=...)`` does. Runs that are not due, or that still wait, stay.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")
pytest.importorskip("fastapi", reason="the service extra is not installed")

import functools  # noqa: E402
import json  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_bg_kit import build_app as build_bg_app  # noqa: E402
from temporal_kit import effects  # noqa: E402
from temporal_parity_kit import Deps, parity_agents  # noqa: E402
from temporalio.service import RPCError, RPCStatusCode  # noqa: E402
from test_temporal_blob_gc import build  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.service import App, Operations, Retention  # noqa: E402
from steadyrun.temporal import SqliteBlobs, TemporalEngine  # noqa: E402


async def _pending(app: App, run_id: str) -> list[Any]:
    try:
        return await app.runtime.pending(run_id)
    except sr.RunNotFoundError:
        return []  # started, not recorded yet


async def _status(app: App, run_id: str) -> str | None:
    snap = await app.store.load(run_id)
    return snap.run.status if snap is not None else None


async def _gone(client: Any, run_id: str) -> bool:
    try:
        await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    return False


async def test_a_pass_deletes_ended_runs_with_their_workflow_and_blobs(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    blobs = SqliteBlobs(tmp_path / "blobs.db")
    worker, codec = build(tmp_path, queue, blobs)
    engine = TemporalEngine(client, task_queue=queue, payload_codec=codec, worker=worker)
    app = App(worker.store, agents=[worker.agent("exporter")], engine=engine)
    ended, waiting = f"ret-{uuid.uuid4().hex[:8]}", f"ret-{uuid.uuid4().hex[:8]}"
    try:
        for run_id in (ended, waiting):
            await app.start(run_id, "exporter", "Export and publish May 1st.")
            await eventually(functools.partial(_pending, app, run_id), lambda p: len(p) == 1)
        (decision,) = await app.runtime.pending(ended)
        await app.decide(ended, decision.call_id, approve=True)
        await eventually(lambda: _status(app, ended), lambda s: s == "completed")
        assert {ended, waiting} <= set(await blobs.owners())

        ops = Operations(app.runtime, engine=app.engine)
        done = await ops.apply_retention(Retention(older_than=timedelta(0)))

        assert done.deleted == [ended] and done.busy == [], done
        assert await app.store.load(ended) is None
        # Its history too (Temporal deletes it in the background): the id can start anew.
        await eventually(lambda: _gone(client, ended), bool)
        assert await blobs.owners() == [waiting]  # its blobs went, the waiting run's stay
        assert await _status(app, waiting) == "suspended"
        again = await ops.apply_retention(Retention(older_than=timedelta(0)))
        assert again.deleted == [] and again.busy == []
        later = await ops.apply_retention(Retention(older_than=timedelta(days=1)))
        assert later.deleted == []
    finally:
        await app.close()
        await worker.store.close()


async def test_the_engine_makes_retention_passes_while_its_app_is_open(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    store = sr.SqliteStore(tmp_path / "runs.db")
    policy = Retention(older_than=timedelta(seconds=1), every=0.2)
    engine = TemporalEngine(client, task_queue=queue, worker=True, retention=policy)
    app = App(store, agents=parity_agents(Deps(effects=tmp_path / "fx")), engine=engine)
    run_id = f"chat-{uuid.uuid4().hex[:8]}"
    try:
        await app.start(run_id, "chat", "Hello.")
        await eventually(lambda: store.load(run_id), lambda s: s is not None)
        # Gone once its last activity is a second old: the store's rows and the workflow.
        await eventually(lambda: store.load(run_id), lambda s: s is None)
        await eventually(lambda: _gone(client, run_id), bool)
        assert engine.retained == 1
    finally:
        await app.close()
        await store.close()


async def test_a_run_whose_background_task_goes_on_is_kept_until_the_task_ended(
    temporal_server: Any, tmp_path: Path
) -> None:
    # As a task a built-in worker runs holds its run's delete back.
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    jobs, fx = tmp_path / "jobs", tmp_path / "fx"
    jobs.mkdir()
    worker = build_bg_app(tmp_path / "runs.db", jobs, fx, task_queue=queue, adopt=True)
    engine = TemporalEngine(client, task_queue=queue, worker=worker)
    app = App(worker.store, agents=[worker.agent("builder")], engine=engine)
    run_id = f"bg-{uuid.uuid4().hex[:8]}"
    ops = Operations(app.runtime, engine=app.engine)
    policy = Retention(older_than=timedelta(0))
    try:
        await app.start(run_id, "builder", "Build the app.")
        # The receipt ended the turn (completed) while the build goes on in the background.
        await eventually(lambda: _status(app, run_id), lambda s: s == "completed")
        (job,) = [line.split()[1] for line in effects(fx) if line.startswith("start ")]
        with pytest.raises(sr.RunBusyError):
            await ops.delete(run_id)
        done = await ops.apply_retention(policy)
        assert done.deleted == [] and done.busy == [run_id], done

        (jobs / f"{job}.done").write_text(json.dumps({"artifact": "app.tar"}))
        await eventually(lambda: _closed(client, run_id), bool)  # told, a new turn, ended
        done = await ops.apply_retention(policy)
        assert done.deleted == [run_id], done
    finally:
        await app.close()
        await worker.store.close()


async def _closed(client: Any, run_id: str) -> bool:
    described = await client.get_workflow_handle(run_id).describe()
    return described.close_time is not None
