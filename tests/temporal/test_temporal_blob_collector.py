"""Blobs collected by a process, not a call you schedule: the codec's collector and the engine's."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from test_temporal_blob_gc import blob_count, build  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.service import App  # noqa: E402
from steadyrun.temporal import FolderBlobs, LargePayloadCodec, TemporalEngine  # noqa: E402
from steadyrun.temporal._blobtypes import BlobStore  # noqa: E402

EVERY = timedelta(milliseconds=200)


def fresh(name: str) -> str:
    # Workflow ids are the namespace's, and the dev server is shared by every test module.
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def test_a_collector_frees_a_runs_blobs_after_it_ends_and_keeps_a_live_runs(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    blobs = FolderBlobs(tmp_path / "blobs")
    app, codec = build(tmp_path, f"q-{uuid.uuid4().hex}", blobs)
    runs = app.runs(client)
    one, two = fresh("collected"), fresh("kept")
    async with app.worker(client), codec.collecting(client, every=EVERY, grace=EVERY) as gc:
        first = await runs.start("exporter", run_id=one, input="Export and publish May 1st.")
        pending = await eventually(lambda: runs.pending(one), lambda p: len(p) == 1)
        await runs.start("exporter", run_id=two, input="Export and publish May 2nd.")
        await eventually(lambda: runs.pending(two), lambda p: len(p) == 1)
        passes = gc.passes
        await eventually(lambda: _passes(gc), lambda n: n >= passes + 3)
        assert {one, two} <= set(await blobs.owners())  # live runs keep theirs
        kept = blob_count("folder", tmp_path)

        await runs.decide(one, pending[0].call_id, approve=True)
        assert (await first.result()).text == "published"
        # Nobody calls collect: the collector lets the first go once its grace passed.
        await eventually(blobs.owners, lambda owners: one not in owners)
        assert two in await blobs.owners()
        assert 0 < blob_count("folder", tmp_path) <= kept
        assert gc.collected >= 1 and gc.last_error is None
    stopped = gc.passes
    assert gc.passes == stopped  # closed: no pass after the block


async def _passes(gc: Any) -> int:
    return int(gc.passes)


async def test_a_collector_reports_a_failing_pass_and_goes_on(
    temporal_server: Any, tmp_path: Path
) -> None:
    class Broken(FolderBlobs):
        calls = 0

        async def owners(self) -> list[str]:
            Broken.calls += 1
            if Broken.calls == 1:
                raise OSError("the blob folder is not mounted")
            return await super().owners()

    client = await connect(temporal_server)
    codec = LargePayloadCodec(Broken(tmp_path / "blobs"))
    async with codec.collecting(client, every=EVERY) as gc:
        await eventually(lambda: _passes(gc), lambda n: n >= 2)
    assert gc.failures == 1 and gc.last_error is None  # the next pass went through


def test_a_collector_refuses_a_store_without_owners_and_a_zero_interval(tmp_path: Path) -> None:
    class Plain(BlobStore):
        async def put(self, key: str, data: bytes) -> None: ...

        async def get(self, key: str) -> bytes:
            raise KeyError(key)

    with pytest.raises(sr.UsageError, match="keeps no owners"):
        LargePayloadCodec(Plain()).collecting(object(), every=EVERY)  # type: ignore[arg-type]
    codec = LargePayloadCodec(FolderBlobs(tmp_path / "blobs"))
    with pytest.raises(sr.UsageError, match="every"):
        codec.collecting(object(), every=timedelta(0))  # type: ignore[arg-type]
    with pytest.raises(sr.UsageError, match="LargePayloadCodec"):
        TemporalEngine("localhost:7233", collect_blobs_every=EVERY)


async def test_the_engine_collects_while_the_app_is_open(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    blobs = FolderBlobs(tmp_path / "blobs")
    app, codec = build(tmp_path, f"q-{uuid.uuid4().hex}", blobs)
    engine = TemporalEngine(
        client,
        task_queue=app.options.task_queue,
        payload_codec=codec,
        worker=app,
        collect_blobs_every=EVERY,
        blob_grace=EVERY,
    )
    assert app.store is not None
    host = App(app.store, agents=app.agents, engine=engine)
    await host.open()
    try:
        runs = app.runs(client)
        run = fresh("engine")
        await runs.start("exporter", run_id=run, input="Export and publish May 1st.")
        pending = await eventually(lambda: runs.pending(run), lambda p: len(p) == 1)
        await runs.decide(run, pending[0].call_id, approve=True)
        assert (await runs.result(run)).text == "published"
        await eventually(blobs.owners, lambda owners: run not in owners)
        collector = engine.blob_collector
        assert collector is not None and collector.collected >= 1
    finally:
        await host.close()
        await app.store.close()
    assert engine.blob_collector is None  # stopped with the app
