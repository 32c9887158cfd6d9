"""The peer harness's resume at N, phase by phase, in CPU time as well as wall time.

``benchmarks/peers/steadyrun_loop.py N resume`` reports wall times only, and on a shared
machine an fsync's wait moves them by several times from one run to the next. This script runs
the same sequence with the same agent and store (``steadyrun_loop``'s): a run of N iterations
paused for an approval at N//2 is built once; then, REPS times, a copy of its file is opened by
a new ``SqliteStore`` and ``Runtime`` and resumed. Each phase is timed in wall and in the
process's CPU time (every thread), after ``gc.collect()``:

* ``open``: the store opened (``list_runs(limit=1)``);
* ``load``: ``store.load``;
* ``decide``: the waiting call found in the loaded snapshot (``snap.batch_calls()``) and
  ``Runtime.decide``, as the harness does;
* ``resume``: ``Runtime.resume`` up to the first model call;
* ``first``: decide + resume, the harness's ``resume_to_first_model_call``;
* ``end``: from the decision to the run's completion.

Usage::

    .venv/bin/python benchmarks/resume_phases.py            # N=400, 5 resumes
    .venv/bin/python benchmarks/resume_phases.py --n 100 --reps 9

It prints the median and the least of each figure; it never asserts on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import steadyrun_loop as L  # noqa: E402  (the harness's agent, model and store)

from steadyrun import Runtime, SqliteStore  # noqa: E402

RUN = "run-resume"
PHASES = ("open", "load", "decide", "resume", "first", "end")


def _env(db: Path, n: int) -> L.Env:
    args = argparse.Namespace(
        db=str(db),
        n=n,
        tool="echo",
        async_tool=False,
        inline_tool=False,
        sqlite_sync=None,
        no_warmup=False,
    )
    return L.Env(args, "FULL")


async def build(db: Path, n: int) -> L.Env:
    """The run paused at n // 2, in ``db`` (closed)."""
    env = _env(db, n)
    await L.warmup(env)
    store = env.store()
    result = await Runtime(store).run(
        env.agent(L.FakeLoop(n, "echo"), n // 2), run_id=RUN, input=L.RUN_INPUT
    )
    L.expect(result, "suspended")
    await store.close()
    return env


def _copy(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{dst}{suffix}")


async def once(env: L.Env, base: Path, work: Path, n: int) -> dict[str, tuple[float, float]]:
    """One resume of a copy of the paused run: ``{phase: (wall ms, cpu ms)}``."""
    _copy(base, work)
    fake = L.FakeLoop(n, "echo")
    first_cpu: list[float] = []
    respond = fake.model._fn

    def stamped(request: Any) -> Any:
        if not first_cpu:
            first_cpu.append(time.process_time())
        return respond(request)

    fake.model._fn = stamped
    gc.collect()
    marks = [(time.perf_counter(), time.process_time())]
    store = SqliteStore(work, synchronous="FULL")
    runtime = Runtime(store, agents=[env.agent(fake, n // 2)])
    await store.list_runs(limit=1)
    marks.append((time.perf_counter(), time.process_time()))
    snap = await store.load(RUN)
    marks.append((time.perf_counter(), time.process_time()))
    await L.approve_pending(runtime, RUN, snap)
    marks.append((time.perf_counter(), time.process_time()))
    result = await runtime.resume(RUN)
    marks.append((time.perf_counter(), time.process_time()))
    await store.close()
    L.expect(result, "completed", L.C.final_text(n))
    first = (fake.call_times[0], first_cpu[0])

    def span(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return (b[0] - a[0]) * 1e3, (b[1] - a[1]) * 1e3

    return {
        "open": span(marks[0], marks[1]),
        "load": span(marks[1], marks[2]),
        "decide": span(marks[2], marks[3]),
        "resume": span(marks[3], first),
        "first": span(marks[2], first),
        "end": span(marks[2], marks[4]),
    }


async def main_async(n: int, reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="steadyrun-phases-") as tmp:
        base, work = Path(tmp) / "paused.db", Path(tmp) / "work.db"
        env = await build(base, n)
        rows = [await once(env, base, work, n) for _ in range(reps)]
    print(f"resume of the harness's run at N={n} (paused at {n // 2}), {reps} resumes, ms")
    print(f"{'phase':<8} {'wall med':>9} {'wall min':>9} {'cpu med':>9} {'cpu min':>9}")
    for phase in PHASES:
        wall = [r[phase][0] for r in rows]
        cpu = [r[phase][1] for r in rows]
        print(
            f"{phase:<8} {statistics.median(wall):>9.2f} {min(wall):>9.2f} "
            f"{statistics.median(cpu):>9.2f} {min(cpu):>9.2f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    if args.n < 4 or args.reps < 1:
        p.error("--n must be at least 4 and --reps at least 1")
    asyncio.run(main_async(args.n, args.reps))


if __name__ == "__main__":
    main()
