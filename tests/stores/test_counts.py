"""What the stores do per loop iteration, counted so it cannot grow silently (issue 20).

The counts come from ``countkit`` (how each is taken is in its docstring): whole iterations of
a real ``Runtime`` loop, one tool call each, on each store. ``BUDGET`` holds today's figures as
upper bounds; ``benchmarks/counts.py`` prints the same table (and ``docs/benchmarks.md`` shows
it). The first tests check the counters themselves on SQL whose counts are known.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

import countkit
import pgkit

pg_dsn = pgkit.database_fixture(prefix="steadyrun_counts")

ITERATIONS = 6

# Upper bounds per loop iteration, measured on the code of 2026-12-01 (before issue 20's write
# path). Issue 20 lowers them: its target is 2 commits per iteration, no read-before-write on the
# hot path, one hop to the SQLite thread per transaction (or none per statement) and at most 3
# round trips per PostgreSQL commit. When a change lowers a figure, lower its budget here too,
# so the gain cannot be lost again unnoticed. A count missing from a store's row is not bounded.
BUDGET: dict[str, dict[str, float]] = {
    "memory": {
        "encodes": 9,  # 10 before issue 20's write path
        "decodes": 0,  # 2; 1 until a call snapshot replacing a runtime-owned record whole
        # was written without reading that record first (``replaced_whole``)
        "encoded_bytes": 8_400,  # 9_400; the workload's argument is 1 KiB
        # the runtime's own copies of records (``dataclasses.replace``), the same on every
        # store: 12 until observers and settled calls stopped getting copies of their own
        # (observers deep-copy) and the memory store stopped merging runtime-owned records
        "copies": 8,
    },
    "sqlite": {
        "commits": 2,  # 4 before issue 20's write path
        "synced_commits": 2,  # each commit of an iteration is a safe point (see MIN_COMMITS)
        "transactions": 2,  # 4
        "statements": 17,  # 34; BEGIN and COMMIT included; 22 while each step read the lease
        # row, its previous history segment and its settled call's row before writing them
        "selects": 2,  # 14; 7 (the same reads); the two left are the feed's bounds
        "hops": 2,  # 6; 4 before the writer's statements ran on the loop: 2 commits only (the
        # reads between writes use the idle writer's connection, on the loop)
        "encodes": 9,  # 10
        "decodes": 0,  # 2; 1 (the settled call's row read back, ``decode_rows``) until a
        # settle over a row replaced whole took the snapshot itself (``HeldRow.whole``)
        "encoded_bytes": 8_400,  # 9_400
        # WAL frames: 4 KiB pages; no checkpoint falls in the window. 123_600 before schema 6
        # (work_log one b-tree: 102_400 measured)
        "written_bytes": 108_000,
    },
    "postgres": {
        "commits": 2,  # 4
        "transactions": 2,  # 4
        "statements": 2,  # 32; 23 with one pipelined transaction per step; 4 while the
        # feed was read on its own before each step (the step's commit now tells it)
        "selects": 0,  # 6; 2: the two feed reads
        "round_trips": 2,  # 23; 10 pipelined; 4 with the two feed reads: per commit one
        # statement (save_loop_step), which answers whether input waits in the feed
        "encodes": 9,  # 10
        "decodes": 0,  # 2; 1 as on SQLite
        "encoded_bytes": 8_400,  # 9_400
    },
}

# The guarantees need at least this many durable commits per iteration: the step with its
# calls' starts before a call's body runs, and the settled calls with the next step before the
# next model call. Fewer means a safe point is no longer made durable in time. On SQLite the
# bound is on synced commits (FULL): a lease-only commit (NORMAL) has no fsync of its own.
MIN_COMMITS = 2


def over_budget(kind: str, counts: countkit.Counts) -> list[str]:
    per = counts.per_iteration()
    return [
        f"{kind}: {name} {per[name]:g} per iteration > budget {bound:g}"
        for name, bound in BUDGET[kind].items()
        if per[name] > bound
    ]


# -- the counters --------------------------------------------------------------------------


def test_sqlite_counter_counts_statements_and_commits(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        conn.execute("CREATE TABLE t (a INTEGER)")  # before the window: not counted
        counter.active = True
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("SELECT count(*) FROM t").fetchone()
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        conn.execute("SELECT a FROM t").fetchall()
        conn.execute("COMMIT")  # read-only: a transaction, not a commit of writes
        conn.execute("INSERT INTO t VALUES (2)")  # autocommit: its own write transaction
        counter.active = False
        conn.close()
    c = counter.counts
    assert (c.statements, c.selects, c.transactions, c.commits) == (8, 2, 3, 2)
    assert c.synced_commits == 2  # sqlite3's default level is FULL


def test_sqlite_counter_counts_only_full_commits_as_synced(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (a INTEGER)")
        counter.active = True
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("COMMIT")  # a WAL commit without an fsync of its own
        conn.execute("INSERT INTO t VALUES (2)")  # autocommit, NORMAL too
        conn.execute("PRAGMA synchronous=2")
        conn.execute("INSERT INTO t VALUES (3)")  # FULL: synced
        counter.active = False
        conn.close()
    c = counter.counts
    assert (c.commits, c.synced_commits) == (3, 1)


async def test_postgres_counter_counts_round_trips(pg_dsn: str) -> None:
    with countkit.counting("postgres") as counter:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("CREATE TEMPORARY TABLE t (a integer)")
            counter.active = True
            await conn.execute("SELECT 1")  # autocommit, no pipeline: one round trip
            async with conn.pipeline():
                await conn.execute("INSERT INTO t VALUES (1)")
                await conn.execute("INSERT INTO t VALUES (2)")
                cur = await conn.execute("SELECT count(*) FROM t")
                assert await cur.fetchone() == (2,)  # a fetch waits: one round trip
            # the pipeline's exit syncs: one more
            counter.active = False
    c = counter.counts
    # the two INSERTs share the implicit transaction that the sync ends
    assert (c.statements, c.selects, c.commits, c.round_trips) == (4, 2, 1, 3)


# -- the loop, per store ---------------------------------------------------------------------


async def test_memory_store_per_iteration() -> None:
    counts = await countkit.count_loop("memory", iterations=ITERATIONS)
    assert counts.encodes > 0, "the codec hook counted nothing: is countkit still wired?"
    assert over_budget("memory", counts) == []


async def test_sqlite_store_per_iteration(tmp_path: Path) -> None:
    counts = await countkit.count_loop("sqlite", iterations=ITERATIONS, path=tmp_path / "counts.db")
    per = counts.per_iteration()
    assert counts.statements > 0, "the SQLite trace counted nothing: is countkit still wired?"
    assert per["synced_commits"] >= MIN_COMMITS  # a commit without its fsync is no safe point
    assert over_budget("sqlite", counts) == []


async def test_sqlite_iteration_reads_the_feed_inside_its_writes(tmp_path: Path) -> None:
    # The feed is read by each step's write transaction, not on its own before it: nothing of
    # an iteration runs outside its two write transactions.
    counts = await countkit.count_loop("sqlite", iterations=ITERATIONS, path=tmp_path / "c.db")
    outside: list[str] = []
    inside = False
    for sql in counts.statement_log:
        if sql.startswith("BEGIN"):
            inside = True
        elif sql == "COMMIT":
            inside = False
        elif not inside:
            outside.append(sql)
    assert outside == []
    assert sum("FROM feed" in sql for sql in counts.statement_log) == 2 * ITERATIONS


async def test_postgres_store_per_iteration(pg_dsn: str) -> None:
    counts = await countkit.count_loop("postgres", iterations=ITERATIONS, dsn=pg_dsn)
    per = counts.per_iteration()
    assert counts.round_trips > 0, "the psycopg hooks counted nothing: is countkit still wired?"
    assert per["commits"] >= MIN_COMMITS
    assert over_budget("postgres", counts) == []
    # Each commit is one statement, so one round trip, and it tells the loop of waiting input:
    # no read of its own on the hot path.
    assert counts.statements == counts.round_trips == counts.commits
    assert counts.selects == 0


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_counts_do_not_grow_with_the_history(kind: str, tmp_path: Path) -> None:
    # Every iteration costs the same: a longer window gives the same figures per iteration.
    short = await countkit.count_loop(kind, iterations=3, path=tmp_path / "a.db")
    long = await countkit.count_loop(kind, iterations=9, path=tmp_path / "b.db")
    counted = ("commits", "statements", "hops", "encodes", "decodes", "copies")
    assert {k: short.per_iteration()[k] for k in counted} == {
        k: long.per_iteration()[k] for k in counted
    }
