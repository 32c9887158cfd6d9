"""Fresh PostgreSQL databases for tests, on the local server (127.0.0.1:5432, user postgres).

``fresh_database()`` is an async context manager that creates a uniquely named database and
drops it (``WITH (FORCE)``) afterwards; ``database_fixture()`` makes a pytest fixture of it that
yields the DSN. When the server does not answer, the test fails (never skips) and says how to
start it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import sql

HOST = "127.0.0.1"
PORT = 5432
USER = "postgres"
ADMIN_DSN = f"host={HOST} port={PORT} user={USER} dbname=postgres connect_timeout=5"
START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"


def dsn_for(database: str) -> str:
    """The DSN of ``database`` on the test server."""
    return f"host={HOST} port={PORT} user={USER} dbname={database}"


def _unreachable(exc: Exception) -> NoReturn:
    pytest.fail(
        f"PostgreSQL does not answer on {HOST}:{PORT} as user {USER!r} ({exc}).\n"
        f"Start it with:  {START}",
        pytrace=False,
    )


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@asynccontextmanager
async def fresh_database(prefix: str = "steadyrun_test") -> AsyncIterator[str]:
    """Create a new database, yield its DSN, drop it (with any connection left) afterwards."""
    name = _name(prefix)
    await _admin_async(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield dsn_for(name)
    finally:
        await _admin_async(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database_sync(prefix: str = "steadyrun_test") -> Iterator[str]:
    """``fresh_database`` for synchronous code (fixtures of any scope use this one)."""
    name = _name(prefix)
    _admin_sync(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield dsn_for(name)
    finally:
        _admin_sync(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def database_fixture(scope: Any = "function", prefix: str = "steadyrun_test") -> Callable[..., Any]:
    """A pytest fixture yielding the DSN of a fresh database, per ``scope``.

    Example: ``pg_dsn = pgkit.database_fixture()`` in a test module, then ``def test_x(pg_dsn)``.
    The fixture is synchronous, so it works with every scope and event loop.
    """

    @pytest.fixture(scope=scope)
    def _database() -> Iterator[str]:
        with fresh_database_sync(prefix) as dsn:
            yield dsn

    return _database


async def _admin_async(statement: sql.Composed) -> None:
    try:
        conn = await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True)
    except psycopg.OperationalError as exc:
        _unreachable(exc)
    async with conn:
        await conn.execute(statement)


def _admin_sync(statement: sql.Composed) -> None:
    try:
        conn = psycopg.connect(ADMIN_DSN, autocommit=True)
    except psycopg.OperationalError as exc:
        _unreachable(exc)
    with conn:
        conn.execute(statement)


def drain_backends(dsn: str, application_name: str, timeout: float = 30.0) -> None:
    """Wait until no backend of ``application_name`` is left on the server.

    A client SIGKILLed after sending a statement leaves its backend running it (a ``COMMIT``
    included): the backend notices the dead client only when it next reads. Once it is gone,
    whatever the client sent has committed or rolled back, and a reader sees the store as the
    dead process left it.
    """
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            ).fetchone()
            if not row or not row[0]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{row[0]} backends of {application_name!r} left")
            time.sleep(0.005)
