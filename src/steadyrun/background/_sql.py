"""Task stores on SQL databases: ``SqliteTaskStore`` (one machine) and ``PostgresTaskStore``.

Each task is one row: a versioned JSON document plus the columns the claim query needs,
rewritten together in the transaction of every change. Updates are rows keyed by
``(task_id, event_id)``, so a replayed update is dropped by the primary key.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from steadyrun._codec import decode, encode
from steadyrun._errors import FormatVersionError, StoreError, UsageError
from steadyrun._sqlite_thread import SqliteThread
from steadyrun._sqlite_wal import use_wal
from steadyrun.background._model import Task, Update, check_update
from steadyrun.background._store import Modify, TaskStore

__all__ = ["TASK_SCHEMA_VERSION", "PostgresTaskStore", "SqliteTaskStore", "prepare_sqlite"]

T = TypeVar("T")

TASK_SCHEMA_VERSION = 1
"""Version of the task tables this release writes; a store refuses a newer one."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _us(value: datetime | None) -> int | None:
    return None if value is None else int((value - _EPOCH).total_seconds() * 1_000_000)


def _columns(task: Task) -> tuple[Any, ...]:
    """The columns the queries filter on, from the task document."""
    answered = int(task.input is not None and task.input.answered)
    return (
        task.run_id,
        task.status,
        int(task.final),
        task.owner,
        _us(task.lease_until),
        int(task.cancel_requested),
        answered,
        int(task.notified),
        encode(task, Task),
    )


_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS steadyrun_tasks_meta (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS steadyrun_tasks (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, status TEXT NOT NULL,
    final INTEGER NOT NULL, owner TEXT, lease_until_us INTEGER,
    cancel_requested INTEGER NOT NULL, answered INTEGER NOT NULL,
    notified INTEGER NOT NULL, doc BLOB NOT NULL, seq INTEGER
);
CREATE INDEX IF NOT EXISTS steadyrun_tasks_open ON steadyrun_tasks (final, owner);
CREATE INDEX IF NOT EXISTS steadyrun_tasks_run ON steadyrun_tasks (run_id);
CREATE TABLE IF NOT EXISTS steadyrun_task_updates (
    task_id TEXT NOT NULL, event_id TEXT NOT NULL, seq INTEGER NOT NULL,
    doc BLOB NOT NULL, PRIMARY KEY (task_id, event_id)
);
"""

_CLAIMABLE = (
    "final = 0 AND (owner IS NULL OR lease_until_us <= {now}) "
    "AND (status <> 'waiting_input' OR answered = 1 OR cancel_requested = 1)"
)


def prepare_sqlite(conn: sqlite3.Connection) -> None:
    """Create the task tables on ``conn`` (autocommit) if absent; refuse another version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # One statement at a time: executescript() would commit the transaction first.
        for statement in _SQLITE_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        row = conn.execute("SELECT version FROM steadyrun_tasks_meta").fetchone()
        if row is None:
            conn.execute("INSERT INTO steadyrun_tasks_meta VALUES (?)", (TASK_SCHEMA_VERSION,))
        elif row[0] != TASK_SCHEMA_VERSION:
            raise FormatVersionError("task tables", row[0], TASK_SCHEMA_VERSION)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class SqliteTaskStore(TaskStore):
    """Tasks in a SQLite file (WAL); several processes of one machine may share it.

    It may share the file of a ``SqliteStore``: its tables are ``steadyrun_tasks*``.
    All SQLite work runs on one thread of the store's own, off the event loop.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = SqliteThread(self._open, f"task store {self.path}", "steadyrun-tasks")

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.run(fn)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        use_wal(conn, 30.0)  # another process may be opening the same new file right now
        conn.execute("PRAGMA synchronous=FULL")
        try:
            prepare_sqlite(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def close(self) -> None:
        """Close the connection and the store's thread."""
        await self._db.close()

    async def insert(self, task: Task) -> Task:
        """Store a new task; an existing id returns the stored task."""

        def run(conn: sqlite3.Connection) -> Task:
            conn.execute(
                "INSERT OR IGNORE INTO steadyrun_tasks (id, run_id, status, final, owner, "
                "lease_until_us, cancel_requested, answered, notified, doc, seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "(SELECT COALESCE(MAX(seq), 0) + 1 FROM steadyrun_tasks))",
                (task.id, *_columns(task)),
            )
            return _load(conn, task.id) or task

        return await self._run(run)

    async def get(self, task_id: str) -> Task | None:
        """One task, or ``None``."""
        return await self._run(lambda conn: _load(conn, task_id))

    async def list_tasks(self, run_id: str) -> list[Task]:
        """The tasks of a run, oldest first."""
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT doc FROM steadyrun_tasks WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        )
        return [decode(r[0], Task) for r in rows]

    async def modify(self, task_id: str, fn: Modify) -> Task | None:
        """Apply ``fn`` in one immediate transaction."""

        def run(conn: sqlite3.Connection) -> Task | None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                task = _load(conn, task_id)
                if task is not None:
                    new = fn(task)
                    if new is not None:
                        conn.execute(
                            "UPDATE steadyrun_tasks SET run_id = ?, status = ?, final = ?, "
                            "owner = ?, lease_until_us = ?, cancel_requested = ?, answered = ?, "
                            "notified = ?, doc = ? WHERE id = ?",
                            (*_columns(new), task_id),
                        )
                        task = new
                conn.execute("COMMIT")
                return task
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        return await self._run(run)

    async def claimable(self, now: datetime, limit: int) -> list[str]:
        """Ids of tasks a worker may claim."""
        where = _CLAIMABLE.format(now="?")
        rows = await self._run(
            lambda conn: conn.execute(
                f"SELECT id FROM steadyrun_tasks WHERE {where} ORDER BY seq LIMIT ?",
                (_us(now), limit),
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def delete_run_tasks(self, run_id: str) -> int:
        """Delete the tasks (and updates) of a run and of its sub-agent runs, in one transaction."""

        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            # Sub-agent runs are ``<run>/...``: the ids between "<run>/" and "<run>0" ("0"
            # follows "/"), a range the run_id index answers.
            where = "run_id = ? OR (run_id >= ? AND run_id < ?)"
            bounds = (run_id, run_id + "/", run_id + "0")
            conn.execute(
                "DELETE FROM steadyrun_task_updates WHERE task_id IN"
                f" (SELECT id FROM steadyrun_tasks WHERE {where})",
                bounds,
            )
            gone = conn.execute(f"DELETE FROM steadyrun_tasks WHERE {where}", bounds).rowcount
            conn.execute("COMMIT")
            return int(gone)

        return await self._run(run)

    async def unnotified(self, limit: int) -> list[str]:
        """Ids of finished tasks whose run was not told yet."""
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT id FROM steadyrun_tasks WHERE final = 1 AND notified = 0 LIMIT ?",
                (limit,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def add_update(self, task_id: str, update: Update) -> bool:
        """Append an update unless its event id was seen."""
        check_update(update)

        def run(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT OR IGNORE INTO steadyrun_task_updates (task_id, event_id, seq, doc) "
                "VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM steadyrun_task_updates "
                "WHERE task_id = ?), ?)",
                (task_id, update.event_id, task_id, encode(update, Update)),
            )
            return cur.rowcount == 1

        return await self._run(run)

    async def updates(self, task_id: str, last: int | None = None) -> list[Update]:
        """The task's updates in order."""
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT doc FROM steadyrun_task_updates WHERE task_id = ? "
                "ORDER BY seq DESC LIMIT ?",
                (task_id, last if last else -1),
            ).fetchall()
        )
        return [decode(r[0], Update) for r in reversed(rows)]


def _load(conn: sqlite3.Connection, task_id: str) -> Task | None:
    row = conn.execute("SELECT doc FROM steadyrun_tasks WHERE id = ?", (task_id,)).fetchone()
    return None if row is None else decode(row[0], Task)


_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class PostgresTaskStore(TaskStore):
    """Tasks in PostgreSQL, shared by the workers of many machines.

    Args:
        conninfo: A libpq connection string or URL.
        schema: The PostgreSQL schema of the task tables (created on first use).
        max_size: Connections in the pool.
    """

    def __init__(self, conninfo: str, *, schema: str = "steadyrun", max_size: int = 5) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise UsageError(f"schema must be a plain identifier (letters, digits, _): {schema!r}")
        self.conninfo = conninfo
        self.schema = schema
        self._s = f'"{schema}"'
        self._max_size = max_size
        self._pool: Any = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> Any:
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                from psycopg_pool import AsyncConnectionPool

                pool = AsyncConnectionPool(
                    self.conninfo, min_size=1, max_size=self._max_size, open=False
                )
                await pool.open(wait=True)
                async with pool.connection() as conn:
                    await self._migrate(conn)
                self._pool = pool
        return self._pool

    async def _migrate(self, conn: Any) -> None:
        s = self._s
        async with conn.transaction():
            # One migration at a time, across processes.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{s}.tasks",))
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {s}.tasks_meta (version INTEGER NOT NULL)"
            )
            await conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {s}.tasks (
                    id TEXT PRIMARY KEY, seq BIGSERIAL, run_id TEXT NOT NULL,
                    status TEXT NOT NULL, final INTEGER NOT NULL, owner TEXT,
                    lease_until_us BIGINT, cancel_requested INTEGER NOT NULL,
                    answered INTEGER NOT NULL, notified INTEGER NOT NULL, doc BYTEA NOT NULL)"""
            )
            await conn.execute(f"CREATE INDEX IF NOT EXISTS tasks_open ON {s}.tasks (final, owner)")
            await conn.execute(f"CREATE INDEX IF NOT EXISTS tasks_run ON {s}.tasks (run_id)")
            await conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {s}.task_updates (
                    task_id TEXT NOT NULL, event_id TEXT NOT NULL, seq BIGSERIAL,
                    doc BYTEA NOT NULL, PRIMARY KEY (task_id, event_id))"""
            )
            cur = await conn.execute(f"SELECT version FROM {s}.tasks_meta")
            row = await cur.fetchone()
            if row is None:
                await conn.execute(
                    f"INSERT INTO {s}.tasks_meta VALUES (%s)", (TASK_SCHEMA_VERSION,)
                )
            elif row[0] != TASK_SCHEMA_VERSION:
                raise FormatVersionError("task tables", row[0], TASK_SCHEMA_VERSION)

    async def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(sql, params)
                return list(await cur.fetchall())
        except Exception as exc:
            raise StoreError(f"task store (PostgreSQL): {exc}") from exc

    async def insert(self, task: Task) -> Task:
        """Store a new task; an existing id returns the stored task."""
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                await conn.execute(
                    f"INSERT INTO {self._s}.tasks (id, run_id, status, final, owner, "
                    "lease_until_us, cancel_requested, answered, notified, doc) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (task.id, *_columns(task)),
                )
        except Exception as exc:
            raise StoreError(f"task store (PostgreSQL): {exc}") from exc
        return await self.get(task.id) or task

    async def get(self, task_id: str) -> Task | None:
        """One task, or ``None``."""
        rows = await self._fetch(f"SELECT doc FROM {self._s}.tasks WHERE id = %s", (task_id,))
        return decode(bytes(rows[0][0]), Task) if rows else None

    async def list_tasks(self, run_id: str) -> list[Task]:
        """The tasks of a run, oldest first."""
        rows = await self._fetch(
            f"SELECT doc FROM {self._s}.tasks WHERE run_id = %s ORDER BY seq", (run_id,)
        )
        return [decode(bytes(r[0]), Task) for r in rows]

    async def modify(self, task_id: str, fn: Modify) -> Task | None:
        """Apply ``fn`` to the row locked ``FOR UPDATE``."""
        pool = await self._ready()
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    f"SELECT doc FROM {self._s}.tasks WHERE id = %s FOR UPDATE", (task_id,)
                )
                row = await cur.fetchone()
                if row is None:
                    return None
                task = decode(bytes(row[0]), Task)
                new = fn(task)
                if new is None:
                    return task
                await conn.execute(
                    f"UPDATE {self._s}.tasks SET run_id = %s, status = %s, final = %s, "
                    "owner = %s, lease_until_us = %s, cancel_requested = %s, answered = %s, "
                    "notified = %s, doc = %s WHERE id = %s",
                    (*_columns(new), task_id),
                )
                return new
        except (StoreError, FormatVersionError):
            raise
        except Exception as exc:
            raise StoreError(f"task store (PostgreSQL): {exc}") from exc

    async def claimable(self, now: datetime, limit: int) -> list[str]:
        """Ids of tasks a worker may claim."""
        where = _CLAIMABLE.format(now="%s")
        rows = await self._fetch(
            f"SELECT id FROM {self._s}.tasks WHERE {where} ORDER BY seq LIMIT %s",
            (_us(now), limit),
        )
        return [r[0] for r in rows]

    async def unnotified(self, limit: int) -> list[str]:
        """Ids of finished tasks whose run was not told yet."""
        rows = await self._fetch(
            f"SELECT id FROM {self._s}.tasks WHERE final = 1 AND notified = 0 LIMIT %s", (limit,)
        )
        return [r[0] for r in rows]

    async def delete_run_tasks(self, run_id: str) -> int:
        """Delete the tasks (and updates) of a run and of its sub-agent runs, in one transaction."""
        pool = await self._ready()
        s = self._s
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(
                    f"DELETE FROM {s}.task_updates WHERE task_id IN (SELECT id FROM {s}.tasks"
                    " WHERE run_id = %s OR starts_with(run_id, %s))",
                    (run_id, run_id + "/"),
                )
                cur = await conn.execute(
                    f"DELETE FROM {s}.tasks WHERE run_id = %s OR starts_with(run_id, %s)",
                    (run_id, run_id + "/"),
                )
                return int(cur.rowcount)
        except Exception as exc:
            raise StoreError(f"task store (PostgreSQL): {exc}") from exc

    async def add_update(self, task_id: str, update: Update) -> bool:
        """Append an update unless its event id was seen."""
        check_update(update)
        rows = await self._fetch(
            f"INSERT INTO {self._s}.task_updates (task_id, event_id, doc) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING RETURNING 1",
            (task_id, update.event_id, encode(update, Update)),
        )
        return bool(rows)

    async def updates(self, task_id: str, last: int | None = None) -> list[Update]:
        """The task's updates in order."""
        rows = await self._fetch(
            f"SELECT doc FROM {self._s}.task_updates WHERE task_id = %s ORDER BY seq DESC LIMIT %s",
            (task_id, last),
        )
        return [decode(bytes(r[0]), Update) for r in reversed(rows)]
