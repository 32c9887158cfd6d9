"""One SQLite connection on a thread of its own, so blocking disk I/O never runs on the loop.

Every SQLite-backed part of steadyrun (the run store, the task store, the memory bank) talks
to its file through one of these: the connection opens lazily on the thread, a failing call
rolls back what it left open, and SQLite's errors become ``StoreError`` with the file named.

Writes go through ``write``: one hop to the thread per transaction, and *group commit*: the
write jobs that queued up while the thread was busy (the fsync of the previous commit, most
often) run in one transaction, each inside its own savepoint, and share one commit and so one
fsync. A job that raises rolls back to its savepoint only; the others commit. Every caller is
answered after the commit its job was part of, so an awaited write is durable.

Reads may go through ``read`` (given ``open_reader``): a second connection, used on the
calling thread (the event loop), so a read neither queues behind a commit's fsync nor costs
two thread switches. Only the commit's fsync is what must stay off the loop; a WAL read takes
no lock that a writer holds and waits for no disk sync. It sees every transaction committed
before it began, and a write is answered only after its commit, so what a caller wrote it
then reads back.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from steadyrun._errors import StoreError

__all__ = ["SqliteThread"]

T = TypeVar("T")


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    value: Any = None
    error: BaseException | None = None


class SqliteThread:
    """Runs functions of a connection on the connection's own thread.

    Args:
        open: Opens (and prepares) the connection; runs on the thread, on first use.
        what: Names the file in errors (``"SQLite store runs.db"``).
        thread_name: The thread's name prefix.

    Attributes:
        commits: Group commits made by ``write`` (each one transaction, one fsync).
        max_group: The most write jobs one commit has carried.
    """

    def __init__(
        self,
        open: Callable[[], sqlite3.Connection],
        what: str,
        thread_name: str,
        *,
        open_reader: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self._open = open
        self.what = what
        self._thread_name = thread_name
        self._executor: ThreadPoolExecutor | None = None
        self.conn: sqlite3.Connection | None = None
        self._open_reader = open_reader
        # One reader connection per thread that reads (in practice the event loop's).
        self._readers = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._queued: list[_Job] = []
        self._draining = False
        self.commits = 0
        self.max_group = 0

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        return self._executor

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the thread; ``fn`` manages its own transaction, if any."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._call, fn)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the reader connection, right here (``run`` without a reader).

        ``fn`` only reads; it may open and end a read transaction of its own, and must not
        await (it runs synchronously, so no other read interleaves on the connection).
        """
        if self._open_reader is None:
            return await self.run(fn)
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            if self.conn is None:
                await self.run(_nothing)  # the main connection creates and migrates the file
            conn = self._readers.conn = self._open_reader()
            with self._lock:
                self._reader_conns.append(conn)
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            _rollback(conn)
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:
                # The reader never waits on the loop (its busy timeout is 0): a lock held by
                # another process for a moment is waited for on the thread instead.
                return await self.run(fn)
            raise StoreError(f"{self.what}: {exc}") from exc
        except BaseException:
            _rollback(conn)
            raise

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` inside a write transaction; returns once that is committed.

        ``fn`` issues no ``BEGIN``/``COMMIT`` of its own: it runs inside a savepoint of a
        ``BEGIN IMMEDIATE`` transaction that other queued jobs may share (group commit). When
        ``fn`` raises, only its own changes are rolled back and the error reaches its caller.
        """
        loop = asyncio.get_running_loop()
        job = _Job(fn=fn, loop=loop, future=loop.create_future())
        with self._lock:
            self._queued.append(job)
            start = not self._draining
            self._draining = True
        if start:
            self._pool().submit(self._drain)
        return await job.future  # type: ignore[no-any-return]

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._connection())
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"{self.what}: {exc}") from exc
        except BaseException:
            self._rollback()
            raise

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None:
            self.conn = self._open()
        return self.conn

    def _drain(self) -> None:
        """On the thread: commit the write jobs queued now as one group.

        Jobs queued meanwhile form the next group, behind the reads already waiting for the
        thread, so a steady stream of writes never starves them.
        """
        with self._lock:
            jobs, self._queued = self._queued, []
        try:
            self._commit_group(jobs)
        finally:
            for job in jobs:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                    job.loop.call_soon_threadsafe(_settle, job)
            with self._lock:
                again = bool(self._queued)
                self._draining = again
            if again:
                self._pool().submit(self._drain)

    def _commit_group(self, jobs: list[_Job]) -> None:
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            for job in jobs:
                job.error = _store_error(self.what, exc)
            return
        alone = len(jobs) == 1  # a job alone needs no savepoint: its failure ends the group
        for job in jobs:
            try:
                if not alone:
                    conn.execute("SAVEPOINT job")
                job.value = job.fn(conn)
                if not alone:
                    conn.execute("RELEASE job")
            except BaseException as exc:
                job.error = _store_error(self.what, exc)
                if alone:
                    self._rollback()
                    return
                if not conn.in_transaction:
                    break  # SQLite rolled the whole group back (disk full, I/O error)
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
        if not conn.in_transaction:
            lost = StoreError(f"{self.what}: the transaction was rolled back; nothing saved")
            for job in jobs:
                if job.error is None:
                    job.error = lost
            return
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            for job in jobs:
                job.error = _store_error(self.what, exc)
            return
        self.commits += 1
        self.max_group = max(self.max_group, len(jobs))

    def _rollback(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.rollback()

    def drop_readers(self) -> None:
        """Close the reader connections (the next read opens one again).

        A truncating checkpoint gives the file's freed pages back only with no other
        connection open on the file: ``SqliteStore.reclaim`` drops them first.
        """
        with self._lock:
            readers, self._reader_conns = self._reader_conns, []
        self._readers = threading.local()
        for conn in readers:
            conn.close()

    async def close(self) -> None:
        """Close the connections and stop the thread; ``run`` opens them again if called."""
        self.drop_readers()  # before the main one, whose close then checkpoints the WAL
        if self._executor is None:
            return

        def shut(_: sqlite3.Connection) -> None:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

        if self.conn is not None:
            await self.run(shut)
        self._executor.shutdown(wait=True)
        self._executor = None


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.rollback()


def _nothing(conn: sqlite3.Connection) -> None:
    """Opens the connection (``SqliteThread.read`` before the first read)."""


def _store_error(what: str, exc: BaseException) -> BaseException:
    """SQLite's errors as ``StoreError`` naming the file; the jobs' own errors as they are."""
    if isinstance(exc, sqlite3.Error):
        error = StoreError(f"{what}: {exc}")
        error.__cause__ = exc
        return error
    return exc


def _settle(job: _Job) -> None:
    """On the caller's loop: answer the caller (unless it stopped waiting)."""
    if job.future.done():
        return
    if job.error is not None:
        job.future.set_exception(job.error)
    else:
        job.future.set_result(job.value)
