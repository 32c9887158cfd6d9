"""Background tools on Temporal: a heartbeating activity, recovered after a SIGKILLed worker."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_bg_kit import build_app  # noqa: E402
from temporal_kit import effects  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402

WORKER = Path(__file__).with_name("temporal_bg_worker.py")


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def start_worker(
    server: Any, queue: str, tmp: Path, *, adopt: bool = False
) -> subprocess.Popen[str]:
    args = [server.target, queue, str(tmp / "runs.db"), str(tmp / "jobs"), str(tmp / "fx")]
    args += ["adopt"] if adopt else []
    proc = subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker polls (or dies)
    assert line.strip() == "ready", f"worker did not start: {line!r}"
    return proc


async def heartbeat_details(handle: Any) -> list[Any]:
    """The checkpoints the pending background activity heartbeated (raw JSON payloads)."""
    desc = await handle.describe()
    out = []
    for pending in desc.raw_description.pending_activities:
        for payload in pending.heartbeat_details.payloads:
            out.append(json.loads(payload.data))
    return out


async def test_a_background_operation_is_recovered_after_its_worker_is_killed(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    (tmp_path / "jobs").mkdir()
    runs = build_app(tmp_path / "runs.db", tmp_path / "jobs", tmp_path / "fx", task_queue=queue)
    first = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path)
    second = None
    try:
        handle = await runs.runs(client).start("builder", run_id="build-1", input="Build it.")
        # The operation started in the first worker and its checkpoint reached Temporal.
        details = await eventually(lambda: heartbeat_details(handle), bool)
        job = details[0]["job"]
        assert effects(tmp_path / "fx") == [f"start {job} app"]
        kill(first)
        second = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path)
        # The second worker re-attaches to the same job from the heartbeat's checkpoint.
        await eventually(lambda: asyncio.to_thread(effects, tmp_path / "fx"), lambda f: len(f) > 1)
        (tmp_path / "jobs" / f"{job}.done").write_text(json.dumps({"artifact": "app.tar"}))
        out = await asyncio.wait_for(handle.result(), 180)  # a cap against hanging, not a limit
    finally:
        kill(first)
        if second is not None:
            kill(second)

    assert out.status == "completed"
    assert out.text == 'built: {"artifact": "app.tar"}'
    # Started once; recovered (not started again) on a later attempt.
    start, recover = effects(tmp_path / "fx")
    assert start == f"start {job} app"
    assert recover.startswith(f"recover {job} attempt=") and not recover.endswith("=1")
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load("build-1")
    await store.close()
    assert snap is not None and snap.run.status == "completed"
    (call,) = snap.calls
    assert call.name == "build" and call.status == "succeeded"


async def test_an_adopted_task_survives_a_killed_worker_and_the_run_is_told_once(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    (tmp_path / "jobs").mkdir()
    runs = build_app(
        tmp_path / "runs.db", tmp_path / "jobs", tmp_path / "fx", task_queue=queue, adopt=True
    )
    first = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path, adopt=True)
    second = None
    store = sr.SqliteStore(tmp_path / "runs.db")
    try:
        handle = await runs.runs(client).start("builder", run_id="build-2", input="Build it.")

        async def first_turn() -> Any:
            return await store.load("build-2")

        # The call was adopted: its receipt ended the first turn while the operation runs.
        snap = await eventually(first_turn, lambda s: s is not None and s.run.status == "completed")
        (call,) = snap.calls
        assert json.loads(call.result or "")["task_id"] == "build-2/m1.c1"
        details = await eventually(lambda: heartbeat_details(handle), bool)
        job = details[0]["job"]
        kill(first)
        second = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path, adopt=True)
        await eventually(lambda: asyncio.to_thread(effects, tmp_path / "fx"), lambda f: len(f) > 1)
        (tmp_path / "jobs" / f"{job}.done").write_text(json.dumps({"artifact": "app.tar"}))
        out = await asyncio.wait_for(handle.result(), 180)  # a cap against hanging, not a limit
        snap = await store.load("build-2")
    finally:
        kill(first)
        if second is not None:
            kill(second)
        await store.close()

    assert out.status == "completed"
    note = 'Background task build-2/m1.c1 (build) completed:\n{"artifact": "app.tar"}'
    assert out.text == "told: " + note
    start, recover = effects(tmp_path / "fx")
    assert start == f"start {job} app" and recover.startswith(f"recover {job} attempt=")
    assert snap is not None and snap.run.status == "completed"
    told = [m for m in snap.context if m.role == "system" and m.text == note]
    assert len(told) == 1  # the ending reached the run once
