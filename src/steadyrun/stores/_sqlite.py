"""``SqliteStore``: the embedded default store, one SQLite file in WAL mode.

The event loop never waits for a disk sync: each write is one job of a ``BEGIN IMMEDIATE``
transaction whose statements run on the loop, on a writer connection of the store's own, and
whose ``COMMIT`` (the fsync) runs on the writer's thread; the writes of other runs that queued
meanwhile share the next one (group commit: one fsync for all, see ``SqliteThread.write``).
Reads between writes use the idle writer's connection on the loop, reads while a commit is in
flight a read-only connection on the loop; the rest (lifecycle operations, history) runs on a
second connection on a thread of its own.
Other processes may read the same file at any time (WAL) and write to it (they wait up to
``busy_timeout``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal, TypeVar

from steadyrun._codec import decode, encode
from steadyrun._errors import CallNotFoundError, FormatVersionError, StoreError, UsageError
from steadyrun._sqlite_thread import SqliteThread
from steadyrun._sqlite_wal import use_wal
from steadyrun.records import (
    CallRecord,
    CallUpdate,
    RunSnapshot,
    RunStatus,
    Step,
    overlay_external,
)
from steadyrun.stores._call_rows import NO_SPOTS, decode_rows, encode_row
from steadyrun.stores._call_rows_sql import sqlite_calls, sqlite_resolved
from steadyrun.stores._encoded import encode_step
from steadyrun.stores._feed_wait import FeedWaiters
from steadyrun.stores._history_sql import SqliteHistory
from steadyrun.stores._leases import current_fence, late_outcome
from steadyrun.stores._leases_sqlite import SqliteLeases, fence_check, wake_in
from steadyrun.stores._lifecycle_sqlite import SqliteLifecycle, prepare_new_file, read_snapshot
from steadyrun.stores._listing import LISTED_COLUMNS, RunFilter, summary_of
from steadyrun.stores._live import close_live
from steadyrun.stores._ports import Claim, FeedMessage, RunSummary
from steadyrun.stores._sql_values import from_us, statements, to_us
from steadyrun.stores._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from steadyrun.stores._sqlite_step import Known, feed_bounds, merge_call_row, write_step

__all__ = ["SqliteStore"]

T = TypeVar("T")
Synchronous = Literal["FULL", "NORMAL", "OFF"]

_POLL_FIRST = 0.02
_READER_MAP = 256 << 20  # bytes of the file a reader connection maps
_POLL_MAX = 0.5


class SqliteStore(SqliteLifecycle, SqliteHistory):
    """A ``Journal``, ``Feed`` and ``RunIndex`` in one SQLite file.

    It deletes, dumps and restores run trees too (``RunLifecycle``), and ``reclaim`` gives
    the space of deleted runs back to the disk.

    Args:
        path: The database file; created, with its schema, on first use.
        synchronous: SQLite's ``synchronous`` setting. ``FULL`` (the default) syncs the WAL on
            every commit, so a saved step survives a power loss; ``NORMAL`` survives a crash of
            the process but may lose the last commits on power loss.
        busy_timeout: Seconds to wait for another process's write lock before failing.

    Attributes:
        leases: The claims of runs kept in the same file (see ``steadyrun.stores.Leases``).
        bytes_written: Bytes of encoded records written (not counting SQLite's own overhead).
        step_bytes: Encoded bytes of each ``save_step``, in order.

    Example:
        ``store = SqliteStore("runs.db"); runtime = Runtime(store)``; ``await store.close()``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 10.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL", "OFF"):
            raise UsageError(f"synchronous must be FULL, NORMAL or OFF, not {synchronous!r}")
        self.path = Path(path)
        self.synchronous = synchronous
        self._busy_ms = int(busy_timeout * 1000)
        self._db = SqliteThread(
            self._open,
            f"SQLite store {self.path}",
            "steadyrun-sqlite",
            # Reads go to the idle writer's connection on the loop, else (a commit in flight)
            # to this reader connection, on the loop too. The reader was once off: with it the
            # retention test's file stayed unshrunk. That was the test stopping the worker
            # before its reclaim (reads on the loop made it see the empty list sooner; the
            # test now waits for the whole pass), not a statement left open: it passes with
            # every read forced onto the reader.
            open_reader=self._open_reader,
        )
        self._waiters = FeedWaiters()
        self.leases = SqliteLeases(self._db)
        self._known = Known()  # what this store wrote last: a step reads it no more
        self.bytes_written = 0
        self.step_bytes: list[int] = []

    # -- plumbing --------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.run(fn)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # The reader connection: a read of one run never waits for another run's fsync.
        return await self._db.read(fn)

    def _open_reader(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA busy_timeout = 0")  # busy: SqliteThread.read waits on the thread
            conn.execute("PRAGMA query_only = ON")
            # Pages read straight from a map of the file rather than by a read() call each into
            # this connection's own cache, which starts empty: a new store's first load of the
            # harness's N=400 run spent 0.25 ms of system time there. Only this reader maps the
            # file (it writes nothing); a truncated file is never read past its end, as a WAL
            # checkpoint truncates only what no reader's snapshot still holds.
            conn.execute(f"PRAGMA mmap_size = {_READER_MAP}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            prepare_new_file(conn)  # before any table: deleted runs' pages can be given back
            # Another process may be opening the same new file right now (see use_wal).
            use_wal(conn, self._busy_ms / 1000)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise FormatVersionError(f"SQLite store {self.path}", version, SCHEMA_VERSION)
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in statements(MIGRATIONS[number - 1]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        """Close the connection and stop the store's thread."""
        await close_live(self)
        await self._db.close()

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- journal ---------------------------------------------------------------------------

    async def save_step(self, run_id: str, step: Step) -> int | None:
        """Write one step in one transaction.

        Returns what ``pending`` returns for the step's claimed position, read inside the
        step's write transaction: one statement more there instead of a read of its own
        (``None`` for a step that leaves the run not running: nobody asks).
        """
        enc = encode_step(run_id, step)
        written = enc.size
        fence = current_fence()
        known = self._known

        def write(conn: sqlite3.Connection) -> tuple[int, int | None, int | None]:
            return write_step(conn, run_id, step, enc, fence, known)

        try:
            wrote, waiting, segment = await self._db.write(write)
        except BaseException:
            known.forget_step(run_id)  # committed or not: the next step reads its segment
            raise
        known.wrote_step(run_id, fence, step.run.steps, segment)
        written += wrote
        self.bytes_written += written
        self.step_bytes.append(written)
        return waiting

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        """Merge one call snapshot with ``merge_call``."""
        fence = current_fence()

        def write(conn: sqlite3.Connection) -> int:
            if not late_outcome(call):  # a call's start is never written by a lost claim
                fence_check(conn, fence, run_id)
            try:
                return merge_call_row(conn, run_id, call, NO_SPOTS, self._known.rows)
            except sqlite3.IntegrityError as exc:  # the calls' foreign key: no such run
                raise StoreError(f"call {call.id!r} saved for unknown run {run_id!r}") from exc

        self.bytes_written += await self._db.write(write)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        """Apply a host write with ``overlay_external``; it wakes the run."""
        fence = current_fence()
        woke = False

        def write(conn: sqlite3.Connection) -> CallRecord:
            nonlocal woke
            row = conn.execute(
                "SELECT record FROM calls WHERE run_id = ? AND call_id = ?", (run_id, call_id)
            ).fetchone()
            if row is None:
                raise CallNotFoundError(run_id, call_id)
            (held,) = decode_rows([row[0]])
            (stored,) = sqlite_resolved(conn, run_id, [held])
            merged = overlay_external(stored, update)
            conn.execute(
                "UPDATE calls SET status = ?, record = ? WHERE run_id = ? AND call_id = ?",
                (
                    merged.status,
                    encode_row(merged, NO_SPOTS.carrying(held)),
                    run_id,
                    call_id,
                ),
            )
            woke = wake_in(conn, fence, _root(run_id))
            return merged

        merged = await self._db.write(write)
        if woke:
            self.leases.notify()
        return merged

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """One call record by its key, or ``None``."""

        def read(conn: sqlite3.Connection) -> CallRecord | None:
            conn.execute("BEGIN")  # the row and the log it refers to, as of one moment
            try:
                row = conn.execute(
                    "SELECT record FROM calls WHERE run_id = ? AND call_id = ?", (run_id, call_id)
                ).fetchone()
                return sqlite_calls(conn, run_id, [row[0]])[0] if row is not None else None
            finally:
                conn.execute("COMMIT")

        return await self._read(read)

    async def load(self, run_id: str) -> RunSnapshot | None:
        """Load a run in one read transaction; ``None`` when there is none."""

        def read(conn: sqlite3.Connection) -> RunSnapshot | None:
            conn.execute("BEGIN")
            try:
                return read_snapshot(conn, run_id)
            finally:
                conn.execute("COMMIT")

        return await self._read(read)

    # -- feed ------------------------------------------------------------------------------

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        """Append input; a message whose id and revision are already there is returned as is.

        A new message wakes the run (outside the run's own execution).
        """
        fence = current_fence()
        woke = False

        def write(conn: sqlite3.Connection) -> FeedMessage:
            nonlocal woke
            pair = (message.id, message.revision)  # compared as a pair: no joined text
            row = conn.execute(
                "SELECT message FROM feed WHERE run_id = ? AND message_id = ? AND revision = ?",
                (run_id, *pair),
            ).fetchone()
            if row is not None:
                return decode(row[0], FeedMessage)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM feed WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            stored = FeedMessage(
                seq=seq,
                id=message.id,
                revision=message.revision,
                role=message.role,
                content=message.content,
                media=list(message.media),
                meta=message.meta,
            )
            data = encode(stored)
            conn.execute(
                "INSERT INTO feed (run_id, seq, message_id, revision, message)"
                " VALUES (?, ?, ?, ?, ?)",
                (run_id, seq, *pair, data),
            )
            woke = wake_in(conn, fence, _root(run_id))
            self.bytes_written += len(data)
            return stored

        stored = await self._db.write(write)
        self._waiters.wake(run_id)
        if woke:
            self.leases.notify()
        return stored

    async def pending(self, run_id: str, after: int) -> int:
        """The last sequence number when it is above ``after`` and unconsumed, else 0."""

        def read(conn: sqlite3.Connection) -> int:
            last, consumed = feed_bounds(conn, run_id)
            return last if last > max(after, consumed) else 0

        return await self._read(read)

    async def claim(self, run_id: str, through: int) -> Claim:
        """The unconsumed messages up to ``through``."""

        def read(conn: sqlite3.Connection) -> Claim:
            conn.execute("BEGIN")
            try:
                last, consumed = feed_bounds(conn, run_id)
                if through <= consumed:
                    raise StoreError(
                        f"claim through {through} of run {run_id!r} is at or below consumed "
                        f"{consumed}"
                    )
                if through > last:
                    raise StoreError(
                        f"claim through {through} of run {run_id!r} is beyond input {last}"
                    )
                rows = conn.execute(
                    "SELECT message FROM feed WHERE run_id = ? AND seq > ? AND seq <= ?"
                    " ORDER BY seq",
                    (run_id, consumed, through),
                ).fetchall()
            finally:
                conn.execute("COMMIT")
            return Claim(end_seq=through, messages=[decode(r[0], FeedMessage) for r in rows])

        return await self._read(read)

    async def consume(self, run_id: str, through: int) -> None:
        """Mark input delivered up to ``through``; never moves backwards."""

        def marked(conn: sqlite3.Connection) -> bool:
            last, consumed = feed_bounds(conn, run_id)
            return consumed >= min(through, last)

        # A completed run's final step marked it already (``mark_consumed``): nothing to write.
        if await self._read(marked):
            return

        def write(conn: sqlite3.Connection) -> None:
            last, _ = feed_bounds(conn, run_id)
            conn.execute(
                "INSERT INTO feed_state (run_id, consumed) VALUES (?, ?) ON CONFLICT (run_id)"
                " DO UPDATE SET consumed = MAX(consumed, excluded.consumed)",
                (run_id, max(0, min(through, last))),
            )

        # No fsync of its own: the run's last step holds durably how far it claimed, so a
        # machine crash that loses this mark leaves a run whose next execution claims nothing
        # new and consumes again (``Runtime._resume``); the next synced commit makes it durable.
        await self._db.write(write, durable=False)

    async def wait_pending(self, run_id: str, after: int, max_wait: float) -> int:
        """Wait for input above ``after``.

        Appends of this process wake the waiter at once; appends of other processes are seen
        by polling, backing off to every 0.5 s.
        """
        return await self._waiters.wait(
            run_id, lambda: self.pending(run_id, after), max_wait, poll=(_POLL_FIRST, _POLL_MAX)
        )

    # -- run index -------------------------------------------------------------------------

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        updated_before: datetime | None = None,
        limit: int = 100,
    ) -> list[RunSummary]:
        """Runs by last activity, newest first, through the listing indexes."""
        wanted = RunFilter(status=status, agent=agent, updated_before=updated_before)
        where, args = wanted.where("?", to_us)
        # DESC puts NULL times last in SQLite, where runs never saved belong.
        sql = f"SELECT {LISTED_COLUMNS} FROM runs{where} ORDER BY updated_us DESC, run_id DESC"

        def read(conn: sqlite3.Connection) -> list[RunSummary]:
            rows = conn.execute(sql + " LIMIT ?", [*args, limit]).fetchall()
            return [summary_of(r, from_us) for r in rows]

        return await self._read(read)


def _root(run_id: str) -> str:
    """The top-level run of a sub-agent run (``<run>/<call>``): its executor wakes for both."""
    return run_id.split("/", 1)[0]
