"""Background tasks on one worker: how many run at once, and how soon a run hears one ended.

Two measurements, on ``MemoryTaskStore`` and ``SqliteTaskStore`` (a file in a temporary
directory) with a ``SqliteStore`` holding the runs:

1. **Concurrent tasks.** N tasks are submitted (explicit background), each an operation that
   waits on an event; the worker claims them (``max_concurrent`` = N). The script reports how
   many tasks the worker holds at once once they are all claimed, the time to claim them all,
   and the worker's resident memory growth per held task. Then every operation finishes at
   once and the time until all N runs are notified is reported.
2. **Completion to runnable.** One task at a time: its operation completes; the script times
   from that moment until ``Store.wait_pending`` on the run's feed returns (claimable input),
   which is when a worker would resume the run. Median and 95th percentile over R repetitions.

Figures only, never pass/fail. Usage::

    .venv/bin/python benchmarks/background.py            # N=1000, R=50
    .venv/bin/python benchmarks/background.py --quick    # N=200, R=20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pydantic

import steadyrun as sr
from steadyrun.background import (
    BackgroundTool,
    MemoryTaskStore,
    Operation,
    SqliteTaskStore,
    Task,
    TaskManager,
    TaskRef,
    TaskStore,
)

GATES: dict[str, asyncio.Event] = {}
FINISHED_AT: dict[str, float] = {}


class Args(pydantic.BaseModel):
    """No arguments but a label."""

    label: str = ""


class Waits(Operation):
    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    async def wait(self) -> Any:
        await GATES.setdefault(self.task_id, asyncio.Event()).wait()
        FINISHED_AT[self.task_id] = time.perf_counter()
        return "done"


class Job(BackgroundTool):
    name = "job"
    description = "Wait for the benchmark's signal."
    Args = Args
    foreground_timeout = 0.0

    async def start(self, task: TaskRef, args: Any) -> Operation:
        return Waits(task.task_id)


async def concurrent(tasks: TaskStore, runs: sr.SqliteStore, n: int) -> dict[str, float]:
    manager = TaskManager(tasks, runs, [Job()], max_concurrent=n, poll=0.01, lease=60)
    for i in range(n):
        await tasks.insert(
            Task(id=f"c{i}/m1.c1", run_id=f"c{i}", call_id="m1.c1", tool="job", arguments="{}")
        )
    tracemalloc.start()
    t0 = time.perf_counter()
    async with manager:
        while len(manager._running) < n:  # noqa: ASYNC110 (watching the worker's own state)
            await asyncio.sleep(0.005)
        claimed = time.perf_counter() - t0
        held = len(manager._running)
        grown, _ = tracemalloc.get_traced_memory()  # what claiming and holding allocated
        tracemalloc.stop()
        t1 = time.perf_counter()
        for i in range(n):
            GATES.setdefault(f"c{i}/m1.c1", asyncio.Event()).set()
        while True:
            pending = await asyncio.gather(*(runs.pending(f"c{i}", 0) for i in range(n)))
            if all(pending):
                break
            await asyncio.sleep(0.01)
        notified = time.perf_counter() - t1
    return {
        "held": held,
        "claim_all_s": claimed,
        "kib_per_task": grown / 1024 / max(held, 1),
        "all_notified_s": notified,
    }


async def latency(tasks: TaskStore, runs: sr.SqliteStore, reps: int) -> dict[str, float]:
    manager = TaskManager(tasks, runs, [Job()], poll=0.01, lease=60)
    samples = []
    async with manager:
        for i in range(reps):
            task_id = f"l{i}/m1.c1"
            await tasks.insert(
                Task(id=task_id, run_id=f"l{i}", call_id="m1.c1", tool="job", arguments="{}")
            )
            manager._wake.set()
            while task_id not in manager._running:  # noqa: ASYNC110 (the worker's own state)
                await asyncio.sleep(0.001)
            GATES.setdefault(task_id, asyncio.Event()).set()
            # How a worker learns a run became runnable: the feed's own wake-up.
            await runs.wait_pending(f"l{i}", 0, 10.0)
            samples.append(time.perf_counter() - FINISHED_AT[task_id])
    samples.sort()
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p95_ms": samples[int(len(samples) * 0.95) - 1] * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    n, reps = (200, 20) if opts.quick else (1000, 50)
    print(f"# background tasks, one worker (python {sys.version.split()[0]})")
    print(
        "| task store | tasks held at once | claim all (s) | memory per task (KiB) "
        "| all runs told (s) | end → runnable median (ms) | p95 (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("memory", "sqlite"):
            GATES.clear()
            FINISHED_AT.clear()
            path = Path(folder) / kind
            path.mkdir()
            runs = sr.SqliteStore(path / "runs.db")
            tasks: TaskStore = (
                MemoryTaskStore() if kind == "memory" else SqliteTaskStore(path / "tasks.db")
            )
            c = await concurrent(tasks, runs, n)
            lat = await latency(tasks, runs, reps)
            print(
                f"| {kind} | {c['held']:.0f} of {n} | {c['claim_all_s']:.2f} | "
                f"{c['kib_per_task']:.1f} | {c['all_notified_s']:.2f} | "
                f"{lat['median_ms']:.1f} | {lat['p95_ms']:.1f} |"
            )
            await tasks.close()
            await runs.close()


if __name__ == "__main__":
    asyncio.run(main())
