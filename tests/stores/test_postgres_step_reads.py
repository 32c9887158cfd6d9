"""PostgresStore: what a loop step reads on the server does not grow with the run.

``save_loop_step`` settles a call by updating its row where the row is still the one this
store wrote. Planned as a join of the run's call rows with the settled ones, that read (and
hashed) every call row of the run at each step: a run of N calls read about N²/2 rows on the
server. These tests count, through PostgreSQL's own statistics, the live rows each table gave
the scans of a run (``idx_tup_fetch`` and ``seq_tup_read``) and bound them by a constant per
step.

Live rows, not index entries read: the run's row is updated at every step, and while any
transaction of the server that has an id stays open (another test's, under pytest-xdist) its
old versions cannot be removed, so each lookup of the run by its key reads them all from the
index, a count that grows with the run for a reason that is not the step's. With such a
transaction held open, the index entries read from ``runs`` a step went from 84 in a run of 20
calls to 324 in a run of 80; the live rows stay the same few.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext

import psycopg
import pytest
from pgpaths import as_left_by, general_path_only, half_written, loop_step_functions

import pgkit
from loopsteps import loop_steps
from steadyrun.stores import PostgresStore
from steadyrun.stores._postgres_schema import MIGRATIONS

pg_dsn = pgkit.database_fixture()

SHORT, LONG = 20, 80
"""Tool calls of the two runs compared: a read that grows with the run is 4x more a step."""


async def _reads(dsn: str, schema: str) -> dict[str, tuple[int, int]]:
    """Per table of ``schema``: (live rows its scans gave, rows updated), as the statistics
    hold (an index scan's rows and a bitmap scan's are both in ``idx_tup_fetch``)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT relname, COALESCE(idx_tup_fetch, 0) + COALESCE(seq_tup_read, 0), n_tup_upd"
            " FROM pg_stat_user_tables WHERE schemaname = %s",
            (schema,),
        )
        return {name: (int(read), int(upd)) for name, read, upd in await cur.fetchall()}


async def _flushed(dsn: str, schema: str, settled: int) -> dict[str, tuple[int, int]]:
    """The statistics once the store's closed backends have reported them.

    A backend reports its counts when it exits; the settled calls' updates are counted with
    the reads, so seeing them all means the reads are in too.
    """
    for _ in range(200):
        got = await _reads(dsn, schema)
        if got.get("calls", (0, 0))[1] >= settled:
            return got
        await asyncio.sleep(0.05)
    pytest.fail(f"the statistics never showed {settled} call updates: {got}")


async def _per_step(dsn: str, calls: int) -> dict[str, float]:
    """Live rows read from each table per step, over a run of ``calls`` tool calls."""
    steps = loop_steps(calls)
    schema = f"reads{calls}"
    async with PostgresStore(dsn, schema=schema) as store:
        for s in steps:
            await store.save_step("r", s)
    stats = await _flushed(dsn, schema, calls)
    return {table: read / len(steps) for table, (read, _) in stats.items()}


@pytest.mark.parametrize("path", ["one statement", "general"])
async def test_a_loop_step_reads_as_much_in_a_long_run_as_in_a_short_one(
    pg_dsn: str, path: str
) -> None:
    with general_path_only() if path == "general" else nullcontext():
        short = await _per_step(pg_dsn, SHORT)
        long = await _per_step(pg_dsn, LONG)
    # Each step looks rows up by key (the run, the log's last message, the previous step's
    # entry, the call it settles, the feed): the same few rows a step whatever the run's
    # length. A run-wide read is LONG/SHORT times as many rows a step in the long run.
    for table, read in long.items():
        assert read <= short[table] * 1.1 + 0.5, (table, short, long)
    assert long["calls"] <= 1.5, long  # by its key, the call each step starts or settles


async def test_a_version_7_database_gets_the_update_by_key_and_keeps_its_runs(
    pg_dsn: str,
) -> None:
    steps = await half_written(pg_dsn)
    # What version 7 left: version 6's function as it shipped, with its join.
    v6 = MIGRATIONS[5].format(s='"steadyrun"')
    await as_left_by(pg_dsn, 7, v6.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    v6_source = (await loop_step_functions(pg_dsn))[0]
    assert "FROM unnest(p_set_ids" in v6_source
    async with PostgresStore(pg_dsn) as store:
        for s in steps[3:]:
            await store.save_step("r", s)
        snap = await store.load("r")
    v8_source = (await loop_step_functions(pg_dsn))[0]
    assert "FROM unnest(p_set_ids" not in v8_source and "FOR i IN" in v8_source
    assert snap is not None and snap.run.status == "completed"
    assert [(c.status, c.result) for c in snap.calls] == [
        ("succeeded", "result 0"),
        ("succeeded", "result 1"),
    ]
