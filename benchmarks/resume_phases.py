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

``--timeline`` adds one more resume, shown as what the store did from the decision to the first
model call: each read and write of its ``SqliteThread`` (when it started, how long it took,
whether the write was synced), and the time on the event loop between them. A write's time
is mostly its commit's fsync; the loop's, decoding and the runtime's own work.

Usage::

    .venv/bin/python benchmarks/resume_phases.py            # N=400, 5 resumes
    .venv/bin/python benchmarks/resume_phases.py --n 100 --reps 9
    .venv/bin/python benchmarks/resume_phases.py --reps 3 --timeline

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
from steadyrun._sqlite_thread import SqliteThread  # noqa: E402

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


Event = tuple[str, float, float]  # what, start ms after the decision began, ms it took


async def timeline(env: L.Env, base: Path, work: Path, n: int) -> tuple[list[Event], float]:
    """One resume with the store's reads and writes timed, up to the first model call."""
    events: list[Event] = []
    t0 = [0.0]
    read, write = SqliteThread.read, SqliteThread.write

    async def timed_read(self: SqliteThread, fn: Any) -> Any:
        start = time.perf_counter()
        try:
            return await read(self, fn)
        finally:
            events.append(("read", start - t0[0], time.perf_counter() - start))

    async def timed_write(self: SqliteThread, fn: Any, *, durable: bool = True) -> Any:
        start = time.perf_counter()
        try:
            return await write(self, fn, durable=durable)
        finally:
            what = "write, synced" if durable else "write, not synced"
            events.append((what, start - t0[0], time.perf_counter() - start))

    _copy(base, work)
    fake = L.FakeLoop(n, "echo")
    store = SqliteStore(work, synchronous="FULL")
    runtime = Runtime(store, agents=[env.agent(fake, n // 2)])
    await store.list_runs(limit=1)
    snap = await store.load(RUN)
    gc.collect()
    SqliteThread.read, SqliteThread.write = timed_read, timed_write  # type: ignore[method-assign]
    try:
        t0[0] = time.perf_counter()
        await L.approve_pending(runtime, RUN, snap)
        events.append(("decided", time.perf_counter() - t0[0], 0.0))
        result = await runtime.resume(RUN)
    finally:
        SqliteThread.read, SqliteThread.write = read, write  # type: ignore[method-assign]
        await store.close()
    L.expect(result, "completed", L.C.final_text(n))
    first = fake.call_times[0] - t0[0]
    return [(w, a * 1e3, d * 1e3) for w, a, d in events if a <= first], first * 1e3


def print_timeline(events: list[Event], first: float) -> None:
    print(f"\none resume, from the decision to the first model call ({first:.2f} ms)")
    print(f"{'at ms':>7} {'took':>6}  what")
    end = 0.0
    for what, at, took in events:
        if at - end > 0.05:
            print(f"{end:>7.2f} {at - end:>6.2f}  on the loop")
        print(f"{at:>7.2f} {took:>6.2f}  {what}")
        end = max(end, at + took)
    if first - end > 0.05:
        print(f"{end:>7.2f} {first - end:>6.2f}  on the loop, to the model call")
    synced = sum(took for what, _, took in events if what == "write, synced")
    print(f"synced writes: {synced:.2f} ms of {first:.2f}")


async def main_async(n: int, reps: int, show_timeline: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="steadyrun-phases-") as tmp:
        base, work = Path(tmp) / "paused.db", Path(tmp) / "work.db"
        env = await build(base, n)
        rows = [await once(env, base, work, n) for _ in range(reps)]
        line = await timeline(env, base, work, n) if show_timeline else None
    print(f"resume of the harness's run at N={n} (paused at {n // 2}), {reps} resumes, ms")
    print(f"{'phase':<8} {'wall med':>9} {'wall min':>9} {'cpu med':>9} {'cpu min':>9}")
    for phase in PHASES:
        wall = [r[phase][0] for r in rows]
        cpu = [r[phase][1] for r in rows]
        print(
            f"{phase:<8} {statistics.median(wall):>9.2f} {min(wall):>9.2f} "
            f"{statistics.median(cpu):>9.2f} {min(cpu):>9.2f}"
        )
    if line is not None:
        print_timeline(*line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(
        "--timeline", action="store_true", help="and one resume's reads and writes, in order"
    )
    args = p.parse_args()
    if args.n < 4 or args.reps < 1:
        p.error("--n must be at least 4 and --reps at least 1")
    asyncio.run(main_async(args.n, args.reps, args.timeline))


if __name__ == "__main__":
    main()
