"""The step history: what it adds to each save, and how long listing and forking take.

The workload is the one of ``loop_overhead.py`` (one ``echo`` call of 1 KiB per model call,
N calls, then an answer: 2N + 2 steps), on ``MemoryStore``, ``SqliteStore`` (a temporary file)
and ``PostgresStore`` (a database the script creates on the local server and drops at the
end). Per store it prints:

* the bytes ``save_step`` wrote at steps 10 and 400 (indices into ``store.step_bytes``, as in
  ``loop_overhead.py``), and how many of them are the step's history entry; the rest is what
  a step wrote before the history existed, so the two columns are the before and the after;
* for the durable stores, the bytes the database grew by per step (SQLite: its pages);
* the time of ``Runtime.history`` over the whole run, of ``Runtime.fork`` at the middle step,
  and of resuming the fork to its end.

Usage::

    .venv/bin/python benchmarks/history.py                 # N = 400, every store
    .venv/bin/python benchmarks/history.py --n 100 --stores memory sqlite

It fails when a run does not end as expected; it never asserts on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench_pg import fresh_database
from loop_overhead import EARLY_STEP, LATE_STEP, ModelLog, echo, final_text, make_model

from steadyrun import Agent, Limits, MemoryStore, Runtime, SqliteStore
from steadyrun.stores import Store
from steadyrun.stores._history import encode_entry

ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"


@contextlib.asynccontextmanager
async def opened(kind: str, root: Path, dsn: str | None) -> AsyncIterator[Store]:
    store: Any
    if kind == "memory":
        store = MemoryStore()
    elif kind == "sqlite":
        store = SqliteStore(root / "history.db")
    else:
        from steadyrun.stores import PostgresStore

        assert dsn is not None
        store = PostgresStore(dsn)
    try:
        yield store
    finally:
        await store.close()


async def db_bytes(kind: str, store: Any, root: Path) -> int | None:
    if kind == "sqlite":  # pages in use, the WAL's included (the files lag behind them)

        def pages(conn: Any) -> int:
            count = conn.execute("PRAGMA page_count").fetchone()[0]
            return int(count) * int(conn.execute("PRAGMA page_size").fetchone()[0])

        return int(await store._run(pages))
    if kind == "postgres":
        async with store._connection() as conn:
            cur = await conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r'",
                (store.schema,),
            )
            row = await cur.fetchone()
            return int(row[0])
    return None


async def measure(kind: str, n: int, root: Path, dsn: str | None) -> dict[str, Any]:
    agent = Agent(
        name="loop",
        model=make_model(n, ModelLog()),
        tools=[echo],
        limits=Limits(max_iterations=n + 5),
    )
    async with opened(kind, root, dsn) as store:
        runtime = Runtime(store, agents=[agent])
        before = await db_bytes(kind, store, root)
        result = await runtime.run(agent, run_id="loop", input="Start.")
        if result.status != "completed" or result.text != final_text(n):
            raise SystemExit(f"{kind}: the run ended {result.status} with {result.text!r}")
        after = await db_bytes(kind, store, root)
        steps = list(store.step_bytes)  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        history = await runtime.history("loop")
        listed_s = time.perf_counter() - t0
        entries = await store.history("loop")  # type: ignore[attr-defined]
        entry_bytes = [len(encode_entry(e)) for e in entries]
        if len(history) != len(steps):
            raise SystemExit(f"{kind}: {len(history)} steps listed, {len(steps)} saved")
        middle = len(steps) // 2
        t0 = time.perf_counter()
        await runtime.fork("loop", at=middle, new_run_id="fork")
        fork_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        forked = await runtime.resume("fork")
        resume_s = time.perf_counter() - t0
        if forked.text != final_text(n):
            raise SystemExit(f"{kind}: the fork ended with {forked.text!r}")
    late = min(LATE_STEP, len(steps) - 3)
    late -= (late - EARLY_STEP) % 2  # a step of the same kind as step 10 (after a batch)
    return {
        "store": kind,
        "steps": len(steps),
        "early": (EARLY_STEP, steps[EARLY_STEP], entry_bytes[EARLY_STEP]),
        "late": (late, steps[late], entry_bytes[late]),
        "db_per_step": (after - before) / len(steps) if after is not None and before else None,
        "history_ms": listed_s * 1000,
        "fork_ms": fork_s * 1000,
        "fork_at": middle,
        "resume_ms": resume_s * 1000,
    }


def show(r: dict[str, Any]) -> None:
    def step(at: tuple[int, int, int]) -> str:
        index, total, entry = at
        return f"step {index}: {total - entry} + {entry} (entry) = {total} B"

    db = f"{r['db_per_step']:.0f} B" if r["db_per_step"] is not None else "-"
    print(
        f"{r['store']:<9} {r['steps']} steps | {step(r['early'])} | {step(r['late'])} | "
        f"db/step {db} | history {r['history_ms']:.1f} ms | fork at {r['fork_at']} "
        f"{r['fork_ms']:.1f} ms | the fork to its end {r['resume_ms']:.0f} ms"
    )


async def main_async(args: argparse.Namespace, root: Path, dsn: str | None) -> None:
    for kind in args.stores:
        show(await measure(kind, args.n, root, dsn))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=400, help="echo calls of the run (2N + 2 steps)")
    p.add_argument(
        "--stores",
        nargs="+",
        choices=["memory", "sqlite", "postgres"],
        default=["memory", "sqlite", "postgres"],
    )
    p.add_argument("--admin-dsn", default=ADMIN_DSN)
    args = p.parse_args()
    if args.n < LATE_STEP // 2 + 2:
        p.error(f"--n must be at least {LATE_STEP // 2 + 2} for step {LATE_STEP} to exist")
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="steadyrun-hist-")))
        dsn = (
            stack.enter_context(fresh_database(args.admin_dsn))
            if "postgres" in args.stores
            else None
        )
        asyncio.run(main_async(args, root, dsn))


if __name__ == "__main__":
    main()
