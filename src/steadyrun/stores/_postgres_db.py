"""The database of a ``PostgresStore``: its connection pool, opened and migrated on first use.

The store, its mixins and its leases (``PostgresLeases``) all reach PostgreSQL through one
``PostgresDatabase`` (the store's ``database``), so none borrows another's private plumbing.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from steadyrun._errors import StoreError
from steadyrun.stores._postgres_arrays import register
from steadyrun.stores._postgres_schema import migrate
from steadyrun.stores._postgres_wire import Prepared, call_prepared

__all__ = ["LOCK_FEED", "Connection", "PostgresDatabase", "WriteTransaction"]

Connection = psycopg.AsyncConnection[TupleRow]

LOCK_FEED = 0x53524644  # "SRFD": the namespace (first key) of the feed's advisory locks
_PIPELINE = psycopg.Pipeline.is_supported()  # libpq 14 or later


class PostgresDatabase:
    """A pool of connections to one schema of one database (see ``PostgresStore`` for the args).

    Attributes:
        schema: The PostgreSQL schema of the tables.
        sql_schema: The schema as SQL names it (quoted).
        where: Where the database is, for messages: never the password.
    """

    def __init__(
        self,
        dsn: str,
        params: dict[str, Any],
        *,
        schema: str,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        self.schema = schema
        self.sql_schema = f'"{schema}"'
        self.where = _describe(params, schema)
        self._dsn = dsn
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = max(2, math.ceil(timeout))
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._migrated = False
        self._opening = asyncio.Lock()

    async def ready(self) -> AsyncConnectionPool[Connection]:
        """The pool; on first use the schema is migrated and the pool opened."""
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                if not self._migrated:
                    conn = await self.connect()
                    try:
                        await migrate(conn, self.schema, self.where)
                    except psycopg.Error as exc:
                        raise self.error(exc) from exc
                    finally:
                        await conn.close()
                    self._migrated = True
                pool = AsyncConnectionPool(
                    self._dsn,
                    kwargs=self._connect_kwargs,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._timeout,
                    name="steadyrun",
                    configure=_configure,
                    open=False,
                )
                try:
                    await pool.open(wait=True, timeout=self._timeout)
                except psycopg.Error as exc:
                    await pool.close()
                    raise self.error(exc, "cannot connect to ") from exc
                self._pool = pool
        return self._pool

    async def connect(self) -> Connection:
        """A connection of its own, outside the pool (to ``LISTEN`` on)."""
        try:
            return await psycopg.AsyncConnection.connect(self._dsn, **self._connect_kwargs)
        except psycopg.Error as exc:
            raise self.error(exc, "cannot connect to ") from exc

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A connection of the pool (autocommit)."""
        pool = await self.ready()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise self.error(exc) from exc

    async def call(self, stmt: Prepared, params: tuple[Any, ...]) -> tuple[bytes | None, ...]:
        """The row of one prepared statement that answers one (autocommit: its own commit).

        The loop step's way: sent through libpq (``_postgres_wire``), with the pool's
        ``getconn`` and ``putconn`` and without ``connection()``'s two context managers. The
        row's values are in the server's text form. A cancelled call is cancelled on the
        server; a connection the server does not answer in time the pool closes when it is
        returned.
        """
        pool = self._pool or await self.ready()
        try:
            conn = await pool.getconn()
            try:
                row = await call_prepared(conn, stmt, params)
            finally:
                await pool.putconn(conn)
        except psycopg.Error as exc:
            raise self.error(exc) from exc
        if not row:  # pragma: no cover - a function call answers one row
            raise StoreError(f"PostgreSQL store {self.where}: no row from {stmt.sql[:40]!r}")
        return row

    @asynccontextmanager
    async def transaction(self, *, snapshot: bool = False) -> AsyncIterator[Connection]:
        """A transaction; ``snapshot`` makes it read-only with one view of the data.

        It runs in pipeline mode: statements go out without waiting for each other and a
        round trip happens only where a result is fetched (and at the commit).
        """
        async with self.connection() as conn:
            try:
                pipeline = conn.pipeline() if _PIPELINE else nullcontext()
                async with pipeline, conn.transaction():
                    if snapshot:
                        await conn.execute(
                            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                        )
                    yield conn
            except BaseException:
                await _discard_if_broken(conn)
                raise

    @asynccontextmanager
    async def write_transaction(self) -> AsyncIterator[WriteTransaction]:
        """A write transaction in pipeline mode whose caller chooses where to wait.

        Statements go out without waiting; ``WriteTransaction.answers`` collects the answers
        of all sent so far in one round trip. With the ``BEGIN`` and the ``COMMIT`` (psycopg
        waits for each), a write that reads once is three round trips.
        """
        async with self.connection() as conn:
            try:
                pipeline = conn.pipeline() if _PIPELINE else nullcontext()
                async with pipeline as sent, conn.transaction():
                    yield WriteTransaction(conn, sent)
            except BaseException:
                await _discard_if_broken(conn)
                raise

    def error(self, exc: psycopg.Error, doing: str = "") -> StoreError:
        """A driver error as the ``StoreError`` that names the store."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return StoreError(f"{doing}PostgreSQL store {self.where}: {text}")

    async def close(self) -> None:
        """Close the pool's connections."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


async def _configure(conn: Connection) -> None:
    """A new connection of the pool: it sends the loop step's prebuilt arrays."""
    register(conn.adapters)


async def _discard_if_broken(conn: Connection) -> None:
    """Close a connection a failed or cancelled transaction left mid-pipeline or mid-query.

    A task cancelled inside the pipeline (a run cancelled, a claim lost, a shutdown) can leave
    the connection still in pipeline mode with results pending; the pool would hand it out
    again as it is, and the next transaction on it fails ("SET TRANSACTION ISOLATION LEVEL
    must be called before any query", "pipeline aborted"). A closed connection the pool drops.
    """
    pgconn = conn.pgconn
    broken = (
        pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF
        or pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE
    )
    if broken and not conn.closed:
        with contextlib.suppress(Exception):  # closing is all we can do; the pool drops it
            await conn.close()


class WriteTransaction:
    """The connection of a ``write_transaction`` and the pipeline it runs in (``None``: none).

    Attributes:
        conn: The connection, inside the transaction.
        pipeline: Its pipeline; ``None`` without pipeline support.
    """

    def __init__(self, conn: Connection, pipeline: psycopg.AsyncPipeline | None) -> None:
        self.conn = conn
        self.pipeline = pipeline

    async def answers(self) -> None:
        """Wait for the answers of every statement sent so far (one round trip)."""
        if self.pipeline is not None:
            await self.pipeline.sync()


def _describe(params: dict[str, Any], schema: str) -> str:
    """Where the store is, for messages: never the password."""
    parts = [
        f"{key}={params[key]}"
        for key in ("host", "hostaddr", "port", "dbname", "user")
        if params.get(key)
    ]
    return " ".join([*parts, f"schema={schema}"])
