"""``SqliteLeases``: claims, fencing and wake-ups of runs in a ``SqliteStore``'s file.

The ``work`` table (schema version 2) has one row per run that was ever woken or claimed:
wake-ups counted (``wanted``) and handled, the holder, its fencing token and expiry. Expiry is
measured by the wall clock in microseconds: every process sharing a SQLite file runs on the
same machine, so they share that clock. Several processes may share one file: a wake-up
written by any of them is seen by ``wait_runnable`` through polling (``poll_max``), and at
once in the process that wrote it. Claims taken, renewed and let go are the store's write jobs
(``SqliteThread.write``), so they share the commit (and the fsync) of the writes queued with
them instead of each making its own.

Those three are written ``durable=False``: alone in a group they commit without an fsync of
their own (``SqliteThread``), and the next synced commit (a call's start, a step, an input)
makes them durable. Nothing is lost when the process dies (the WAL frames are in the OS's page
cache); what a crash of the machine can lose is a claim, renewal or release written since the
last synced commit, and losing it leaves the ``work`` row as a crash of the process just
before that write would have, which the claims already survive: the executor died with the
machine. A lost claim is one nobody executes under; anything written under it is fenced by
it, so synced after it. A lost renewal only makes a dead holder's claim expire sooner. A lost
release leaves the dead holder's claim to expire, and its wake-ups unhandled: the run is taken
again, as after a killed process, and goes on from its last synced step. Wake-ups counted on
their own (``wake``) and forced takes (``revoke``: cancels, engines taking a run over) stay
durable: a wake-up lost would leave a run nobody takes, and a revoke is rare and not on any
run's path to its model calls.

``fence_check`` and ``wake_in`` run inside the store's transactions, on its SQLite thread; the
fence is read on the event loop and passed in, because context variables do not cross into
the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

from steadyrun._errors import UsageError
from steadyrun._sqlite_thread import SqliteThread
from steadyrun.stores._leases import Fence, Holder, Lease, LeaseLostError, StepWriter, ttl_micros
from steadyrun.stores._sql_values import from_us

__all__ = ["SqliteLeases", "fence_check", "wake_in"]


def _now_us() -> int:
    return time.time_ns() // 1000


def fence_check(
    conn: sqlite3.Connection, fence: Fence | None, run_id: str, steps: int | None = None
) -> None:
    """Inside a write's transaction: refuse it when its fence is not the run's current claim.

    The transaction holds SQLite's write lock (``BEGIN IMMEDIATE``), so no takeover can slip
    between this check and the commit. A fenced step (``steps`` given) is logged in
    ``work_log`` by an insert that is the check itself: it inserts only while the run's
    token is the fence's, so a step reads the lease row only when it is refused (for the
    error's words).

    Raises:
        LeaseLostError: The claim was taken by another executor (or revoked by a cancel).
    """
    if fence is None or not fence.covers(run_id):
        return
    if steps is not None:
        # One b-tree keyed (root, row_id): the root's next number is on the page written.
        cur = conn.execute(
            "INSERT INTO work_log (root, row_id, run_id, steps, owner, token) SELECT ?,"
            " (SELECT COALESCE(MAX(row_id), 0) + 1 FROM work_log WHERE root = ?), ?, ?, ?, ?"
            " FROM work WHERE run_id = ? AND token = ?",
            (fence.run_id, fence.run_id, run_id, steps, fence.owner, fence.token)
            + (fence.run_id, fence.token),
        )
        if cur.rowcount == 1:
            return
    row = conn.execute("SELECT owner, token FROM work WHERE run_id = ?", (fence.run_id,)).fetchone()
    # A refused step's insert found no row of its token, so it raises here whatever ``row``
    # says (it says the same under the write lock).
    if steps is not None or row is None or row[1] != fence.token:
        holder = "nobody" if row is None else f"{row[0]!r} with token {row[1]}"
        raise LeaseLostError(
            f"write to run {run_id!r} refused: executor {fence.owner!r} holds token "
            f"{fence.token} of {fence.run_id!r}, but the claim is now {holder}"
        )


def wake_in(conn: sqlite3.Connection, fence: Fence | None, run_id: str) -> bool:
    """Inside a write's transaction: count a wake-up unless the run's own executor wrote it.

    Returns whether a wake-up was counted (the store then wakes this process's waiters).
    """
    if fence is not None and fence.covers(run_id):
        return False
    _wake(conn, run_id)
    return True


def _wake(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute(
        "INSERT INTO work AS w (run_id, wanted, woken_us) VALUES (?, 1, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET wanted = w.wanted + 1, woken_us ="
        " CASE WHEN w.wanted > w.handled THEN w.woken_us ELSE excluded.woken_us END",
        (run_id, _now_us()),
    )


class SqliteLeases:
    """The ``Leases`` of a ``SqliteStore`` (same file, same connection thread).

    Args:
        db: The store's connection thread (``SqliteStore``'s); the store's writes are fenced
            by the claims taken here.
        poll_max: Longest wait of ``wait_runnable`` between looks at the file (wake-ups
            written by other processes are seen this late at most).

    Example:
        ``lease = await store.leases.acquire("r-1", "w1", 30)``
    """

    def __init__(self, db: SqliteThread, *, poll_max: float = 0.25) -> None:
        if poll_max <= 0:
            raise UsageError(f"poll_max must be above 0, not {poll_max}")
        self.db = db
        self.poll_max = poll_max
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Wake this process's ``wait_runnable`` (the store calls it after a wake-up)."""
        self._event.set()

    async def wake(self, run_id: str) -> None:
        """Count a wake-up of ``run_id``."""
        await self.db.write(lambda conn: _wake(conn, run_id))
        self.notify()

    async def runnable(self, *, limit: int = 10) -> list[str]:
        """Runs with unhandled wake-ups and no live claim, oldest wake-up first."""

        def read(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT run_id FROM work WHERE wanted > handled AND"
                " (owner IS NULL OR expires_us < ?) ORDER BY woken_us LIMIT ?",
                (_now_us(), limit),
            ).fetchall()
            return [r[0] for r in rows]

        return await self.db.read(read)

    async def wait_runnable(self, max_wait: float) -> None:
        """Wait for a wake-up of this process, at most ``min(max_wait, poll_max)`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), min(max_wait, self.poll_max))
        self._event.clear()

    async def acquire(
        self,
        run_id: str,
        owner: str,
        ttl: float,
        *,
        wake: bool = False,
        dead_token: int | None = None,
    ) -> Lease | None:
        """Take the claim when nobody holds it (or its holder's expired); else ``None``."""
        return await self._take(run_id, owner, ttl, force=False, wake=wake, dead=dead_token)

    async def revoke(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the claim whatever holds it; the previous holder's writes fail from now on."""
        lease = await self._take(run_id, owner, ttl, force=True, wake=False, dead=None)
        assert lease is not None  # a forced take always updates the row it inserted
        return lease

    async def holder(self, run_id: str) -> Holder | None:
        """Who holds the run's claim now, or ``None``."""

        def read(conn: sqlite3.Connection) -> tuple[str, int, int] | None:
            row = conn.execute(
                "SELECT owner, token, expires_us FROM work WHERE run_id = ?"
                " AND owner IS NOT NULL AND expires_us >= ?",
                (run_id, _now_us()),
            ).fetchone()
            return None if row is None else (row[0], int(row[1]), int(row[2]))

        row = await self.db.read(read)
        if row is None:
            return None
        expires = from_us(row[2])
        return Holder(run_id=run_id, owner=row[0], token=row[1], expires_at=expires)

    async def renew(self, lease: Lease, ttl: float) -> bool:
        """Extend a held claim by ``ttl`` seconds from now; ``False`` when it was lost."""
        span = ttl_micros(ttl)

        def write(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE work SET expires_us = ? WHERE run_id = ? AND owner = ? AND token = ?",
                (_now_us() + span, lease.run_id, lease.owner, lease.token),
            )
            return cur.rowcount == 1

        # Lost with the machine: the dead holder's claim expires sooner (see the module).
        return await self.db.write(write, durable=False)

    async def release(self, lease: Lease, *, handled: bool = True) -> None:
        """End the claim; wake this process's workers when the run is still runnable."""

        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "UPDATE work SET owner = NULL, expires_us = NULL, handled ="
                " CASE WHEN ? THEN MAX(handled, ?) ELSE handled END"
                " WHERE run_id = ? AND owner = ? AND token = ? RETURNING wanted > handled",
                (handled, lease.wake, lease.run_id, lease.owner, lease.token),
            ).fetchone()
            return bool(row is not None and row[0])

        # Lost with the machine: as if its executor died just before; the claim expires and
        # the run is taken again from its last synced step (see the module).
        if await self.db.write(write, durable=False):
            self.notify()

    async def writers(self, run_id: str) -> list[StepWriter]:
        """Who wrote each fenced step of the run and its sub-agent runs, in write order."""

        def read(conn: sqlite3.Connection) -> list[StepWriter]:
            rows = conn.execute(
                "SELECT run_id, steps, owner, token FROM work_log WHERE root = ? ORDER BY row_id",
                (run_id,),
            ).fetchall()
            return [StepWriter(r[0], int(r[1]), r[2], int(r[3])) for r in rows]

        return await self.db.read(read)

    async def close(self) -> None:
        """Nothing to stop (the store closes its own connection)."""

    def _take_sync(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        owner: str,
        span: int,
        force: bool,
        wake: bool,
        dead: int | None,
    ) -> Lease | None:
        now = _now_us()
        conn.execute("INSERT INTO work (run_id) VALUES (?) ON CONFLICT DO NOTHING", (run_id,))
        free = "" if force else " AND (owner IS NULL OR expires_us < ? OR token = ?)"
        wanted = (
            ", wanted = wanted + 1, woken_us = CASE WHEN wanted > handled THEN woken_us ELSE ? END"
            if wake
            else ""
        )
        args: list[object] = [owner, now + span]
        if wake:
            args.append(now)
        args.append(run_id)
        if not force:
            args += [now, -1 if dead is None else dead]
        row = conn.execute(
            f"UPDATE work SET owner = ?, token = token + 1, expires_us = ?{wanted}"
            f" WHERE run_id = ?{free} RETURNING token, wanted",
            args,
        ).fetchone()
        if row is None:
            return None
        return Lease(run_id=run_id, owner=owner, token=int(row[0]), wake=int(row[1]))

    async def _take(
        self, run_id: str, owner: str, ttl: float, *, force: bool, wake: bool, dead: int | None
    ) -> Lease | None:
        span = ttl_micros(ttl)
        # A claim lost with the machine is one nobody executes under, and its wake-up (``wake``)
        # goes with the caller that died; a revoke stays durable (see the module).
        return await self.db.write(
            lambda conn: self._take_sync(conn, run_id, owner, span, force, wake, dead),
            durable=force,
        )
