"""Crash tests with real processes on ``PostgresStore``: SIGKILL at many points, then resume.

The same workload and checks as the SQLite crash test (``chaoskit``). Kill points are the
statements psycopg sends and the ``BEGIN``/``COMMIT`` of every transaction block (counted in
the child by ``crash_child.trace_psycopg``), including the first run's schema migration, plus
right after each tool's side effect. Each scenario gets its own schema in one fresh database.
The server must be running: the test fails (never skips) when it does not answer.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from chaoskit import RUN_ID  # noqa: E402
from chaosverify import Observed, crash_test  # noqa: E402

import pgkit  # noqa: E402
from steadyrun._codec import decode  # noqa: E402
from steadyrun.records import RunSnapshot  # noqa: E402
from steadyrun.stores import FeedMessage  # noqa: E402
from steadyrun.stores._postgres import PostgresStore  # noqa: E402

pg_dsn = pgkit.database_fixture(prefix="steadyrun_chaos")


def observe(spec: str) -> Observed:
    """Read the run, its feed and how far the feed was consumed, as a new process would."""
    schema, _, dsn = spec.removeprefix("postgres:").partition("|")

    async def load() -> RunSnapshot | None:
        async with PostgresStore(dsn, schema=schema, min_size=0, max_size=1) as store:
            return await store.load(RUN_ID)

    snapshot = asyncio.run(load())
    feed: list[FeedMessage] = []
    consumed = 0
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f'"{schema}".feed',)).fetchone()[0]:  # type: ignore[index]
            rows = conn.execute(
                f'SELECT message FROM "{schema}".feed WHERE run_id = %s ORDER BY seq', (RUN_ID,)
            ).fetchall()
            feed = [decode(row[0], FeedMessage) for row in rows]
            row = conn.execute(
                f'SELECT consumed FROM "{schema}".feed_state WHERE run_id = %s', (RUN_ID,)
            ).fetchone()
            consumed = row[0] if row else 0
    return Observed(snapshot=snapshot, feed=feed, consumed=consumed)


def test_sigkill_at_many_points_then_resume(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    numbers = itertools.count(1)

    def fresh(name: str) -> tuple[str, Path]:
        folder = tmp_path / name
        folder.mkdir()
        return f"postgres:chaos_{next(numbers)}|{pg_dsn}", folder / "effects.txt"

    def show(line: str) -> None:
        with capsys.disabled():
            print(f"\n{line}")

    crash_test("postgres", fresh, observe, show)
