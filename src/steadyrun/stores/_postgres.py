"""``PostgresStore``: the store several processes share, one PostgreSQL database.

psycopg 3 in async mode over a connection pool, opened on first use. Each step is one
transaction: a loop step one statement (``_postgres_fast``), any other in pipeline mode (a round
trip only where a result is needed). Writers in
several processes stay correct: a call snapshot is merged with ``merge_call`` against the
stored row locked ``FOR UPDATE``; feed numbering is serialised per run by a transaction-scoped
advisory lock, and a unique index deduplicates input; an append commits a ``NOTIFY`` that wakes
the waiters of every process (``LISTEN`` on one more connection per store), and polling covers
a lost notification.
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from steadyrun._codec import decode, encode
from steadyrun._errors import CallNotFoundError, StoreError, UsageError
from steadyrun.records import (
    CallRecord,
    CallUpdate,
    RunSnapshot,
    RunStatus,
    Step,
    overlay_external,
)
from steadyrun.stores._call_rows import NO_SPOTS, CallRows, Spots, decode_rows, encode_row
from steadyrun.stores._call_rows_postgres import pg_detach, pg_merge, pg_resolved
from steadyrun.stores._call_rows_sql import keep_calls
from steadyrun.stores._encoded import EncodedStep, decode_snapshot, encode_step
from steadyrun.stores._history_postgres import PostgresHistory, pg_entry, pg_segment
from steadyrun.stores._leases import late_outcome
from steadyrun.stores._leases_postgres import PostgresLeases, fence_check, wake_in
from steadyrun.stores._lifecycle_postgres import PostgresLifecycle
from steadyrun.stores._listing import LISTED_COLUMNS, RunFilter, summary_of
from steadyrun.stores._live import close_live
from steadyrun.stores._ports import Claim, FeedMessage, RunSummary
from steadyrun.stores._postgres_db import LOCK_FEED, Connection, PostgresDatabase
from steadyrun.stores._postgres_fast import fast_sql, fast_step, refused
from steadyrun.stores._postgres_load import read_run
from steadyrun.stores._postgres_step import pipelined, write_call, write_step
from steadyrun.stores._sql_values import from_us, to_us

__all__ = ["PostgresStore"]

CHANNEL = "steadyrun_feed"
"""The notification channel of appends; the payload is the run id ("" wakes every waiter)."""

_POLL_FIRST = 0.02
_NOTIFY_MAX = 7900  # NOTIFY payloads must stay below 8000 bytes
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SEGMENT_HINTS = 10_000  # runs whose log segment a store remembers between steps


class PostgresStore(PostgresLifecycle, PostgresHistory):
    """A ``Journal``, ``Feed`` and ``RunIndex`` in a PostgreSQL database, shared by processes.

    It deletes, dumps and restores run trees too (``RunLifecycle``).

    Args:
        dsn: A libpq connection string or URL. Its password never appears in error messages.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most.
        schema: The PostgreSQL schema of the tables; created, with the tables, on first use.
        timeout: Seconds to wait for a connection (from the server or from the pool).
        poll_max: Longest pause, in seconds, between the checks of ``wait_pending`` when no
            notification arrives.

    Attributes:
        schema: The PostgreSQL schema of the tables.
        database: Its connection pool (shared with ``leases``).
        leases: The claims of runs in the same database (``PostgresLeases``).
        bytes_written: Bytes of encoded records written (not counting PostgreSQL's overhead).
        step_bytes: Encoded bytes of each ``save_step``, in order.

    Example:
        ``store = PostgresStore("postgresql://app@db/runs"); runtime = Runtime(store)``;
        ``await store.close()``. Requires the ``postgres`` extra (psycopg and psycopg-pool).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str = "steadyrun",
        timeout: float = 30.0,
        poll_max: float = 0.5,
    ) -> None:
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise UsageError(f"not a PostgreSQL connection string: {exc}") from exc
        if not (0 <= min_size <= max_size and max_size >= 1 and timeout > 0 and poll_max > 0):
            raise UsageError(
                "PostgresStore needs 0 <= min_size <= max_size, max_size >= 1, timeout > 0 and "
                f"poll_max > 0, not {min_size}, {max_size}, {timeout} and {poll_max}"
            )
        if not _SCHEMA_NAME.fullmatch(schema):
            raise UsageError(f"schema must be a plain identifier (letters, digits, _): {schema!r}")
        self.schema = schema
        self.database = PostgresDatabase(
            dsn, params, schema=schema, min_size=min_size, max_size=max_size, timeout=timeout
        )
        self._s = self.database.sql_schema
        self._poll_max = poll_max
        self._listening = asyncio.Lock()
        self._listen_conn: Connection | None = None
        self._listener: asyncio.Task[None] | None = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self.leases = PostgresLeases(self)
        self.bytes_written = 0
        self._segments: dict[str, int] = {}  # run -> log segment of the last step written here
        self._rows = CallRows()  # the call rows written here last, for the next merge
        self._fast_sql = fast_sql(self._s)
        self.step_bytes: list[int] = []

    # -- plumbing (the store's code and its mixins reach the database through these) -------

    async def _ready(self) -> AsyncConnectionPool[Connection]:
        return await self.database.ready()

    async def _connect(self) -> Connection:
        return await self.database.connect()

    def _connection(self) -> AbstractAsyncContextManager[Connection]:
        return self.database.connection()

    def _transaction(self, *, snapshot: bool = False) -> AbstractAsyncContextManager[Connection]:
        return self.database.transaction(snapshot=snapshot)

    def _error(self, exc: psycopg.Error, doing: str = "") -> StoreError:
        return self.database.error(exc, doing)

    async def close(self) -> None:
        """Stop listening and close the pool's connections."""
        await close_live(self)
        await self.leases.close()
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.wait([self._listener])
            self._listener = None
        if self._listen_conn is not None:
            conn, self._listen_conn = self._listen_conn, None
            await conn.close()
        await self.database.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- journal ---------------------------------------------------------------------------

    async def save_step(self, run_id: str, step: Step) -> int | None:
        """Write one step in one transaction.

        Returns what ``pending`` returns for the step's claimed position, read in the step's
        transaction (the loop's steps: in the same statement, no round trip of its own). The
        general paths answer ``None`` for a step that leaves the run not running (nobody
        asks), rather than read the feed for it.
        """
        s = self._s
        run = step.run
        enc = encode_step(run_id, step)
        run_b, cp_b, base, appended = enc.run, enc.checkpoint, enc.base, enc.append
        written, blocks = enc.size, enc.blocks
        times = (to_us(run.created_at), to_us(run.updated_at))
        claimed = step.checkpoint.claimed_through
        if pipelined(step, enc):  # the loop's steps: nothing read first
            hint = self._segments.get(run_id)
            waiting = await self._save_fast(run_id, step, enc, hint)
            if waiting is not None:
                return waiting
            self._rows.forget(run_id, [c.id for c in step.calls])
            bounds: tuple[int, int] | None = None
            async with self.database.write_transaction() as tx:
                feed = tx.conn.cursor()
                if run.status == "running":  # fetched after the step's one wait: no round trip
                    await feed.execute(_FEED_BOUNDS.format(s=s), (run_id, run_id))
                wrote, segment = await write_step(tx, s, run_id, step, enc, hint, self._rows)
                written += wrote
                if run.status == "running":
                    last, consumed = await _one(feed)
                    bounds = (int(last), int(consumed))
            self._remember_segment(run_id, segment)
            self.bytes_written += written
            self.step_bytes.append(written)
            return _waiting(*bounds, claimed) if bounds is not None else None

        self._rows.forget(run_id, [c.id for c in step.calls])  # merged below, not learned
        bounds = None
        async with self._transaction() as conn:
            cur = conn.cursor()
            await fence_check(cur, s, run_id, run.steps)  # a worker's lost lease: refused
            # The run row is locked first: steps of one run never interleave.
            await cur.execute(
                f"INSERT INTO {s}.runs (run_id, agent, status, created_us, updated_us, steps,"
                " record, checkpoint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id)"
                " DO UPDATE SET agent = excluded.agent, status = excluded.status, updated_us ="
                " excluded.updated_us, steps = excluded.steps, record = excluded.record,"
                " checkpoint = excluded.checkpoint",
                (run_id, run.agent, run.status, *times, run.steps, run_b, cp_b),
            )
            if step.removed_blocks:
                await cur.execute(
                    f"DELETE FROM {s}.blocks WHERE run_id = %s AND block_id = ANY(%s)",
                    (run_id, list(step.removed_blocks)),
                )
            if step.removed_calls:
                await cur.execute(
                    f"DELETE FROM {s}.calls WHERE run_id = %s AND call_id = ANY(%s)",
                    (run_id, list(step.removed_calls)),
                )
            ends = None
            if base is None:  # fetched below: no round trip of its own
                ends = await conn.execute(
                    f"SELECT COALESCE(MAX(idx) + 1, 0) FROM {s}.context WHERE run_id = %s",
                    (run_id,),
                )
            segment = await pg_segment(conn.cursor(), s, run_id, step)  # before a base: archives
            if blocks:
                await cur.executemany(
                    f"INSERT INTO {s}.blocks (run_id, block_id, position, block)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, block_id) DO UPDATE SET"
                    " position = excluded.position, block = excluded.block",
                    [(run_id, *b) for b in blocks],
                )
            if ends is None:
                await cur.execute(f"DELETE FROM {s}.context WHERE run_id = %s", (run_id,))
                end = 0
            else:
                end = int((await _one(ends))[0])
            log = (base or []) + appended
            at = end if step.context.start is None or base is not None else step.context.start
            if at > end:
                raise StoreError(
                    f"context append at position {at} leaves a gap after {end} messages"
                )
            if at < end:  # the same step again (a retry): its messages replace themselves
                await pg_detach(
                    cur, s, run_id, segment, at, log
                )  # later rows may refer past ``at``
                await cur.execute(
                    f"DELETE FROM {s}.context WHERE run_id = %s AND idx >= %s", (run_id, at)
                )
            if log:
                await cur.executemany(
                    f"INSERT INTO {s}.context (run_id, idx, message) VALUES (%s, %s, %s)",
                    [(run_id, at + i, m) for i, m in enumerate(log)],
                )
            # The calls after the log: a row may refer to the messages the step just wrote.
            spots = Spots()
            spots.add_messages([*(step.context.base or []), *step.context.append], segment, at)
            for call in step.calls:
                written += await pg_merge(cur, s, run_id, call, spots)
            written += await pg_entry(cur, s, run_id, step, segment, end)
            if run.status == "running":
                bounds = await self._feed_bounds(conn, run_id)
        self._remember_segment(run_id, segment)
        self.bytes_written += written
        self.step_bytes.append(written)
        return _waiting(*bounds, claimed) if bounds is not None else None

    async def _save_fast(
        self, run_id: str, step: Step, enc: EncodedStep, hint: int | None
    ) -> int | None:
        """The step in one statement (``_postgres_fast``); what waits in the feed.

        ``None``: the statement did not write the step, the general path must.
        """
        fast = fast_step(run_id, step, enc, hint, self._rows)
        if fast is None:
            return None
        try:
            (waiting,) = await self.database.call(self._fast_sql, fast.params)
            if waiting is None:  # pragma: no cover - the function answers 0 for none
                raise StoreError(f"PostgreSQL store {self.database.where}: no feed position")
        except StoreError as exc:
            if refused(exc.__cause__):
                return None
            raise
        self._rows.forget(run_id, step.removed_calls)
        for call, row in fast.rows:
            self._rows.wrote(run_id, call, row)
        written = enc.size + fast.written
        self.bytes_written += written
        self.step_bytes.append(written)
        return int(waiting)

    def _remember_segment(self, run_id: str, segment: int) -> None:
        # A hint only (write_step checks it): forgetting costs a start's arguments stored twice.
        if len(self._segments) >= _SEGMENT_HINTS and run_id not in self._segments:
            self._segments.clear()
        self._segments[run_id] = segment

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        """Merge one call snapshot with ``merge_call``, against the stored row locked."""
        try:
            async with self.database.write_transaction() as tx:
                # A lost claim starts nothing; an outcome is a fact.
                fenced = not late_outcome(call)
                self.bytes_written += await write_call(
                    tx, self._s, run_id, call, fenced=fenced, rows=self._rows
                )
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.ForeignKeyViolation):
                raise StoreError(f"call {call.id!r} saved for unknown run {run_id!r}") from exc
            raise

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        """Apply a host write with ``overlay_external``, against the stored row locked."""
        s = self._s
        self._rows.forget(run_id, [call_id])  # the host's write changes the row
        async with self._transaction() as conn:
            await wake_in(conn.cursor(), s, run_id)  # first: the lock order of fenced writes
            cur = await conn.execute(
                f"SELECT record FROM {s}.calls WHERE run_id = %s AND call_id = %s FOR UPDATE",
                (run_id, call_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise CallNotFoundError(run_id, call_id)
            (held,) = decode_rows([row[0]])
            (stored,) = await pg_resolved(cur, s, run_id, [held])
            merged = overlay_external(stored, update)
            await cur.execute(
                f"UPDATE {s}.calls SET status = %s, record = %s WHERE run_id = %s AND call_id = %s",
                (merged.status, encode_row(merged, NO_SPOTS.carrying(held)), run_id, call_id),
            )
        return merged

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """One call record by its key, or ``None``."""
        async with self._transaction(snapshot=True) as conn:
            cur = await conn.execute(
                f"SELECT record FROM {self._s}.calls WHERE run_id = %s AND call_id = %s",
                (run_id, call_id),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            (record,) = await pg_resolved(cur, self._s, run_id, decode_rows([row[0]]))
        return record

    async def load(self, run_id: str) -> RunSnapshot | None:
        """Load a run in one read-only snapshot transaction; ``None`` when there is none."""
        s = self._s
        async with self._transaction(snapshot=True) as conn:
            rows = await read_run(conn, s, run_id)
            if rows is None:
                return None
            snap = decode_snapshot(
                rows.record,
                rows.checkpoint,
                rows.context,
                (),
                rows.blocks,
                call_ids=(),  # blocks stay stored bytes until read, and so do call rows
            )
            # The next step's segment, as write_step would find it: its first step is then
            # one statement too (a run without history entries starts at 0).
            self._remember_segment(run_id, rows.current or 0)
            if not keep_calls(snap, rows.calls, rows.current):
                # Texts of replaced segments cost a statement each, in this snapshot.
                snap.calls = await pg_resolved(
                    conn.cursor(),
                    s,
                    run_id,
                    decode_rows(r for _, r in rows.calls),
                    snap.context,
                    rows.current,
                )
        return snap

    # -- feed ------------------------------------------------------------------------------

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        """Append input; a message whose id and revision are already there is returned as is.

        The run's feed is locked for the transaction, so appends of several processes get
        consecutive numbers; the commit notifies the waiters of every process.
        """
        s = self._s
        async with self._transaction() as conn:
            await conn.execute(
                f"SELECT pg_advisory_xact_lock({LOCK_FEED}, hashtext(%s))",
                (f"{self.schema}/{run_id}",),
            )
            # A statement after the lock: its snapshot sees every append committed before.
            pair = (message.id, message.revision)  # compared as a pair: no joined text
            cur = await conn.execute(
                f"SELECT (SELECT message FROM {s}.feed WHERE run_id = %s AND message_id = %s"
                f" AND revision = %s), (SELECT COALESCE(MAX(seq), 0) + 1 FROM {s}.feed"
                " WHERE run_id = %s)",
                (run_id, *pair, run_id),
            )
            found, seq = await _one(cur)
            if found is not None:
                return decode(found, FeedMessage)
            stored = replace(message, seq=seq, media=list(message.media))
            data = encode(stored)
            await cur.execute(
                f"INSERT INTO {s}.feed (run_id, seq, message_id, revision, message)"
                " VALUES (%s, %s, %s, %s, %s)",
                (run_id, seq, *pair, data),
            )
            payload = run_id if len(run_id.encode()) < _NOTIFY_MAX else ""
            await cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            await wake_in(cur, s, run_id)
        self.bytes_written += len(data)
        for waiter in self._waiters.get(run_id, ()):
            waiter.set()
        return stored

    async def pending(self, run_id: str, after: int) -> int:
        """The last sequence number when it is above ``after`` and unconsumed, else 0."""
        async with self._connection() as conn:
            last, consumed = await self._feed_bounds(conn, run_id)
        return _waiting(last, consumed, after)

    async def claim(self, run_id: str, through: int) -> Claim:
        """The unconsumed messages up to ``through``."""
        async with self._transaction(snapshot=True) as conn:
            last, consumed = await self._feed_bounds(conn, run_id)
            if through <= consumed:
                raise StoreError(
                    f"claim through {through} of run {run_id!r} is at or below consumed {consumed}"
                )
            if through > last:
                raise StoreError(
                    f"claim through {through} of run {run_id!r} is beyond input {last}"
                )
            cur = await conn.execute(
                f"SELECT message FROM {self._s}.feed WHERE run_id = %s AND seq > %s"
                " AND seq <= %s ORDER BY seq",
                (run_id, consumed, through),
            )
            rows = await cur.fetchall()
        return Claim(end_seq=through, messages=[decode(r[0], FeedMessage) for r in rows])

    async def consume(self, run_id: str, through: int) -> None:
        """Mark input delivered up to ``through``; never moves backwards."""
        async with self._transaction() as conn:
            last, _ = await self._feed_bounds(conn, run_id)
            await conn.execute(
                f"INSERT INTO {self._s}.feed_state AS f (run_id, consumed) VALUES (%s, %s)"
                " ON CONFLICT (run_id) DO UPDATE SET consumed ="
                " GREATEST(f.consumed, excluded.consumed)",
                (run_id, max(0, min(through, last))),
            )

    async def wait_pending(self, run_id: str, after: int, max_wait: float) -> int:
        """Wait for input above ``after``.

        An append of any process wakes the waiter through ``LISTEN``/``NOTIFY``; a lost
        notification is covered by polling, backing off to every ``poll_max`` seconds.
        """
        if max_wait <= 0:
            return await self.pending(run_id, after)
        deadline = time.monotonic() + max_wait
        interval = min(_POLL_FIRST, self._poll_max)
        # Registered before each check: a notification that arrives while checking sets the
        # event, so the next wait returns at once.
        waiter = asyncio.Event()
        waiters = self._waiters.setdefault(run_id, set())
        waiters.add(waiter)
        try:
            while True:
                await self._listen()
                waiter.clear()
                seq = await self.pending(run_id, after)
                left = deadline - time.monotonic()
                if seq or left <= 0:
                    return seq
                try:
                    await asyncio.wait_for(waiter.wait(), min(interval, left))
                except TimeoutError:
                    interval = min(interval * 2, self._poll_max)
        finally:
            waiters.discard(waiter)
            if not waiters and self._waiters.get(run_id) is waiters:
                del self._waiters[run_id]

    async def _listen(self) -> None:
        """Start the listener, or restart it when its connection broke."""
        if self._listener is not None and not self._listener.done():
            return
        await self._ready()
        async with self._listening:
            if self._listener is not None and not self._listener.done():
                return
            if self._listen_conn is not None:
                await self._listen_conn.close()
                self._listen_conn = None
            conn = await self._connect()
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
            except psycopg.Error as exc:
                await conn.close()
                raise self._error(exc) from exc
            self._listen_conn = conn
            self._listener = asyncio.create_task(
                self._dispatch(conn), name="steadyrun-postgres-listen"
            )

    async def _dispatch(self, conn: Connection) -> None:
        try:
            async for note in conn.notifies():
                if note.payload:
                    groups = [self._waiters.get(note.payload, set())]
                else:
                    groups = list(self._waiters.values())
                for group in groups:
                    for waiter in group:
                        waiter.set()
        except psycopg.Error:
            # The connection broke: waiters poll until the next wait starts a new listener.
            return

    async def _feed_bounds(self, conn: Connection, run_id: str) -> tuple[int, int]:
        cur = await conn.execute(_FEED_BOUNDS.format(s=self._s), (run_id, run_id))
        row = await _one(cur)
        return int(row[0]), int(row[1])

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
        where, args = wanted.where("%s", to_us)
        sql = (
            f"SELECT {LISTED_COLUMNS} FROM {self._s}.runs{where}"
            " ORDER BY updated_us DESC NULLS LAST, run_id DESC LIMIT %s"
        )
        async with self._connection() as conn:
            cur = await conn.execute(sql, [*args, limit])
            rows = await cur.fetchall()
        return [summary_of(r, from_us) for r in rows]


_FEED_BOUNDS = (
    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM {s}.feed WHERE run_id = %s),"
    " (SELECT COALESCE(MAX(consumed), 0) FROM {s}.feed_state WHERE run_id = %s)"
)
"""A run's last feed sequence number and consumed boundary (``{s}``: the quoted schema)."""


def _waiting(last: int, consumed: int, claimed: int) -> int:
    """What ``pending(run, claimed)`` returns for a feed of these bounds."""
    return int(last) if last > max(claimed, consumed) else 0


async def _one(cur: psycopg.AsyncCursor[TupleRow]) -> TupleRow:
    row = await cur.fetchone()
    if row is None:  # pragma: no cover - aggregates always return a row
        raise StoreError("PostgreSQL returned no row for an aggregate")
    return row
