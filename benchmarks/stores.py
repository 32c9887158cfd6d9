"""Durable stores under the run loop: throughput, bytes, resume, many suspended runs, listing.

The workload is the one of ``loop_overhead.py`` (imported from it, so both measure the same
loop): a ``FunctionModel`` asks for one ``echo`` call per model call (1 KiB text) until N tool
results are in, then answers ``"done after N tool calls"``. Here the loop runs on the durable
stores instead of ``MemoryStore``:

* ``SqliteStore``: a file in a temporary directory, ``synchronous`` FULL (the default) and
  NORMAL;
* ``PostgresStore``: a database the script creates on the local server and drops at the end
  (each measurement gets its own PostgreSQL schema in it), default pool (1–10 connections).

What it measures, per store:

1. steps per second for one run of N=400 iterations and for 50 concurrent runs of N=40 (one
   store, one ``Runtime``, ``asyncio.gather``), with the bytes of the steps at indices 10 and
   400 of the single run (the same index convention as ``loop_overhead.py``); then one more
   single run with every store call timed, to show where the time goes;
2. resuming a 400-iteration run: the ``echo`` call of iteration 400 hands itself to the host
   (``await_external``), the run suspends, its store is closed; a *new* store object opens the
   same database, and the script times ``load``, ``Runtime.settle`` and ``Runtime.resume`` to
   the end of the run;
3. 10,000 runs (N=10) each suspended at iteration 5 by ``await_external``. The first 1,000 are
   run by the runtime (500 at a time), which gives the cost of creating a suspended run; the
   other 9,000 are copies of the first one under new ids, written through the store's public
   API (one ``save_step`` plus the consumed input message each) because running all of them
   would take about 4 minutes on SQLite and 8 on PostgreSQL with 2 cores. Then the database
   size, and from a new store object the median ``load``, ``settle`` and ``resume`` times of
   20 sampled runs (half run, half copied; every one resumed to its final text);
4. ``list_runs`` on a store of 100,000 runs: those 10,000 plus 90,000 one-step runs written
   through the public ``save_step`` (500 concurrent writes at a time; for SQLite through a
   second store object with ``synchronous="NORMAL"`` on the same file).

Usage::

    .venv/bin/python benchmarks/stores.py                      # everything, ~7 minutes
    .venv/bin/python benchmarks/stores.py --quick              # smaller: a smoke run
    .venv/bin/python benchmarks/stores.py --stores sqlite --json
    .venv/bin/python benchmarks/stores.py --through-runtime 10000   # run all 10,000

The script exits non-zero when a run does not end as expected (status, final text, number of
calls); it never asserts on timing. It removes its temporary files and drops its database even
when it fails. See ``benchmarks/README.md`` for what the columns mean.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench_pg import fresh_database
from loop_overhead import EARLY_STEP, LATE_STEP, ModelLog, echo_text, final_text, fmt, make_model

import steadyrun
from steadyrun import Agent, Limits, RunResult, Runtime, SqliteStore
from steadyrun.control import await_external
from steadyrun.records import Checkpoint, ContextChange, RunRecord, RunSnapshot, RunStatus, Step
from steadyrun.stores import FeedMessage, Store

ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
AGENT = "loop"
BATCH = 500  # runs (or filler saves) started at once with asyncio.gather
WARM_UP_STEPS = 22  # steps of the warm-up run (N=10: 2N + 2)
FILL_AGENTS = 10  # filler runs belong to agent-0 ... agent-9
FILL_STATUSES: tuple[RunStatus, ...] = ("completed",) * 7 + ("failed", "suspended", "running")


@dataclass(frozen=True)
class Sizes:
    one_n: int = 400  # iterations of the single run
    conc_runs: int = 50
    conc_n: int = 40  # iterations of each concurrent run
    resume_n: int = 400  # iterations of the run that suspends at its last one
    suspended: int = 10_000  # runs suspended at once
    through_runtime: int = 1_000  # of those, created by running them; the rest are copies
    susp_n: int = 10  # iterations of each of them; each suspends at iteration susp_n // 2
    samples: int = 20  # of those, settled and resumed from a new store object
    listed: int = 100_000  # runs in the store when listing
    list_reps: int = 20  # timed repetitions of each listing query (median)


QUICK = Sizes(
    one_n=200,
    conc_runs=50,
    conc_n=20,
    resume_n=100,
    suspended=1_000,
    through_runtime=200,
    listed=10_000,
    list_reps=5,
)


# -- the workload ------------------------------------------------------------------------------


def echo_tool(suspend_at: int | None) -> steadyrun.Tool:
    """``echo`` of the loop-overhead workload; the call of step ``suspend_at`` awaits the host."""

    @steadyrun.tool(name="echo")
    async def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: What to return.
        """
        if suspend_at is not None and int(text[:6]) == suspend_at:
            await_external({"step": suspend_at})
        return text

    return echo


def make_agent(n: int, log: ModelLog, suspend_at: int | None = None) -> Agent:
    return Agent(
        name=AGENT,
        model=make_model(n, log),
        instructions="Call echo until told otherwise.",
        tools=[echo_tool(suspend_at)],
        limits=Limits(max_iterations=n + 5),
    )


def check_completed(result: RunResult, n: int) -> None:
    expected = final_text(n)
    if result.status != "completed" or result.text != expected or len(result.calls) != n:
        raise SystemExit(
            f"FAILED: run {result.run_id} ended {result.status!r} with text {result.text!r} and "
            f"{len(result.calls)} calls (error: {result.error!r}); expected {expected!r} and {n}"
        )


def waiting_call(result: RunResult, k: int) -> str:
    """The id of the one call the suspended run waits for (the echo of step ``k``)."""
    waiting = [c for c in result.calls if c.status == "waiting" and c.handover == "await"]
    if result.status != "suspended" or len(waiting) != 1 or len(result.calls) != k + 1:
        raise SystemExit(
            f"FAILED: run {result.run_id} ended {result.status!r} with {len(result.calls)} calls "
            f"and {len(waiting)} waiting (error: {result.error!r}); expected suspended, "
            f"{k + 1} calls, 1 waiting"
        )
    return waiting[0].id


# -- the stores --------------------------------------------------------------------------------


@dataclass
class Backend:
    """Opens store objects on one database (file or schema), and measures its size."""

    label: str  # e.g. "SQLite FULL"
    settings: str
    open: Callable[[str], Store]  # place -> a new store object on that file or schema
    size: Callable[[str], Awaitable[dict[str, int]]]
    filler: Callable[[str], Store]  # a store object for the bulk fill of the listing test


def sqlite_backend(root: Path, synchronous: str) -> Backend:
    def path(place: str) -> Path:
        return root / f"{place}.db"

    async def size(place: str) -> dict[str, int]:
        p = path(place)

        def read() -> dict[str, int]:
            conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                page = conn.execute("PRAGMA page_size").fetchone()[0]
            finally:
                conn.close()
            wal = Path(f"{p}-wal")
            return {
                "db_bytes": pages * page,  # the database as readers see it (WAL included)
                "file_bytes": p.stat().st_size,
                "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            }

        return await asyncio.to_thread(read)

    return Backend(
        label=f"SQLite {synchronous}",
        settings=f"synchronous={synchronous}, WAL",
        open=lambda place: SqliteStore(path(place), synchronous=synchronous),  # type: ignore[arg-type]
        size=size,
        filler=lambda place: SqliteStore(path(place), synchronous="NORMAL"),
    )


def postgres_backend(dsn: str) -> Backend:
    from steadyrun.stores import PostgresStore

    async def size(place: str) -> dict[str, int]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint,"
                " pg_database_size(current_database()) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r'",
                (place,),
            )
            row = await cur.fetchone()
        assert row is not None
        # tables with their TOAST data and indexes; the whole database for reference
        return {"db_bytes": int(row[0]), "database_bytes": int(row[1])}

    return Backend(
        label="PostgreSQL",
        settings="pool 1–10 (defaults)",
        open=lambda place: PostgresStore(dsn, schema=place),
        size=size,
        filler=lambda place: PostgresStore(dsn, schema=place),
    )


def steps_of(store: Store) -> list[int]:
    return list(store.step_bytes)  # type: ignore[attr-defined]


# -- 1. throughput -----------------------------------------------------------------------------


async def warm_up(store: Store) -> None:
    """One untimed N=10 run: opens the connection(s) and the schema."""
    log = ModelLog()
    check_completed(
        await Runtime(store).run(make_agent(10, log), run_id="warm-up", input="Start."), 10
    )


STORE_CALLS = ("save_step", "save_call", "pending", "load", "append", "claim", "consume")


def instrument(store: Store) -> dict[str, list[float]]:
    """Time every call of the runtime into the store (wall seconds, by method)."""
    spent: dict[str, list[float]] = {name: [] for name in STORE_CALLS}
    for name in STORE_CALLS:
        method = getattr(store, name)

        async def timed(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await _method(*args, **kw)
            finally:
                spent[_name].append(time.perf_counter() - t0)

        setattr(store, name, timed)
    return spent


async def throughput(backend: Backend, place: str, runs: int, n: int) -> dict[str, Any]:
    store = backend.open(place)
    try:
        await warm_up(store)
        before = len(steps_of(store))
        runtime = Runtime(store)
        agent = make_agent(n, ModelLog())
        c0, t0 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(
            *(runtime.run(agent, run_id=f"r{i}", input="Start.") for i in range(runs))
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        for result in results:
            check_completed(result, n)
        steps = steps_of(store)[before:]
        sizes = await backend.size(place)
        db_bytes_per_step = sizes["db_bytes"] / len(steps_of(store))  # warm-up run included
        calls: dict[str, list[float]] = {}
        if runs == 1:  # one more run, every store call timed: where the time goes
            spent = instrument(store)
            t0 = time.perf_counter()
            check_completed(await Runtime(store).run(agent, run_id="timed", input="Start."), n)
            timed_wall = time.perf_counter() - t0
            calls = {
                name: [len(v) / n, statistics.fmean(v) * 1e3] for name, v in spent.items() if v
            }
    finally:
        await store.close()
    rec: dict[str, Any] = {
        "test": "throughput",
        "store": backend.label,
        "settings": backend.settings,
        "runs": runs,
        "n": n,
        "steps_saved": len(steps),
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": len(steps) / wall,
        "iterations_per_s": runs * n / wall,
        "ms_per_iteration_per_run": wall / n * 1e3,
        "db_bytes_per_step": db_bytes_per_step,
    }
    if runs == 1:
        rec["step_bytes_early"] = steps[EARLY_STEP] if len(steps) > EARLY_STEP else None
        rec["step_bytes_late"] = steps[LATE_STEP] if len(steps) > LATE_STEP + 1 else None
        rec["model_step_bytes_early"] = (
            steps[EARLY_STEP + 1] if len(steps) > EARLY_STEP + 2 else None
        )
        rec["model_step_bytes_late"] = steps[LATE_STEP + 1] if len(steps) > LATE_STEP + 2 else None
        # per store method: [calls per iteration, mean ms] in the instrumented run
        rec["store_calls"] = calls
        rec["store_share"] = sum(c * m for c, m in calls.values()) * n / 1e3 / timed_wall
        rec["instrumented_ms_per_iteration"] = timed_wall / n * 1e3
    return rec


# -- 2. resume of a long run -------------------------------------------------------------------


async def resume_long(backend: Backend, place: str, n: int) -> dict[str, Any]:
    k = n - 1  # the echo of the last iteration awaits the host
    first = backend.open(place)
    try:
        await warm_up(first)
        result = await Runtime(first).run(
            make_agent(n, ModelLog(), suspend_at=k), run_id="long", input="Start."
        )
        call_id = waiting_call(result, k)
        steps_before = len(steps_of(first)) - WARM_UP_STEPS
    finally:
        await first.close()

    store = backend.open(place)  # a new store object: a new process would do the same
    try:
        t0 = time.perf_counter()
        await store.list_runs(limit=1)  # opens the connection (and checks the schema)
        open_ms = (time.perf_counter() - t0) * 1e3
        loads = []
        for _ in range(5):
            t0 = time.perf_counter()
            snap = await store.load("long")
            loads.append((time.perf_counter() - t0) * 1e3)
        assert snap is not None
        log = ModelLog()
        runtime = Runtime(store, agents=[make_agent(n, log, suspend_at=k)])
        t0 = time.perf_counter()
        await runtime.settle("long", call_id, result=echo_text(k))
        t1 = time.perf_counter()
        done = await runtime.resume("long")
        t2 = time.perf_counter()
        check_completed(done, n)
    finally:
        await store.close()
    return {
        "test": "resume",
        "store": backend.label,
        "settings": backend.settings,
        "n": n,
        "steps_before_suspend": steps_before,
        "context_messages": len(snap.context),
        "call_records": len(snap.calls),
        "open_ms": open_ms,
        "load_ms": statistics.median(loads),
        "load_ms_first": loads[0],
        "settle_ms": (t1 - t0) * 1e3,
        "resume_to_first_model_call_ms": (log.stamps[0] - t1) * 1e3,
        "resume_to_end_ms": (t2 - t1) * 1e3,
    }


# -- 3. many suspended runs --------------------------------------------------------------------


async def clone_run(store: Store, template: RunSnapshot, run_id: str) -> None:
    """Write a copy of the suspended run ``template`` under ``run_id``: one step, one input.

    The copy holds the same rows a runtime-created run holds (context log, call records,
    blocks, run row and checkpoint, the consumed input message), written through the store's
    public API in three transactions instead of the ~40 of a run.
    """
    old = template.run.run_id
    checkpoint = replace(
        template.checkpoint,
        seen_inputs=[key.replace(old, run_id) for key in template.checkpoint.seen_inputs],
    )
    step = Step(
        run=replace(template.run, run_id=run_id),
        checkpoint=checkpoint,
        context=ContextChange(append=list(template.context)),
        blocks=list(template.blocks),
        calls=list(template.calls),
    )
    await store.save_step(run_id, step)
    await store.append(run_id, FeedMessage(id=f"{run_id}:input", content="Start."))
    await store.consume(run_id, 1)


async def many_suspended(backend: Backend, place: str, sizes: Sizes) -> dict[str, Any]:
    n, total = sizes.susp_n, sizes.suspended
    real = min(total, sizes.through_runtime)
    k = n // 2 - 1  # the echo of iteration n // 2 (k = results already in) awaits the host
    ids: dict[str, str] = {}
    store = backend.open(place)
    try:
        await warm_up(store)
        t0 = time.perf_counter()
        for start in range(0, real, BATCH):
            # a new runtime and agent per batch: FunctionModel keeps every request it saw
            agent = make_agent(n, ModelLog(), suspend_at=k)
            runtime = Runtime(store)
            batch = [f"s{i:06d}" for i in range(start, min(real, start + BATCH))]
            results = await asyncio.gather(
                *(runtime.run(agent, run_id=r, input="Start.") for r in batch)
            )
            for run_id, result in zip(batch, results, strict=True):
                ids[run_id] = waiting_call(result, k)
        create_s = time.perf_counter() - t0
        steps = len(steps_of(store)) - WARM_UP_STEPS
        size_real = await backend.size(place)

        template = await store.load("s000000")
        assert template is not None
        t0 = time.perf_counter()
        for start in range(real, total, BATCH):
            batch = [f"s{i:06d}" for i in range(start, min(total, start + BATCH))]
            await asyncio.gather(*(clone_run(store, template, r) for r in batch))
            ids.update(dict.fromkeys(batch, ids["s000000"]))
        copy_s = time.perf_counter() - t0
        size_all = await backend.size(place)
    finally:
        await store.close()

    store = backend.open(place)  # a new store object, as a new process would open
    try:
        await store.list_runs(limit=1)
        half = sizes.samples // 2 if real < total else sizes.samples
        sample = spread(0, real, half) + spread(real, total, sizes.samples - half)
        log = ModelLog()
        runtime = Runtime(store, agents=[make_agent(n, log, suspend_at=k)])
        loads, settles, resumes = [], [], []
        for run_id in sample:
            t0 = time.perf_counter()
            snap = await store.load(run_id)
            t1 = time.perf_counter()
            if snap is None or snap.run.status != "suspended":
                raise SystemExit(f"FAILED: run {run_id} is not there, or not suspended")
            await runtime.settle(run_id, ids[run_id], result=echo_text(k))
            t2 = time.perf_counter()
            done = await runtime.resume(run_id)
            t3 = time.perf_counter()
            check_completed(done, n)
            loads.append((t1 - t0) * 1e3)
            settles.append((t2 - t1) * 1e3)
            resumes.append((t3 - t2) * 1e3)
    finally:
        await store.close()
    med = statistics.median
    return {
        "test": "suspended",
        "store": backend.label,
        "settings": backend.settings,
        "runs": total,
        "through_runtime": real,
        "n": n,
        "suspended_at_iteration": k + 1,
        "steps_saved": steps,
        "create_s": create_s,
        "create_ms_per_run": create_s / real * 1e3,
        "copy_s": copy_s,
        "copy_ms_per_run": copy_s / (total - real) * 1e3 if total > real else None,
        **size_all,
        "db_bytes_per_run": size_all["db_bytes"] / total,
        "db_bytes_per_run_through_runtime": size_real["db_bytes"] / real,
        "sampled": len(sample),
        "load_ms": med(loads),
        "settle_ms": med(settles),
        "resume_to_end_ms": med(resumes),
        "settle_and_resume_ms": med(s + r for s, r in zip(settles, resumes, strict=True)),
    }


def spread(lo: int, hi: int, count: int) -> list[str]:
    """``count`` run ids evenly spread over ``s<lo>`` ... ``s<hi - 1>``."""
    if count <= 0 or hi <= lo:
        return []
    step = (hi - lo) / count
    return [f"s{lo + int(step * (j + 0.5)):06d}" for j in range(count)]


# -- 4. listing --------------------------------------------------------------------------------


def filler_step(i: int, now: datetime) -> Step:
    updated = now - timedelta(seconds=60 + (i * 7919) % 604_800)  # spread over a week
    run = RunRecord(
        run_id=f"f{i:06d}",
        agent=f"agent-{i % FILL_AGENTS}",
        status=FILL_STATUSES[(i // FILL_AGENTS) % len(FILL_STATUSES)],
        created_at=updated - timedelta(minutes=5),
        updated_at=updated,
        steps=1,
    )
    return Step(run=run, checkpoint=Checkpoint())


async def listing(backend: Backend, place: str, sizes: Sizes) -> dict[str, Any]:
    existing = sizes.suspended + 1  # the suspended runs and the warm-up run
    fill = max(0, sizes.listed - existing)
    now = datetime.now(UTC)
    store = backend.filler(place)
    try:
        t0 = time.perf_counter()
        for start in range(0, fill, BATCH):
            steps = [filler_step(i, now) for i in range(start, min(fill, start + BATCH))]
            await asyncio.gather(*(store.save_step(s.run.run_id, s) for s in steps))
        fill_s = time.perf_counter() - t0
    finally:
        await store.close()
    sizes_now = await backend.size(place)

    store = backend.open(place)
    try:
        first_page = await store.list_runs()
        queries: dict[str, Callable[[], Awaitable[list[Any]]]] = {
            "all": lambda: store.list_runs(),
            "status=suspended": lambda: store.list_runs(status="suspended"),
            "agent=agent-3": lambda: store.list_runs(agent="agent-3"),
            "page 2": lambda: store.list_runs(updated_before=first_page[-1].updated_at),
            "status=failed, agent=agent-3": lambda: store.list_runs(
                status="failed", agent="agent-3"
            ),
        }
        timings: dict[str, float] = {}
        rows: dict[str, int] = {}
        for name, query in queries.items():
            await query()  # untimed: first use of the statement
            times = []
            for _ in range(sizes.list_reps):
                t0 = time.perf_counter()
                got = await query()
                times.append((time.perf_counter() - t0) * 1e3)
            timings[name] = statistics.median(times)
            rows[name] = len(got)
        total = len(await store.list_runs(limit=sizes.listed + 10))  # one read of every row
    finally:
        await store.close()
    if total != existing + fill:
        raise SystemExit(f"FAILED: the store lists {total} runs, expected {existing + fill}")
    return {
        "test": "listing",
        "store": backend.label,
        "settings": backend.settings,
        "runs": total,
        "filled": fill,
        "fill_s": fill_s,
        "fill_per_s": fill / fill_s if fill_s else None,
        **sizes_now,
        "list_ms": timings,
        "list_rows": rows,
    }


# -- tables ------------------------------------------------------------------------------------


def kb(v: float | None) -> str:
    return "–" if v is None else f"{v / 1024:,.1f}"


def mb(v: float | None) -> str:
    return "–" if v is None else f"{v / 1024 / 1024:,.1f}"


def nbytes(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def markdown(head: Sequence[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def tables(records: list[dict[str, Any]]) -> str:
    out = []
    rows = [
        [
            r["store"],
            r["settings"],
            f"{r['runs']} × {r['n']}",
            f"{r['steps_saved']:,}",
            f"{r['wall_s']:.2f}",
            f"{r['steps_per_s']:,.0f}",
            f"{r['iterations_per_s']:,.0f}",
            f"{r['cpu_s'] / r['wall_s'] * 100:.0f}%",
            nbytes(r.get("step_bytes_early")),
            nbytes(r.get("step_bytes_late")),
            f"{r['db_bytes_per_step']:,.0f}",
        ]
        for r in records
        if r["test"] == "throughput"
    ]
    if rows:
        head = [
            "store",
            "settings",
            "runs × N",
            "steps saved",
            "wall s",
            "steps/s",
            "iterations/s",
            "client CPU",
            f"B/step @{EARLY_STEP}",
            f"B/step @{LATE_STEP}",
            "db B/step",
        ]
        out.append("### Steps per second\n\n" + markdown(head, rows))
    singles = [r for r in records if r["test"] == "throughput" and r.get("store_calls")]
    if singles:
        names = [m for m in STORE_CALLS if m in singles[0]["store_calls"]][:3]
        rows = [
            [
                r["store"],
                f"1 × {r['n']}",
                fmt(r["instrumented_ms_per_iteration"]),
                *(
                    f"{r['store_calls'][m][0]:.2f} × {fmt(r['store_calls'][m][1])}"
                    if m in r["store_calls"]
                    else "–"
                    for m in names
                ),
                f"{r['store_share'] * 100:.0f}%",
            ]
            for r in singles
        ]
        head = ["store", "runs × N", "ms/iteration", *(f"{m}: per iter × ms" for m in names)]
        head.append("in the store")
        title = "### Where the time of one run goes (a second run, every store call timed)"
        out.append(title + "\n\n" + markdown(head, rows))
    rows = [
        [
            r["store"],
            r["settings"],
            str(r["n"]),
            f"{r['steps_before_suspend']:,}",
            f"{r['context_messages']:,} / {r['call_records']:,}",
            fmt(r["open_ms"]),
            f"{fmt(r['load_ms'])} ({fmt(r['load_ms_first'])})",
            fmt(r["settle_ms"]),
            fmt(r["resume_to_first_model_call_ms"]),
            fmt(r["resume_to_end_ms"]),
        ]
        for r in records
        if r["test"] == "resume"
    ]
    if rows:
        head = [
            "store",
            "settings",
            "N",
            "steps before suspend",
            "messages / call records",
            "open ms",
            "load ms (first)",
            "settle ms",
            "resume→first model call ms",
            "resume to end ms",
        ]
        out.append("### Resume of a run suspended at its last iteration\n\n" + markdown(head, rows))
    rows = [
        [
            r["store"],
            r["settings"],
            f"{r['runs']:,} ({r['through_runtime']:,})",
            f"{r['suspended_at_iteration']} of {r['n']}",
            fmt(r["create_ms_per_run"]),
            fmt(r["copy_ms_per_run"]),
            mb(r["db_bytes"]),
            f"{kb(r['db_bytes_per_run'])} ({kb(r['db_bytes_per_run_through_runtime'])})",
            fmt(r["load_ms"]),
            fmt(r["settle_ms"]),
            fmt(r["resume_to_end_ms"]),
        ]
        for r in records
        if r["test"] == "suspended"
    ]
    if rows:
        head = [
            "store",
            "settings",
            "suspended runs (of which run)",
            "suspended at",
            "ms/run, run",
            "ms/run, copied",
            "db MB",
            "KB/run (run ones only)",
            "load ms",
            "settle ms",
            "resume to end ms",
        ]
        title = "### Many suspended runs (medians over the sampled runs, from a new store object)"
        out.append(title + "\n\n" + markdown(head, rows))
    listed = [r for r in records if r["test"] == "listing"]
    if listed:
        names = list(listed[0]["list_ms"])
        rows = [
            [
                r["store"],
                f"{r['runs']:,}",
                f"{r['fill_s']:.1f} ({r['fill_per_s']:,.0f}/s)" if r["fill_per_s"] else "–",
                mb(r["db_bytes"]),
                *(f"{fmt(r['list_ms'][q])} ({r['list_rows'][q]})" for q in names),
            ]
            for r in listed
        ]
        head = ["store", "runs", "fill s (saves/s)", "db MB", *(f"{q} ms (rows)" for q in names)]
        out.append("### `list_runs` (limit 100; median ms)\n\n" + markdown(head, rows))
    return "\n\n".join(out)


# -- main --------------------------------------------------------------------------------------


def emit(rec: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in rec.items()}))
    else:
        print(f"  {rec['test']:<10} {rec['store']:<15} done", file=sys.stderr)
    sys.stdout.flush()


async def main_async(
    args: argparse.Namespace, sizes: Sizes, root: Path, dsn: str | None
) -> list[dict[str, Any]]:
    full = sqlite_backend(root, "FULL")
    normal = sqlite_backend(root, "NORMAL")
    pg = postgres_backend(dsn) if dsn is not None else None
    stores: list[Backend] = []
    if "sqlite" in args.stores:
        stores += [full, normal]
    if pg is not None:
        stores.append(pg)
    records: list[dict[str, Any]] = []

    async def record(coro: Awaitable[dict[str, Any]]) -> None:
        rec = await coro
        rec["load_1m_after"] = os.getloadavg()[0]  # this process and the server count too
        records.append(rec)
        emit(rec, args.json)

    for b in stores:
        await record(throughput(b, "one_" + b.label.split()[-1].lower(), 1, sizes.one_n))
    for b in stores:
        place = "conc_" + b.label.split()[-1].lower()
        await record(throughput(b, place, sizes.conc_runs, sizes.conc_n))
    bulk = [b for b in stores if b is not normal]  # SQLite FULL (the default) and PostgreSQL
    for b in bulk:
        await record(resume_long(b, "resume", sizes.resume_n))
    for b in bulk:
        await record(many_suspended(b, "bulk", sizes))
        await record(listing(b, "bulk", sizes))
    return records


def server_settings(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = [
            conn.execute(f"SHOW {name}").fetchone()
            for name in ("server_version", "synchronous_commit", "fsync", "shared_buffers")
        ]
    version, sync_commit, fsync, buffers = (r[0] if r else "?" for r in rows)
    return (
        f"PostgreSQL {version.split()[0]} on 127.0.0.1 (synchronous_commit={sync_commit}, "
        f"fsync={fsync}, shared_buffers={buffers}), psycopg {psycopg.__version__}"
    )


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    p.add_argument("--json", action="store_true", help="print one JSON line per measurement")
    p.add_argument(
        "--stores",
        nargs="+",
        choices=["sqlite", "postgres"],
        default=["sqlite", "postgres"],
        help="which stores to measure",
    )
    p.add_argument("--admin-dsn", default=ADMIN_DSN, help="where to create the benchmark database")
    p.add_argument("--tmp", default=None, help="directory for the SQLite files (a temp dir in it)")
    p.add_argument("--suspended", type=int, help="how many suspended runs (default 10,000)")
    p.add_argument(
        "--through-runtime", type=int, help="of the suspended runs, how many run (default 1,000)"
    )
    p.add_argument("--listed", type=int, help="how many runs when listing (default 100,000)")
    args = p.parse_args()
    sizes = QUICK if args.quick else Sizes()
    if args.suspended is not None:
        sizes = replace(sizes, suspended=args.suspended)
    if args.listed is not None:
        sizes = replace(sizes, listed=args.listed)
    if args.through_runtime is not None:
        sizes = replace(sizes, through_runtime=args.through_runtime)
    if (
        sizes.suspended < sizes.samples
        or sizes.listed < sizes.suspended + 1
        or sizes.through_runtime < sizes.samples
    ):
        p.error(f"need --suspended, --through-runtime >= {sizes.samples}, --listed > --suspended")
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    # SIGTERM, and SIGINT even where a shell ignores it, unwind like Ctrl-C: cleanup runs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)
    with contextlib.ExitStack() as stack:
        tmp = tempfile.TemporaryDirectory(prefix="steadyrun-bench-", dir=args.tmp)
        root = Path(stack.enter_context(tmp))
        dsn = None
        server = ""
        if "postgres" in args.stores:
            dsn = stack.enter_context(
                fresh_database(
                    args.admin_dsn, hint=", pass --admin-dsn, or run with --stores sqlite"
                )
            )
            server = server_settings(dsn)
        records = asyncio.run(main_async(args, sizes, root, dsn))

    if not args.json:
        print(
            f"steadyrun {steadyrun.__version__}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version} (files under {root.parent}), "
            f"{server}; {'--quick' if args.quick else 'full'} sizes\n"
        )
        print(tables(records))
        loads = ", ".join(f"{r['load_1m_after']:.1f}" for r in records)
        print(
            f"\nall checks passed; total {time.perf_counter() - t0:.1f} s; 1-min load average "
            f"{load0:.1f} at the start, after each measurement: {loads}"
        )


if __name__ == "__main__":
    main()
