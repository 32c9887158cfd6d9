"""A worker SIGKILLed in a side-effecting tool or a model call is replaced; nothing runs twice."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import effects  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402

WORKER = Path(__file__).with_name("temporal_worker.py")


def start_worker(server: Any, queue: str, tmp: Path, mode: str = "block") -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            *(str(WORKER), server.target, queue, str(tmp / "runs.db"), str(tmp / "fx"), mode),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker polls (or dies)
    assert line.strip() == "ready", f"worker did not start: {line!r}"
    return proc


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


async def test_killed_worker_is_replaced_without_repeating_side_effects(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    runs = TemporalRuns(client, task_queue=queue)
    first = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path)
    second = None
    try:
        handle = await runs.start("crash", run_id="crash-1", input="Refund A-9.")
        # The refund's activity is running in the first worker: it wrote its effect and waits.
        await eventually(lambda: asyncio.to_thread(effects, tmp_path / "fx"), bool)
        kill(first)
        second = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path)
        out = await asyncio.wait_for(handle.result(), 180)  # a cap against hanging, not a limit
    finally:
        kill(first)
        if second is not None:
            kill(second)

    assert out.status == "completed"
    # The side effect happened once: the lost attempt was not retried on the new worker.
    assert effects(tmp_path / "fx") == ["slow_refund A-9"]
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load("crash-1")
    await store.close()
    assert snap is not None and snap.run.status == "completed"
    (call,) = snap.calls
    assert call.name == "slow_refund" and call.status == "needs_review"
    assert out.text is not None and out.text.startswith("after: ")
    assert call.result is not None and call.result in out.text


async def test_worker_killed_in_a_model_call_is_noticed_by_its_heartbeat(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    runs = TemporalRuns(client, task_queue=queue)
    first = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path)
    second = None
    try:
        handle = await runs.start("slow", run_id="slow-1", input="Think slowly.")
        # The model activity runs in the first worker, blocked for an hour.
        await eventually(lambda: asyncio.to_thread(effects, tmp_path / "fx"), bool)
        kill(first)
        killed = time.monotonic()
        second = await asyncio.to_thread(start_worker, temporal_server, queue, tmp_path, "free")
        # Without a heartbeat the lost call would hold the run for model_timeout (10 minutes).
        # With one (2 s here) it is retried on the second worker at once; the rest is the
        # workflow task leaving the dead worker's sticky queue (10 s) and the store's writes.
        out = await asyncio.wait_for(handle.result(), 30)
        elapsed = time.monotonic() - killed
    finally:
        kill(first)
        if second is not None:
            kill(second)

    assert out.status == "completed" and out.text == "slow answer"
    assert elapsed < 30
    assert effects(tmp_path / "fx") == ["model called", "model called"]  # the retry, elsewhere
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load("slow-1")
    await store.close()
    assert snap is not None and snap.run.status == "completed"
