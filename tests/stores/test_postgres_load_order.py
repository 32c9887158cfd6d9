"""PostgresStore.load and dump_run: the server never sorts a run's rows; they come in order.

``load`` read the context ``ORDER BY idx``, the calls ``ORDER BY row_id`` and the blocks
``ORDER BY position``. Where the planner read a run's rows by a bitmap scan (a table without
statistics yet, or with stale ones), it sorted them, and a context larger than ``work_mem``
(4 MB by default: about 3,300 messages of 1 KiB) was sorted in files on disk: at 8,000
messages, 35 ms of the server's time against 3 ms for the read itself. The store now reads
each table's rows in any order with their position and puts them in order itself, which costs
a pass over rows that are nearly always in order already.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

import pgkit
from loopsteps import loop_steps
from steadyrun.stores import PostgresStore

pg_dsn = pgkit.database_fixture()

CALLS = 30


async def _saved(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        for step in loop_steps(CALLS):
            await store.save_step("r", step)


@asynccontextmanager
async def _statements(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[tuple[str, Any]]]:
    """The statements every psycopg connection executes meanwhile, with their parameters."""
    seen: list[tuple[str, Any]] = []
    execute = psycopg.AsyncConnection.execute

    async def recording(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        seen.append((str(query), params))
        return await execute(self, query, params, **kw)

    with monkeypatch.context() as m:
        m.setattr(psycopg.AsyncConnection, "execute", recording)
        yield seen


async def _plans(dsn: str, statements: list[tuple[str, Any]], *settings: str) -> list[str]:
    """Each SELECT's plan on a connection with ``settings`` (``SET ...`` bodies)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SET work_mem = '64kB'")  # the run is larger: a sort spills
        for setting in settings:
            await conn.execute(f"SET {setting}")
        plans = []
        for query, params in statements:
            if query.lstrip().upper().startswith("SELECT"):
                cur = await conn.execute(f"EXPLAIN {query}", params)
                plans.append("\n".join(r[0] for r in await cur.fetchall()))
        return plans


@pytest.mark.parametrize("read", ["load", "dump_run"])
async def test_no_plan_of_a_load_sorts(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    await _saved(pg_dsn)
    async with PostgresStore(pg_dsn) as store:
        await store.list_runs(limit=1)  # the pool's own statements, before the capture
        async with _statements(monkeypatch) as seen:
            got = await getattr(store, read)("r")
    snap = got if read == "load" else got.runs[0]
    assert snap is not None and len(snap.context) == 2 * CALLS + 2
    assert any("context" in q for q, _ in seen), seen
    # Tables without statistics (a new database, or a run newer than the last ANALYZE), the
    # plan a bitmap scan makes (what the planner picks for a run it thinks small), and with
    # statistics: no plan sorts.
    without = await _plans(pg_dsn, seen)
    bitmap = await _plans(pg_dsn, seen, "enable_indexscan = off")
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("ANALYZE")
    analyzed = await _plans(pg_dsn, seen)
    for plan in without + bitmap + analyzed:
        # The current segment's lookup (the run's last history entry) may take its one row
        # from a top-1 sort: a bounded heap in memory, never spilled.
        keys = [k.strip() for k in plan.splitlines() if "Sort Key" in k]
        assert keys in ([], ["Sort Key: step_history.step DESC"]), plan


async def test_a_run_whose_rows_lie_out_of_order_loads_in_order(pg_dsn: str) -> None:
    await _saved(pg_dsn)
    async with PostgresStore(pg_dsn) as before:
        expected = await before.load("r")
    assert expected is not None
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        # An update writes a row's new version after the others: the first message, the
        # first call and the first block now come last in a scan of their tables, and no
        # index gives the order back.
        for table, key in (
            ("context", "idx = 0"),
            ("calls", "call_id = 'm0.c1'"),
            ("blocks", "block_id = 'in'"),
        ):
            await conn.execute(f"UPDATE steadyrun.{table} SET run_id = run_id WHERE {key}")
        await conn.execute("VACUUM ANALYZE")
        dbname = conn.info.dbname
        await conn.execute(f'ALTER DATABASE "{dbname}" SET enable_indexscan = off')
        await conn.execute(f'ALTER DATABASE "{dbname}" SET enable_indexonlyscan = off')
        scan = await conn.execute("SELECT idx FROM steadyrun.context WHERE run_id = 'r'")
        first = [r[0] for r in await scan.fetchall()]
    assert first[0] != 0, "the premise: a scan finds the first message out of its place"
    async with PostgresStore(pg_dsn) as store:
        snap = await store.load("r")
        dumped = await store.dump_run("r")
    assert snap is not None and dumped is not None
    assert dumped.runs[0].context == expected.context
    assert [c.id for c in dumped.runs[0].calls] == [c.id for c in expected.calls]
    assert [b.id for b in dumped.runs[0].blocks] == [b.id for b in expected.blocks]
    assert snap.context == expected.context
    assert [c.id for c in snap.calls] == [c.id for c in expected.calls]
    assert snap.calls[0].id == "m0.c1"
    assert [b.id for b in snap.blocks] == [b.id for b in expected.blocks]
    assert snap.blocks[0].id == "in"
