"""SQLite connections for asyncio code: the blocking disk syncs never run on the event loop.

Every SQLite-backed part of steadyrun (the run store, the task store, the memory bank) talks
to its file through one of these: the connections open lazily, a failing call rolls back what
it left open, and SQLite's errors become ``StoreError`` with the file named.

``run`` hands a function of the connection to the thread: one hop there and back.

Writes go through ``write``, on a *writer* connection of their own. A write group's statements
run right on the event loop (``BEGIN IMMEDIATE`` with a busy timeout of 0, then each job inside
its own savepoint) and only its ``COMMIT``, the fsync, is handed to the writer's thread: the
loop never waits for the disk, and the thread runs no Python between statements, so under
load it does not wait for the busy loop to give the GIL back once per statement. This is
*group commit*: the write jobs that queue up while a commit is in flight form the next group
and share its commit and so one fsync. A job that raises rolls back to its savepoint only; the
others commit. Every caller is answered after the commit its job was part of, so an awaited
write is durable. When ``BEGIN IMMEDIATE`` finds the file locked (another process, or this
process's ``run`` thread, is writing), the group is done whole on the writer's thread, which
waits for the lock up to the busy timeout the connection was opened with; the jobs that queue
meanwhile join it.

Reads may go through ``read``: on the calling thread (the event loop), on the writer's
connection while no write group is in flight (its page cache is warm: another connection's is
emptied by each of the writer's commits), else on a reader connection (given ``open_reader``)
or on the thread. A read thus neither queues behind a commit's fsync nor, most of the time,
costs two thread switches. A WAL read takes no lock that a writer holds and waits for no disk
sync. It sees every transaction committed before it began, and a write is answered only after
its commit, so what a caller wrote it then reads back.

A write may be marked not ``durable``: the run store's claims, renewals and releases, whose
loss in a crash of the machine is harmless (``stores._leases_sqlite``). A group of only such
jobs commits at ``synchronous = NORMAL`` when the connection's level is FULL or EXTRA in WAL:
no fdatasync of its own. It survives a crash of the process (its frames are in the OS's page
cache) and is made durable by the next synced commit, whose fdatasync of the WAL covers every
frame before its own. A group with any durable job commits at the connection's level. The
level cannot change inside a transaction: it is set before ``BEGIN``, when it differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from steadyrun._errors import StoreError
from steadyrun._lane import Lane
from steadyrun._sqlite_wal import AUTO_PAGES, FULL, CheckpointPace, group_level
from steadyrun._sqlite_wal import busy as _busy

__all__ = ["SqliteThread"]

T = TypeVar("T")


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    durable: bool = True
    value: Any = None
    error: BaseException | None = None


class SqliteThread:
    """Runs functions of a connection on the connection's own thread.

    Args:
        open: Opens (and prepares) a connection; called on a thread, on first use, once for
            ``run``'s connection and once for the writer's.
        what: Names the file in errors (``"SQLite store runs.db"``).
        thread_name: The threads' name prefix.
        open_reader: Opens a read-only connection for ``read`` (none: reads go through ``run``).

    Attributes:
        commits: Group commits made by ``write`` (each one transaction, one fsync).
        max_group: The most write jobs one commit has carried.
        checkpoints: WAL checkpoints the idle writer ran (see ``_sqlite_wal``).
        hand_offs: Functions handed to a thread so far (``run`` calls, commits, whole groups).
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
        self._executor: Lane | None = None
        self.conn: sqlite3.Connection | None = None
        self._open_reader = open_reader
        # One reader connection per thread that reads (in practice the event loop's).
        self._readers = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # The writer: its connection, its thread, the jobs waiting for the group in flight.
        self._wconn: sqlite3.Connection | None = None
        self._wexecutor: Lane | None = None
        self._busy_ms = 0
        self._wal = True
        # The writer's ``synchronous``: as opened (``_full``), and as set now (``_level``).
        # ``_relax``: groups of non-durable jobs may commit at NORMAL (a WAL file at FULL+).
        self._full = self._level = 2
        self._relax = False
        self._queued: list[_Job] = []
        self._writing = False  # a group is in flight (its statements, its commit or both)
        self._idle: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._pace = CheckpointPace()
        self.commits = 0
        self.checkpoints = 0
        self.max_group = 0
        self.hand_offs = 0

    def _pool(self) -> Lane:
        if self._executor is None:
            self._executor = Lane(self._thread_name)
        return self._executor

    def _writer_pool(self) -> Lane:
        if self._wexecutor is None:
            self._wexecutor = Lane(f"{self._thread_name}-writer")
        return self._wexecutor

    def _hand_off(self, pool: Lane, fn: Callable[..., Any], *args: Any) -> None:
        """Every trip to a thread goes through here (``benchmarks/counts.py`` counts them)."""
        self.hand_offs += 1
        pool.submit(fn, *args)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the thread; ``fn`` manages its own transaction, if any."""
        loop = asyncio.get_running_loop()
        job = _Job(fn=fn, loop=loop, future=loop.create_future())
        self._hand_off(self._pool(), self._call, job)
        return await job.future  # type: ignore[no-any-return]

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` right here, on the writer's connection while it is idle.

        While a write group is in flight, on the reader connection (given ``open_reader``),
        else on the thread (``run``); before the writer's first commit, as while a group is in
        flight. The first read opens the connections (``open``). ``fn`` only reads; it may
        open and end a read transaction of its own, and must not await (it runs
        synchronously, so nothing else uses the connection meanwhile) nor leave a statement
        open.
        """
        if self._wconn is None and self.conn is None:
            await self.open()
        # The writer's page cache is warm once it has written (and stays so through its own
        # commits); before, a new store's reads map the file through the reader.
        if self._wconn is not None and self.commits:
            with self._lock:
                idle = not self._writing
                if idle:
                    self._writing = True  # no write group starts while the read runs
            if idle:
                try:
                    return self._read_on_writer(fn)
                except _Busy:
                    pass  # a lock held by another connection for a moment: wait on the thread
                finally:
                    self._done([])  # the writes that queued meanwhile (other threads') start
                return await self.run(fn)
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
            if _busy(exc):
                # The reader never waits on the loop (its busy timeout is 0): a lock held by
                # another process for a moment is waited for on the thread instead.
                return await self.run(fn)
            raise StoreError(f"{self.what}: {exc}") from exc
        except BaseException:
            _rollback(conn)
            raise

    async def open(self) -> None:
        """Open the connections now: the main one (it may create the file), then the writer's.

        ``read`` calls it first, so a store's first write (a decision after a restart, say)
        does not wait while the writer's connection is opened and prepared.
        """
        await self.run(_nothing)
        loop = asyncio.get_running_loop()
        job = _Job(fn=_nothing, loop=loop, future=loop.create_future())
        self._hand_off(self._writer_pool(), self._open_writer, job)
        await job.future

    def _open_writer(self, job: _Job) -> None:
        try:
            self._writer()
        except BaseException as exc:
            job.error = _store_error(self.what, exc)
        _answer([job])

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        """``fn(connection)`` inside a write transaction; returns once that is committed.

        ``fn`` issues no ``BEGIN``/``COMMIT`` of its own and does not await: it runs inside a
        savepoint of a ``BEGIN IMMEDIATE`` transaction that other queued jobs may share (group
        commit), on the event loop or, when the file was locked, on the writer's thread. When
        ``fn`` raises, only its own changes are rolled back and the error reaches its caller.

        Args:
            fn: The job.
            durable: ``False`` for a write whose loss in a crash of the machine (not of the
                process) is harmless: when every job of its group is such, the commit is not
                synced on its own (see the module); the next synced commit makes it durable.
        """
        loop = asyncio.get_running_loop()
        job = _Job(fn=fn, loop=loop, future=loop.create_future(), durable=durable)
        with self._lock:
            if self._writing:
                self._queued.append(job)
                start = False
            else:
                self._writing = start = True
        if start:
            self._start([job])
        return await job.future  # type: ignore[no-any-return]

    def _read_on_writer(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the idle writer's connection; ``_Busy`` when the file was locked.

        A read here shares the writer's page cache, which stays valid from one commit to the
        next: on another connection each commit of the writer empties that connection's cache.
        """
        conn = self._wconn
        assert conn is not None
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            _rollback(conn)
            if _busy(exc):
                raise _Busy from exc
            raise StoreError(f"{self.what}: {exc}") from exc
        except BaseException:
            _rollback(conn)
            raise

    # -- the thread's side of run ------------------------------------------------------------

    def _call(self, job: _Job) -> None:
        try:
            job.value = job.fn(self._connection())
        except sqlite3.Error as exc:
            self._rollback()
            job.error = StoreError(f"{self.what}: {exc}")
            job.error.__cause__ = exc
        except BaseException as exc:
            self._rollback()
            job.error = exc
        _answer([job])

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None:
            self.conn = self._open()
        return self.conn

    def _rollback(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.rollback()

    # -- the writer ----------------------------------------------------------------------------

    def _start(self, jobs: list[_Job]) -> None:
        """On the jobs' loop: run the group's statements here, then hand its commit over.

        The whole group goes to the writer's thread instead when the writer is not open yet,
        when the file is locked, or when the group's jobs come from more than one loop.
        """
        conn = self._wconn
        if conn is None or not self._wal or any(job.loop is not jobs[0].loop for job in jobs):
            self._hand_off(self._writer_pool(), self._on_thread, jobs)
            return
        try:
            self._sync_for(conn, jobs)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            _rollback(conn)
            if _busy(exc):
                self._hand_off(self._writer_pool(), self._on_thread, jobs)
                return
            for job in jobs:
                job.error = _store_error(self.what, exc)
            self._done(jobs)
            return
        except BaseException as exc:
            for job in jobs:
                job.error = exc
            self._done(jobs)
            return
        if self._run_jobs(conn, jobs):
            self._hand_off(self._writer_pool(), self._commit_on_thread, jobs)
        else:
            self._done(jobs)

    def _on_thread(self, jobs: list[_Job]) -> None:
        """On the writer's thread: the whole group, waiting for the file's lock if need be.

        The busy timeout the connection was opened with holds for the whole group (without
        WAL a ``COMMIT`` may wait for readers too); it is 0 again afterwards, for the loop.
        """
        try:
            conn = self._writer()
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        except BaseException as exc:
            for job in jobs:
                job.error = _store_error(self.what, exc)
            self._done(jobs)
            return
        try:
            self._sync_for(conn, jobs)
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            _rollback(conn)
            for job in jobs:
                job.error = _store_error(self.what, exc)
        else:
            with self._lock:  # the jobs that queued while the lock was awaited join the group
                # unless the group commits unsynced and one of them is durable: the level
                # cannot change inside the transaction, so they wait for the next group.
                if self._level >= self._full or not any(job.durable for job in self._queued):
                    jobs, self._queued = jobs + self._queued, []
            if self._run_jobs(conn, jobs):
                self._commit(conn, jobs)
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA busy_timeout = 0")
        self._done(jobs)

    def _writer(self) -> sqlite3.Connection:
        """The writer's connection, opened on its thread (busy timeout 0 between groups)."""
        if self._wconn is None:
            conn = self._open()
            try:
                self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
                conn.execute("PRAGMA busy_timeout = 0")
                # Without WAL (a file system that has no shared memory) a COMMIT waits for
                # the readers: the loop must not hold a transaction open, so groups stay here.
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                self._wal = str(mode).lower() == "wal"
                self._full = self._level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
                # NORMAL skips the commit's fsync only in WAL (in rollback mode it syncs too,
                # and a later commit's sync would not cover an earlier journal).
                self._relax = self._wal and self._full >= FULL
                if self._wal:  # the idle writer checkpoints first (_sqlite_wal)
                    conn.execute(f"PRAGMA wal_autocheckpoint = {AUTO_PAGES}")
            except BaseException:
                conn.close()
                raise
            self._wconn = conn
        return self._wconn

    def _sync_for(self, conn: sqlite3.Connection, jobs: list[_Job]) -> None:
        """Before the group's ``BEGIN``: its ``synchronous`` (see the module), set if changed."""
        level = group_level(self._full, self._relax, (job.durable for job in jobs))
        if level != self._level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._level = level

    def _run_jobs(self, conn: sqlite3.Connection, jobs: list[_Job]) -> bool:
        """Inside the open transaction: each job in its savepoint; ``True`` to commit.

        ``False`` when nothing is left to commit (the transaction is then rolled back and
        every job has its answer set).
        """
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
                    _rollback(conn)
                    return False
                if not conn.in_transaction:
                    break  # SQLite rolled the whole group back (disk full, I/O error)
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
        if not conn.in_transaction:
            lost = StoreError(f"{self.what}: the transaction was rolled back; nothing saved")
            for job in jobs:
                if job.error is None:
                    job.error = lost
            return False
        return True

    def _commit_on_thread(self, jobs: list[_Job]) -> None:
        assert self._wconn is not None
        self._commit(self._wconn, jobs)
        self._done(jobs)

    def _commit(self, conn: sqlite3.Connection, jobs: list[_Job]) -> None:
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn)
            for job in jobs:
                job.error = _store_error(self.what, exc)
            return
        self.commits += 1
        self.max_group = max(self.max_group, len(jobs))
        self._pace.committed()

    def _done(self, jobs: list[_Job]) -> None:
        """A group is over (committed or not): answer its callers, start the next group.

        Runs on the writer's thread or on the loop. The next group's statements run on its
        loop, after the answers of this one (one wake-up of the loop carries both).
        """
        checkpoint = False
        idle: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        with self._lock:
            nxt, self._queued = self._queued, []
            if not nxt:
                # Nothing to write: the log checkpointed now if due (a group waits for it).
                checkpoint = self._wal and self._wconn is not None and self._pace.due()
                if not checkpoint:
                    self._writing = False
                    idle, self._idle = self._idle, []
        for loop, future in idle:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                loop.call_soon_threadsafe(_set_none, future)
        if not nxt:
            _answer(jobs)
            if checkpoint:
                self._hand_off(self._writer_pool(), self._checkpoint)
            return
        loop = nxt[0].loop
        same = all(job.loop is loop for job in nxt)
        if same and _on_loop(loop):
            _answer(jobs)
            self._start(nxt)
            return
        if same:
            try:
                loop.call_soon_threadsafe(self._answer_and_start, jobs, nxt)
                return
            except RuntimeError:  # the loop is closed: its jobs still commit, on the thread
                pass
        _answer(jobs)
        self._hand_off(self._writer_pool(), self._on_thread, nxt)

    def _checkpoint(self) -> None:
        """On the writer's thread, with nothing to write: a checkpoint (see ``_sqlite_wal``)."""
        pages = 0  # failed: the commits' own checkpoint is still there
        try:
            if self._wconn is not None:
                pages = int(self._wconn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
                self.checkpoints += 1
        except sqlite3.Error:
            pass
        finally:
            self._pace.checkpointed(pages)
            self._done([])  # whatever happened: the writes that queued meanwhile start

    def _answer_and_start(self, jobs: list[_Job], nxt: list[_Job]) -> None:
        _answer(jobs)
        self._start(nxt)

    async def wait_idle(self) -> None:
        """Until no write group (nor the idle writer's checkpoint) is in flight."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if not self._writing:
                return
            self._idle.append((loop, future))
        await future

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
        """Close the connections and stop the threads; a later call opens them again."""
        self.drop_readers()  # before the main one, whose close then checkpoints the WAL
        await self.wait_idle()
        if self._wexecutor is not None:
            wlane, self._wexecutor = self._wexecutor, None
            failed: list[BaseException] = []
            wlane.submit(self._close_writer, failed)
            await wlane.stop()
            if failed:
                raise failed[0]
        if self._executor is None:
            return

        def shut(_: sqlite3.Connection) -> None:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

        if self.conn is not None:
            await self.run(shut)
        lane, self._executor = self._executor, None
        await lane.stop()

    def _close_writer(self, failed: list[BaseException]) -> None:
        try:
            if self._wconn is not None:
                self._wconn.close()
                self._wconn = None
        except BaseException as exc:  # the caller of ``close`` sees it, as it did
            failed.append(exc)


class _Busy(Exception):  # noqa: N818 (internal: caught where raised, never escapes)
    """A read on the writer's connection found the file locked (busy timeout 0)."""


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.rollback()


def _nothing(conn: sqlite3.Connection) -> None:
    """Opens the connection (``SqliteThread.read`` before the first read)."""


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop`` right now."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _store_error(what: str, exc: BaseException) -> BaseException:
    """SQLite's errors as ``StoreError`` naming the file; the jobs' own errors as they are."""
    if isinstance(exc, sqlite3.Error):
        error = StoreError(f"{what}: {exc}")
        error.__cause__ = exc
        return error
    return exc


def _answer(jobs: list[_Job]) -> None:
    """From any thread: answer each job's caller on the caller's loop (one wake-up a loop)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
    for job in jobs:
        by_loop.setdefault(job.loop, []).append(job)
    for loop, mine in by_loop.items():
        if _on_loop(loop):
            _settle_all(mine)
            continue
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
            loop.call_soon_threadsafe(_settle_all, mine)


def _settle_all(jobs: list[_Job]) -> None:
    for job in jobs:
        _settle(job)


def _set_none(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _settle(job: _Job) -> None:
    """On the caller's loop: answer the caller (unless it stopped waiting)."""
    if job.future.done():
        return
    if job.error is not None:
        job.future.set_exception(job.error)
    else:
        job.future.set_result(job.value)
