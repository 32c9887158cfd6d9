"""Each store's step commit tells what waits in the run's feed (the loop reads no ``pending``).

The conformance rule ``feed.step_answers_what_the_feed_holds`` lets a store answer ``None``
(it does not tell, the runtime then reads the feed); steadyrun's own stores always tell.
"""

from __future__ import annotations

from pathlib import Path

import pgkit
import steadyrun as sr
from steadyrun.testing.conformance._feed import FEED_ANSWERS, feed_answers

pg_dsn = pgkit.database_fixture(prefix="steadyrun_stepfeed")


async def test_memory_store_answers() -> None:
    assert await feed_answers(sr.MemoryStore()) == FEED_ANSWERS


async def test_sqlite_store_answers(tmp_path: Path) -> None:
    async with sr.SqliteStore(tmp_path / "feed.db") as store:
        assert await feed_answers(store) == FEED_ANSWERS


async def test_postgres_store_answers(pg_dsn: str) -> None:
    async with sr.PostgresStore(pg_dsn) as store:
        assert await feed_answers(store) == FEED_ANSWERS
