"""Resume of a long run: what loading it costs, and how soon the next model call starts.

The workload is the one of ``loop_overhead.py`` (imported from it): a ``FunctionModel`` asks
for one ``echo`` call per model call (1 KiB text) until N tool results are in. Here the echo of
the last iteration hands itself to the host (``await_external``), so the run suspends with
N-1 settled iterations behind it (about 4N documents: context messages, call records, blocks).
The run is built once per N (with ``synchronous=OFF``, only to build it quickly); then a *new*
store object opens the same file (as a restarted worker would, ``synchronous=FULL``), the
host settles the waiting call, and the script times:

* ``load ms``: ``store.load`` of the run (median of 5, after one untimed load);
* ``decode ms``: of that, decoding the stored documents as ``load`` does (the rows read once,
  then the decoding alone: ``decode_snapshot`` and the context, median of 5); the call rows
  and blocks are left as stored bytes, decoded when first read (``StoredSnapshot``);
* ``all ms``: that and the blocks decoded too: every stored document into records;
* ``to model ms``: from ``Runtime.resume`` to the first model call (the claim, the load, the
  run state restored, the recovery step's commit, the request built), median of 3 resumes of
  the same suspended run (``dump_run`` once, ``restore_run`` before each, a new store object);
  ``cpu ms`` is the process's CPU time over the same span (every thread: SQLite's too), a
  steadier figure on a loaded machine;
* ``loads``: how many times the resume called ``store.load`` (one is the floor).

With ``--suspended COUNT ...``: COUNT runs (N=10) suspended at iteration 5 in one SQLite file
(``stores.py``'s ``many_suspended``: 200 of them run by the runtime, the rest copied), then from a
new store object the median ``load``, ``settle`` and ``resume`` to the end of 20 sampled runs.

``MemoryStore`` is measured the same way (it keeps the same encoded documents in memory), and
``PostgresStore`` with ``--stores postgres`` (a schema of its own, dropped at the end).

Usage::

    .venv/bin/python benchmarks/resume.py                   # N = 100 400 1600, SQLite and memory
    .venv/bin/python benchmarks/resume.py --ns 400 --json
    .venv/bin/python benchmarks/resume.py --stores postgres --pg-dsn "host=127.0.0.1 user=postgres"
    .venv/bin/python benchmarks/resume.py --ns --many 1000 10000   # the many runs only
    .venv/bin/python benchmarks/resume.py --ns --many 5 --many-n 400  # the harness's resume job

Each timed section starts after ``gc.collect()``, so garbage left by building the run is not
collected inside it (a collection of the whole heap costs up to 25 ms here at N=400). The
script exits non-zero when a run does not end as expected; it never asserts on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import resume_many
from loop_overhead import ModelLog, echo_text, final_text, make_model

import steadyrun
from steadyrun import Agent, Limits, MemoryStore, RunResult, Runtime, SqliteStore
from steadyrun.control import await_external
from steadyrun.records import RunSnapshot
from steadyrun.stores import PostgresStore, Store
from steadyrun.stores._call_rows_sql import keep_calls
from steadyrun.stores._encoded import decode_snapshot

RUN = "long"
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
REPS = 5  # loads and decodes timed per N
RESUMES = 3  # resumes timed per N, each of the same suspended run, restored


def make_agent(n: int, log: ModelLog) -> Agent:
    """The loop-overhead agent whose echo of iteration N-1 awaits the host."""
    last = n - 1

    @steadyrun.tool(name="echo")
    async def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: What to return.
        """
        if int(text[:6]) == last:
            await_external({"step": last})
        return text

    return Agent(
        name="loop",
        model=make_model(n, log),
        instructions="Call echo until told otherwise.",
        tools=[echo],
        limits=Limits(max_iterations=n + 5),
    )


def waiting_call(result: RunResult, n: int) -> str:
    waiting = [c for c in result.calls if c.status == "waiting" and c.handover == "await"]
    if result.status != "suspended" or len(waiting) != 1 or len(result.calls) != n:
        raise SystemExit(f"FAILED: run ended {result.status!r} with {len(result.calls)} calls")
    return waiting[0].id


class Counting:
    """Counts ``load`` calls on a store (every other attribute is the store's own)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.loads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def load(self, run_id: str) -> RunSnapshot | None:
        self.loads += 1
        return await self._inner.load(run_id)


def sqlite_rows(path: Path) -> tuple[Any, ...]:
    """The stored documents of the run, as ``SqliteStore.load`` reads them."""
    conn = sqlite3.connect(path)
    try:
        run, cp = conn.execute(
            "SELECT record, checkpoint FROM runs WHERE run_id = ?", (RUN,)
        ).fetchone()
        context = [
            r[0]
            for r in conn.execute(
                "SELECT message FROM context WHERE run_id = ? ORDER BY idx", (RUN,)
            )
        ]
        calls = conn.execute(
            "SELECT call_id, record FROM calls WHERE run_id = ? ORDER BY rowid", (RUN,)
        ).fetchall()
        blocks = [
            r[0]
            for r in conn.execute(
                "SELECT block FROM blocks WHERE run_id = ? ORDER BY position", (RUN,)
            )
        ]
    finally:
        conn.close()
    return run, cp, context, calls, blocks


def read_all(snap: RunSnapshot) -> None:
    """Read every document of a loaded snapshot (a ``StoredSnapshot`` decodes them now)."""
    snap.context, snap.calls, snap.blocks  # noqa: B018


def decode_stored(run: bytes, cp: bytes, context: Any, calls: Any, blocks: Any) -> RunSnapshot:
    """What ``SqliteStore.load`` decodes: the run, the context; call rows kept for later."""
    snap = decode_snapshot(run, cp, context, (), blocks, call_ids=())
    snap.context  # noqa: B018
    # This run never rewrites its context: every reference is in segment 0.
    if not keep_calls(snap, calls, 0):
        raise SystemExit("FAILED: the call rows were not kept stored")
    return snap


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def measure(kind: str, n: int, tmp: Path, dsn: str) -> dict[str, Any]:
    path = tmp / f"resume-{n}.db"
    path.unlink(missing_ok=True)
    schema = f"resume_bench_{os.getpid()}_{n}"  # PostgreSQL: dropped at the end

    def open_store(sync: str = "FULL") -> Store:
        if kind == "memory":
            return MemoryStore()
        if kind == "postgres":
            return PostgresStore(dsn, schema=schema)
        return SqliteStore(path, synchronous=sync)  # type: ignore[arg-type]

    try:
        return await _measure(kind, n, path, open_store)
    finally:
        path.unlink(missing_ok=True)
        if kind == "postgres":
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def _measure(
    kind: str, n: int, path: Path, open_store: Callable[..., Store]
) -> dict[str, Any]:

    first = open_store("OFF")
    built = await Runtime(first).run(make_agent(n, ModelLog()), run_id=RUN, input="Start.")
    call_id = waiting_call(built, n)
    dump = await first.dump_run(RUN)  # each resume below starts from this same suspended run
    assert dump is not None
    await first.close()

    store = open_store()
    if kind == "memory":
        await store.restore_run(dump)
    await store.list_runs(limit=1)  # opens the connection
    snap = await store.load(RUN)  # untimed: the first read warms SQLite's page cache
    assert snap is not None
    loads = []
    for _ in range(REPS):
        gc.collect()  # garbage of the build must not be collected inside a timed load
        t0 = time.perf_counter()
        await store.load(RUN)
        loads.append(time.perf_counter() - t0)
    decodes, everything = [], []
    if kind == "sqlite":
        rows = sqlite_rows(path)
        for _ in range(REPS):
            gc.collect()
            t0 = time.perf_counter()
            decoded = decode_stored(*rows)
            t1 = time.perf_counter()
            read_all(decoded)
            decodes.append(t1 - t0)
            everything.append(time.perf_counter() - t0)
    await store.close()

    to_model, cpu, counts = [], [], []
    for _ in range(RESUMES):
        store = open_store()
        if kind == "memory" or to_model:  # the file still holds the run as built the first time
            await store.delete_run(RUN)
            await store.restore_run(dump)
            if kind != "memory":  # a new store object on the database, as a restarted worker
                await store.close()
                store = open_store()
        await store.list_runs(limit=1)
        log = ModelLog()
        counted = Counting(store)
        runtime = Runtime(counted, agents=[make_agent(n, log)])  # type: ignore[arg-type]
        await runtime.settle(RUN, call_id, result=echo_text(n - 1))
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        done = await runtime.resume(RUN)
        if done.status != "completed" or done.text != final_text(n):
            raise SystemExit(f"FAILED: resumed run ended {done.status!r} with {done.text!r}")
        to_model.append(log.stamps[0] - t0)
        cpu.append(log.cpu[0] - c0)
        counts.append(counted.loads)
        await store.close()
    return {
        "store": kind,
        "n": n,
        "documents": 2 + len(snap.context) + len(snap.calls) + len(snap.blocks),
        "load_ms": ms(loads),
        "decode_ms": ms(decodes) if decodes else None,
        "all_ms": ms(everything) if everything else None,
        "to_model_ms": ms(to_model),
        "to_model_cpu_ms": ms(cpu),
        "loads": max(counts),
    }


async def suspended(count: int, tmp: Path) -> dict[str, Any]:
    """``stores.py``'s many suspended runs, in one SQLite file (synchronous FULL)."""
    import stores  # the benchmark beside this one

    sizes = stores.Sizes(suspended=count, through_runtime=min(count, 200))
    return await stores.many_suspended(stores.sqlite_backend(tmp, "FULL"), f"many{count}", sizes)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="steadyrun-resume-") as tmp:
        # One untimed small run and resume: the codec's type adapters are built once.
        await measure("memory", 10, Path(tmp), args.pg_dsn)
        rows = [
            await measure(kind, n, Path(tmp), args.pg_dsn) for kind in args.stores for n in args.ns
        ]
        many = [await suspended(count, Path(tmp)) for count in args.suspended]
        approved = [await resume_many.many(count, Path(tmp), n=args.many_n) for count in args.many]
    if args.json:
        for row in [*rows, *many, *approved]:
            print(json.dumps(row))
        return
    if rows:
        print_rows(rows)
    if many:
        print(f"\n{'suspended':>9} {'MB':>6} {'load ms':>8} {'settle ms':>9} {'resume ms':>9}")
        for r in many:
            print(
                f"{r['runs']:>9} {r['db_bytes'] / 1e6:>6.1f} {r['load_ms']:>8.2f} "
                f"{r['settle_ms']:>9.2f} {r['resume_to_end_ms']:>9.2f}"
            )
    for result in approved:
        resume_many.print_many(result)


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The resumes of one long run, a row per store and N."""
    print(
        f"{'store':<7} {'N':>5} {'docs':>6} {'load ms':>8} {'decode ms':>9} {'all ms':>7} "
        f"{'to model ms':>11} {'cpu ms':>7} {'loads':>5}"
    )
    for r in rows:
        decode, every = (
            f"{r[k]:.2f}" if r[k] is not None else "-" for k in ("decode_ms", "all_ms")
        )
        print(
            f"{r['store']:<7} {r['n']:>5} {r['documents']:>6} {r['load_ms']:>8.2f} "
            f"{decode:>9} {every:>7} {r['to_model_ms']:>11.2f} {r['to_model_cpu_ms']:>7.2f} "
            f"{r['loads']:>5}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ns", type=int, nargs="*", default=[100, 400, 1600])
    p.add_argument(
        "--stores",
        nargs="*",
        choices=["sqlite", "memory", "postgres"],
        default=["sqlite", "memory"],
        help="postgres: a schema of its own in --pg-dsn's database, dropped at the end",
    )
    p.add_argument("--pg-dsn", default=PG_DSN)
    p.add_argument("--json", action="store_true", help="one JSON line per row, no table")
    p.add_argument(
        "--suspended",
        type=int,
        nargs="*",
        default=[],
        metavar="COUNT",
        help="also: COUNT suspended runs in one SQLite file, resume one (e.g. 1000 10000)",
    )
    p.add_argument(
        "--many",
        type=int,
        nargs="*",
        default=[],
        metavar="COUNT",
        help="also: COUNT runs paused for an approval in one SQLite file, resume a sample",
    )
    p.add_argument(
        "--many-n",
        type=int,
        default=resume_many.N,
        metavar="N",
        help="iterations of each of the --many runs (paused at N // 2; the harness: 10)",
    )
    args = p.parse_args()
    if args.ns and min(args.ns) < 2:
        p.error("N must be at least 2")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
