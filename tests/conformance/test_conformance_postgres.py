"""PostgresStore passes the store conformance suite.

One database for the module; every check gets a fresh store in a schema of its own, which is as
empty as a new database and much quicker to make.
"""

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

import pgkit
from steadyrun.stores import PostgresStore, Store
from steadyrun.testing.conformance import CHECKS, run_check

pg_dsn = pgkit.database_fixture(scope="module")


def postgres(dsn: str) -> Callable[[], AbstractAsyncContextManager[Store]]:
    @asynccontextmanager
    async def factory() -> AsyncIterator[Store]:
        async with PostgresStore(dsn, schema=f"check_{uuid.uuid4().hex[:12]}") as store:
            yield store

    return factory


@pytest.mark.parametrize("check", CHECKS)
async def test_postgres_store_conformance(pg_dsn: str, check: str) -> None:
    await run_check(check, postgres(pg_dsn))
