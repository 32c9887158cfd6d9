"""Every handover test runs on every store: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import pgkit
import steadyrun as sr
from steadyrun.stores import Store


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    with pgkit.fresh_database_sync("steadyrun_handover") as dsn:
        yield dsn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store of each kind (PostgreSQL: a fresh schema in a session database)."""
    made: Store
    if request.param == "memory":
        made = sr.MemoryStore()
    elif request.param == "sqlite":
        made = sr.SqliteStore(tmp_path / "runs.db")
    else:
        dsn = request.getfixturevalue("pg_database")
        made = sr.PostgresStore(dsn, schema=f"h_{uuid.uuid4().hex[:12]}")
    try:
        yield made
    finally:
        await made.close()
