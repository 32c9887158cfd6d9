"""PostgresStore.load and dump_run of a long run while the server has no statistics of its tables.

The planner picks how to read a run's rows from its statistics. Where there are none (a new
database, or tables autovacuum has not analyzed yet) it reads a run's rows by a bitmap scan,
and a read asked for in order (``ORDER BY``) is then sorted on the server, in files on disk
once the run is larger than ``work_mem``. This script builds, in a scratch database with
autovacuum off for the store's tables, one run of N iterations (the workload of
``resume.py``: ``loop_overhead``'s model and a 1 KiB echo), and times ``store.load`` of it from
a new store object (one connection):

* ``stale ms``: without statistics (``--short-runs``: with those of 20 short runs, taken
  before the long run was written);
* ``analyzed ms``: after ``ANALYZE`` (the planner knows the long run);
* ``stale dump``, ``dump ms``: ``store.dump_run`` of the run (every document read and decoded:
  what an export costs) without statistics, and analyzed;
* ``server ms``: the server's CPU time (the store's backend, from ``/proc``, in clock ticks of
  10 ms summed over the loads) for one load without statistics.

Median of REPS loads each, after one untimed load. It never asserts on timing.

Usage::

    .venv/bin/python benchmarks/pg_load.py                 # N = 400 4000
    .venv/bin/python benchmarks/pg_load.py --ns 4000 --reps 9 --pg-dsn "host=... user=..."
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_pg  # noqa: E402
import psycopg  # noqa: E402
from loop_overhead import ModelLog  # noqa: E402
from resume import make_agent  # noqa: E402

from steadyrun import Runtime  # noqa: E402
from steadyrun.stores import PostgresStore  # noqa: E402

ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
TABLES = ("runs", "context", "calls", "blocks", "step_history")


def _backend_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _build(dsn: str, n: int, short_stats: bool) -> None:
    async with PostgresStore(dsn) as store:
        await store.list_runs(limit=1)  # creates the tables
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            for table in TABLES:
                await conn.execute(
                    f"ALTER TABLE steadyrun.{table} SET (autovacuum_enabled = false)"
                )
        if short_stats:
            for i in range(20):
                short = make_agent(3, ModelLog())
                await Runtime(store).run(short, run_id=f"short{i}", input="Start.")
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute("ANALYZE")
        result = await Runtime(store).run(make_agent(n, ModelLog()), run_id="long", input="Start.")
        if result.status != "suspended":
            raise SystemExit(f"FAILED: the long run ended {result.status!r}")


async def _median_ms(reps: int, read: Callable[[], Awaitable[object]]) -> float:
    """The median wall ms of ``reps`` awaits of ``read()``, each after ``gc.collect()``."""
    times = []
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        await read()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


async def _loads(dsn: str, reps: int) -> tuple[float, float, int, float]:
    """Median ms of ``reps`` loads, the server's CPU ms of one, the documents loaded, and the
    median ms of ``reps`` ``dump_run`` of the run (every document decoded)."""
    async with PostgresStore(dsn, min_size=1, max_size=1) as store:
        snap = await store.load("long")  # untimed: opens the pool, warms the caches
        assert snap is not None
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            pids = [r[0] for r in await cur.fetchall()]
        cpu0 = sum(map(_backend_cpu_s, pids))
        load_ms = await _median_ms(reps, lambda: store.load("long"))
        server = (sum(map(_backend_cpu_s, pids)) - cpu0) / reps * 1e3
        dump_ms = await _median_ms(reps, lambda: store.dump_run("long"))
    docs = 2 + len(snap.context) + len(snap.calls) + len(snap.blocks)
    return load_ms, server, docs, dump_ms


async def measure(admin_dsn: str, n: int, reps: int, short_stats: bool) -> dict[str, float]:
    with bench_pg.fresh_database(admin_dsn, "steadyrun_pg_load") as dsn:
        await _build(dsn, n, short_stats)
        stale, server, docs, stale_dump = await _loads(dsn, reps)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("ANALYZE")
        analyzed, _, _, dump = await _loads(dsn, reps)
    return {
        "n": n,
        "docs": docs,
        "stale": stale,
        "analyzed": analyzed,
        "server": server,
        "stale_dump": stale_dump,
        "dump": dump,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ns", type=int, nargs="+", default=[400, 4000])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument(
        "--short-runs",
        action="store_true",
        help="statistics taken over 20 short runs before the long one (default: none at all)",
    )
    p.add_argument("--pg-dsn", default=ADMIN_DSN, help="a database the scratch one is made from")
    args = p.parse_args()
    print(
        f"{'N':>6} {'docs':>6} {'stale ms':>9} {'analyzed ms':>12} {'server ms':>10} {'dump ms':>8}"
    )
    for n in args.ns:
        row = asyncio.run(measure(args.pg_dsn, n, args.reps, args.short_runs))
        print(
            f"{row['n']:>6} {row['docs']:>6} {row['stale']:>9.2f} {row['analyzed']:>12.2f}"
            f" {row['server']:>10.2f} {row['stale_dump']:>10.1f} {row['dump']:>8.1f}"
        )


if __name__ == "__main__":
    main()
