"""``PostgresLeases``: leases, fencing and wake-ups of runs in a ``PostgresStore``'s database.

The ``work`` table (schema version 2) has one row per run that was ever woken or leased:
wake-ups counted (``wanted``) and handled, the holder, its fencing token and expiry. Expiry
is measured by the database's clock, so the workers' clocks do not matter. A wake-up commits a
``NOTIFY`` on ``steadyrun_work``; ``wait_runnable`` listens for it (one connection per
``PostgresLeases``) and polls as a fallback.

``fence_check`` and ``wake_in`` are the hooks ``PostgresStore`` calls inside its transactions.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

import psycopg
from psycopg.rows import TupleRow

from steadyrun._errors import UsageError
from steadyrun.stores._leases import (
    Holder,
    Lease,
    LeaseLostError,
    StepWriter,
    current_fence,
    ttl_micros,
)
from steadyrun.stores._postgres_db import PostgresDatabase
from steadyrun.stores._sql_values import from_us

__all__ = ["WORK_CHANNEL", "PostgresLeases", "fence_check", "wake_in"]

WORK_CHANNEL = "steadyrun_work"
"""The notification channel of wake-ups and released leases."""

_NOW = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT"

Cursor = psycopg.AsyncCursor[TupleRow]


async def fence_check(cur: Cursor, s: str, run_id: str, steps: int | None = None) -> None:
    """Inside a write's transaction: refuse it when its fence is not the run's current lease.

    The lease row is locked ``FOR SHARE`` until the commit, so a takeover waits for the write
    (or the write sees the takeover). A fenced step (``steps`` given) is logged in ``work_log``.

    Raises:
        LeaseLostError: The current task's lease on the run was taken by another holder.
    """
    fence = current_fence()
    if fence is None or not fence.covers(run_id):
        return
    await cur.execute(
        f"SELECT owner, token FROM {s}.work WHERE run_id = %s FOR SHARE", (fence.run_id,)
    )
    row = await cur.fetchone()
    if row is None or row[1] != fence.token:
        holder = "nobody" if row is None else f"{row[0]!r} with token {row[1]}"
        raise LeaseLostError(
            f"write to run {run_id!r} refused: worker {fence.owner!r} holds token "
            f"{fence.token} of {fence.run_id!r}, but the lease is now {holder}"
        )
    if steps is not None:
        await cur.execute(
            f"INSERT INTO {s}.work_log (root, run_id, steps, owner, token)"
            " VALUES (%s, %s, %s, %s, %s)",
            (fence.run_id, run_id, steps, fence.owner, fence.token),
        )


async def wake_in(cur: Cursor, s: str, run_id: str) -> None:
    """Inside a write's transaction: count a wake-up of ``run_id`` unless its own run wrote it."""
    fence = current_fence()
    if fence is not None and fence.covers(run_id):
        return  # the executing worker sees its own writes
    await _wake(cur, s, run_id)


async def _wake(cur: Cursor, s: str, run_id: str) -> None:
    await cur.execute(
        f"INSERT INTO {s}.work AS w (run_id, wanted, woken_us) VALUES (%s, 1, {_NOW})"
        " ON CONFLICT (run_id) DO UPDATE SET wanted = w.wanted + 1, woken_us ="
        " CASE WHEN w.wanted > w.handled THEN w.woken_us ELSE excluded.woken_us END",
        (run_id,),
    )
    await cur.execute("SELECT pg_notify(%s, '')", (WORK_CHANNEL,))


class OnDatabase(Protocol):
    """What the leases need of a ``PostgresStore``: its database (the same pool)."""

    @property
    def database(self) -> PostgresDatabase:
        """The store's database."""
        ...


class PostgresLeases:
    """The ``Leases`` of a ``PostgresStore`` (same database, same schema, same pool).

    Args:
        store: The store; its writes are fenced by the leases taken here.
        poll_max: Longest wait of ``wait_runnable`` when no notification comes.

    Example:
        ``leases = PostgresLeases(store); lease = await leases.acquire("r-1", "w1", 30)``
    """

    def __init__(self, store: OnDatabase, *, poll_max: float = 2.0) -> None:
        if poll_max <= 0:
            raise UsageError(f"poll_max must be above 0, not {poll_max}")
        self.db = store.database
        self._s = self.db.sql_schema
        self._poll_max = poll_max
        self._event = asyncio.Event()
        self._conn: psycopg.AsyncConnection[TupleRow] | None = None
        self._listener: asyncio.Task[None] | None = None

    async def wake(self, run_id: str) -> None:
        """Count a wake-up of ``run_id`` and notify the workers."""
        async with self.db.transaction() as conn:
            await _wake(conn.cursor(), self._s, run_id)

    async def runnable(self, *, limit: int = 10) -> list[str]:
        """Runs with unhandled wake-ups and no live lease, oldest wake-up first."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT run_id FROM {self._s}.work WHERE wanted > handled AND"
                f" (owner IS NULL OR expires_us < {_NOW}) ORDER BY woken_us LIMIT %s",
                (limit,),
            )
            return [r[0] for r in await cur.fetchall()]

    async def wait_runnable(self, max_wait: float) -> None:
        """Wait for a wake-up notification, at most ``min(max_wait, poll_max)`` seconds."""
        await self._listen()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), min(max_wait, self._poll_max))
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
        """Take the lease when nobody holds it (or the holder's expired); else ``None``."""
        return await self._take(run_id, owner, ttl, force=False, wake=wake, dead=dead_token)

    async def holder(self, run_id: str) -> Holder | None:
        """Who holds the run's lease now, or ``None``."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT owner, token, expires_us FROM {self._s}.work WHERE run_id = %s"
                f" AND owner IS NOT NULL AND expires_us >= {_NOW}",
                (run_id,),
            )
            row = await cur.fetchone()
        if row is None:
            return None
        expires = from_us(int(row[2]))
        return Holder(run_id=run_id, owner=row[0], token=int(row[1]), expires_at=expires)

    async def revoke(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the lease whatever holds it; the previous holder's writes fail from now on."""
        lease = await self._take(run_id, owner, ttl, force=True)
        assert lease is not None
        return lease

    async def renew(self, lease: Lease, ttl: float) -> bool:
        """Extend a held lease by ``ttl`` seconds from now; ``False`` when it was lost."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"UPDATE {self._s}.work SET expires_us = {_NOW} + %s"
                " WHERE run_id = %s AND owner = %s AND token = %s RETURNING 1",
                (ttl_micros(ttl), lease.run_id, lease.owner, lease.token),
            )
            return await cur.fetchone() is not None

    async def release(self, lease: Lease, *, handled: bool = True) -> None:
        """End the lease; notify the workers when the run is still runnable."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"UPDATE {self._s}.work SET owner = NULL, expires_us = NULL, handled ="
                " CASE WHEN %s THEN GREATEST(handled, %s) ELSE handled END"
                " WHERE run_id = %s AND owner = %s AND token = %s RETURNING wanted > handled",
                (handled, lease.wake, lease.run_id, lease.owner, lease.token),
            )
            row = await cur.fetchone()
            if row is not None and row[0]:
                await cur.execute("SELECT pg_notify(%s, '')", (WORK_CHANNEL,))

    async def writers(self, run_id: str) -> list[StepWriter]:
        """Who wrote each fenced step of the run and its sub-agent runs, in write order."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT run_id, steps, owner, token FROM {self._s}.work_log"
                " WHERE root = %s ORDER BY row_id",
                (run_id,),
            )
            return [StepWriter(r[0], int(r[1]), r[2], int(r[3])) for r in await cur.fetchall()]

    async def close(self) -> None:
        """Stop listening (the store stays open)."""
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    # -- inside ------------------------------------------------------------------------------

    async def _take(
        self,
        run_id: str,
        owner: str,
        ttl: float,
        *,
        force: bool,
        wake: bool = False,
        dead: int | None = None,
    ) -> Lease | None:
        free = "" if force else f" AND (owner IS NULL OR expires_us < {_NOW} OR token = %s)"
        # A wake counted with the lease: should this holder die, the run stays runnable.
        wanted = (
            f", wanted = wanted + 1, woken_us = CASE WHEN wanted > handled THEN woken_us"
            f" ELSE {_NOW} END"
            if wake
            else ""
        )
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"INSERT INTO {self._s}.work (run_id) VALUES (%s) ON CONFLICT DO NOTHING",
                (run_id,),
            )
            await cur.execute(
                f"UPDATE {self._s}.work SET owner = %s, token = token + 1,"
                f" expires_us = {_NOW} + %s{wanted} WHERE run_id = %s{free}"
                " RETURNING token, wanted",
                (owner, ttl_micros(ttl), run_id)
                if force
                else (owner, ttl_micros(ttl), run_id, -1 if dead is None else dead),
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return Lease(run_id=run_id, owner=owner, token=int(row[0]), wake=int(row[1]))

    async def _listen(self) -> None:
        if self._listener is not None and not self._listener.done():
            return
        await self.db.ready()
        if self._conn is not None:
            await self._conn.close()
        self._conn = await self.db.connect()
        await self._conn.execute(f"LISTEN {WORK_CHANNEL}")
        self._listener = asyncio.create_task(self._dispatch(self._conn), name="steadyrun-work")

    async def _dispatch(self, conn: psycopg.AsyncConnection[TupleRow]) -> None:
        try:
            async for _ in conn.notifies():
                self._event.set()
        except psycopg.Error:
            self._event.set()  # the connection broke: the next wait listens again
