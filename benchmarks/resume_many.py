"""Many suspended runs in one SQLite file: resume any one of them (``resume.py --many``).

The workload is the peer harness's ``suspended`` job (``benchmarks/peers/steadyrun_loop.py 10
suspended``): each run calls ``echo`` (1 KiB argument) once per model call, and the call of step
N//2 waits for a person's approval (a ``Confirm`` policy), so the run suspends with N//2
iterations behind it. All COUNT runs are written by the runtime (no copies), BATCH at a time
with ``asyncio.gather`` (they share group commits; runs of more than 50 iterations one at a
time), into one file with ``synchronous=FULL``.

Then a *new* store object and runtime (a restarted worker) resume a sample of the runs: the
first, the middle and the last written, and ``random`` more drawn with a fixed seed. For each
one, after ``gc.collect()``:

* ``load ms``: ``store.load`` of the run;
* ``decide ms``: finding the waiting call in the loaded snapshot and ``Runtime.decide``
  (one durable write);
* ``to model ms``: from the decision to the first model call of ``Runtime.resume`` (the
  harness's ``resume_to_first_model_call`` is decide + this), and ``cpu ms``, the process's
  CPU time over the same span (every thread);
* ``end ms``: from the decision to the run's completion (the rest of its iterations, each
  with its fsyncs).

It prints the file's size (database and WAL) and one line per sampled run, and the median
and the worst of each column. It never asserts on timing; it exits non-zero when a run does
not end as expected.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
from pathlib import Path
from typing import Any

from loop_overhead import ModelLog, echo_text, final_text, make_model

import steadyrun
from steadyrun import Agent, Limits, RunResult, Runtime, SqliteStore
from steadyrun.control import CallView, Confirm

N = 10  # iterations of each run (the harness's suspended job); --many-n changes it
BATCH = 100
SEED = 20


def make_agent(n: int, log: ModelLog) -> Agent:
    """The harness's loop; the echo of step ``n // 2`` waits for approval."""
    pause = echo_text(n // 2)[:6]

    def policy(view: CallView) -> Confirm | None:
        return Confirm(prompt="ok?") if view.arguments["text"].startswith(pause) else None

    @steadyrun.tool(name="echo", policy=policy)
    def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: What to return.
        """
        return text

    return Agent(
        name="loop",
        model=make_model(n, log),
        instructions="Call echo until told otherwise.",
        tools=[echo],
        limits=Limits(max_iterations=n + 5),
    )


def run_id(i: int) -> str:
    return f"s{i:06d}"


def picks(count: int, extra: int) -> list[tuple[str, int]]:
    """``(label, index)``: the first, the middle, the last run, and ``extra`` drawn at random."""
    chosen = [("first", 0), ("middle", count // 2), ("last", count - 1)]
    chosen = [
        (label, i) for k, (label, i) in enumerate(chosen) if i not in {j for _, j in chosen[:k]}
    ]
    taken = {i for _, i in chosen}
    rng = random.Random(SEED)
    pool = [i for i in range(count) if i not in taken]
    chosen += [("random", i) for i in sorted(rng.sample(pool, min(extra, len(pool))))]
    return chosen


def _expect(result: RunResult, status: str) -> None:
    if result.status != status:
        raise SystemExit(
            f"FAILED: run {result.run_id} ended {result.status!r} ({result.error!r}), "
            f"expected {status!r}"
        )


def file_bytes(path: Path) -> tuple[int, int]:
    """The database file's and its WAL's sizes."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


async def write_runs(path: Path, count: int, n: int) -> float:
    """Write ``count`` suspended runs of ``n`` iterations; returns the seconds it took."""
    store = SqliteStore(path, synchronous="FULL")
    try:
        t0 = time.perf_counter()
        # Long runs one at a time, as the harness writes its one run: rows of runs written
        # together interleave in the file, and a load then reads more pages.
        batch_size = BATCH if n <= 50 else 1
        for start in range(0, count, batch_size):
            # A new agent per batch: the FunctionModel keeps every request it saw.
            runtime, agent = Runtime(store), make_agent(n, ModelLog())
            batch = range(start, min(count, start + batch_size))
            results = await asyncio.gather(
                *(runtime.run(agent, run_id=run_id(i), input="Start.") for i in batch)
            )
            for result in results:
                _expect(result, "suspended")
        return time.perf_counter() - t0
    finally:
        await store.close()


async def resume_sample(path: Path, sample: list[tuple[str, int]], n: int) -> list[dict[str, Any]]:
    """Resume each sampled run from one new store object and runtime."""
    store = SqliteStore(path, synchronous="FULL")
    rows = []
    try:
        await store.list_runs(limit=1)  # opens the connection, as the harness does
        for label, i in sample:
            log = ModelLog()
            runtime = Runtime(store, agents=[make_agent(n, log)])
            rid = run_id(i)
            gc.collect()
            t0 = time.perf_counter()
            snap = await store.load(rid)
            t1 = time.perf_counter()
            if snap is None or snap.run.status != "suspended":
                raise SystemExit(f"FAILED: run {rid} is not there, or not suspended")
            waiting = [c.id for c in snap.batch_calls() if c.status == "awaiting_decision"]
            if len(waiting) != 1:
                raise SystemExit(f"FAILED: run {rid} waits for {len(waiting)} decisions")
            c1 = time.process_time()
            await runtime.decide(rid, waiting[0], approve=True)
            t2 = time.perf_counter()
            done = await runtime.resume(rid)
            t3 = time.perf_counter()
            _expect(done, "completed")
            if done.text != final_text(n):
                raise SystemExit(f"FAILED: run {rid} answered {done.text!r}")
            rows.append(
                {
                    "sample": label,
                    "run": rid,
                    "load_ms": (t1 - t0) * 1e3,
                    "decide_ms": (t2 - t1) * 1e3,
                    "to_model_ms": (log.stamps[0] - t2) * 1e3,
                    "decide_to_model_ms": (log.stamps[0] - t1) * 1e3,
                    "decide_to_model_cpu_ms": (log.cpu[0] - c1) * 1e3,
                    "end_ms": (t3 - t1) * 1e3,
                }
            )
    finally:
        await store.close()
    return rows


COLUMNS = (
    ("load_ms", "load"),
    ("decide_ms", "decide"),
    ("to_model_ms", "to model"),
    ("decide_to_model_ms", "dec+model"),
    ("decide_to_model_cpu_ms", "cpu"),
    ("end_ms", "end"),
)


async def many(count: int, tmp: Path, extra: int = 7, n: int = N) -> dict[str, Any]:
    """Write ``count`` suspended runs into one file and resume a sample; the figures."""
    path = tmp / f"many-{count}.db"
    path.unlink(missing_ok=True)
    create_s = await write_runs(path, count, n)
    db, wal = file_bytes(path)
    rows = await resume_sample(path, picks(count, extra), n)
    summary = {
        key: {
            "median": statistics.median(r[key] for r in rows),
            "max": max(r[key] for r in rows),
        }
        for key, _ in COLUMNS
    }
    return {
        "test": "many_suspended",
        "runs": count,
        "n": n,
        "paused_at": n // 2,
        "create_ms_per_run": create_s / count * 1e3,
        "db_bytes": db,
        "wal_bytes": wal,
        "samples": rows,
        "summary": summary,
    }


def print_many(result: dict[str, Any]) -> None:
    """The figures of ``many`` as a table."""
    mb = (result["db_bytes"] + result["wal_bytes"]) / 1e6
    print(
        f"\n{result['runs']:,} suspended runs (N={result['n']}, paused at {result['paused_at']}) "
        f"in one file: {mb:.1f} MB (database {result['db_bytes'] / 1e6:.1f}, WAL "
        f"{result['wal_bytes'] / 1e6:.1f}); written at {result['create_ms_per_run']:.2f} ms "
        "per run"
    )
    head = " ".join(f"{title:>9}" for _, title in COLUMNS)
    print(f"{'sample':<7} {'run':<8} {head}   (ms)")
    for r in result["samples"]:
        cells = " ".join(f"{r[key]:>9.2f}" for key, _ in COLUMNS)
        print(f"{r['sample']:<7} {r['run']:<8} {cells}")
    for stat in ("median", "max"):
        cells = " ".join(f"{result['summary'][key][stat]:>9.2f}" for key, _ in COLUMNS)
        print(f"{stat:<16} {cells}")
