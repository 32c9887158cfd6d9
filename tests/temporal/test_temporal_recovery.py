"""With the default options, a run whose worker is SIGKILLed goes on in another within seconds.

Every activity heartbeats; the default ``heartbeat_timeout`` and the worker's sticky-queue
timeout bound how long a lost worker holds a run. The figures are printed; the assertion is
generous (the documented target is 10 s).
"""

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

from temporal_parity_kit import marks  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402

WORKER = Path(__file__).with_name("temporal_parity_worker.py")


def start_worker(server: Any, queue: str, tmp: Path, mode: str) -> subprocess.Popen[str]:
    args = [server.target, queue, str(tmp / "runs.db"), str(tmp / "fx"), mode]
    proc = subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker polls (or dies)
    assert line.strip() == "ready", f"worker did not start: {line!r}"
    return proc


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


async def _recovery(
    server: Any, tmp: Path, agent: str, killed_in: str, goes_on: str
) -> tuple[float, Any]:
    """Kill the worker once it wrote ``killed_in``; seconds until another wrote ``goes_on``."""
    client = await connect(server)
    queue = f"q-{uuid.uuid4().hex}"
    runs = TemporalRuns(client, task_queue=queue)
    fx = tmp / "fx"
    first = await asyncio.to_thread(start_worker, server, queue, tmp, "block")
    second = None
    try:
        handle = await runs.start(agent, run_id=f"{agent}-{uuid.uuid4().hex}", input="Go.")
        probe = lambda: asyncio.to_thread(marks, fx)  # noqa: E731
        await eventually(probe, lambda m: (killed_in, first.pid) in m)  # it blocks in it
        # The second worker polls before the kill: the time measured is Temporal noticing
        # the loss, not a process starting.
        second = await asyncio.to_thread(start_worker, server, queue, tmp, "free")
        kill(first)
        killed = time.monotonic()
        await eventually(probe, lambda m: (goes_on, second.pid) in m)
        elapsed = time.monotonic() - killed
        out = await asyncio.wait_for(handle.result(), 120)  # a cap against hanging
    finally:
        kill(first)
        if second is not None:
            kill(second)
    return elapsed, out


async def test_killed_in_a_tool_call_the_run_goes_on_within_seconds(
    temporal_server: Any, tmp_path: Path
) -> None:
    elapsed, out = await _recovery(temporal_server, tmp_path, "tool-kill", "charge", "model1")
    print(f"\nrecovery after a SIGKILL mid tool call (default options): {elapsed:.1f} s")
    assert out.status == "completed"
    assert [w for w, _ in marks(tmp_path / "fx")].count("charge") == 1  # not run again
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load(out.run_id)
    await store.close()
    assert snap is not None and snap.calls[0].status == "needs_review"
    assert elapsed < 20


async def test_killed_in_a_model_call_the_run_goes_on_within_seconds(
    temporal_server: Any, tmp_path: Path
) -> None:
    elapsed, out = await _recovery(temporal_server, tmp_path, "model-kill", "model", "model")
    print(f"\nrecovery after a SIGKILL mid model call (default options): {elapsed:.1f} s")
    assert out.status == "completed" and out.text == "thought it over"
    assert elapsed < 20
