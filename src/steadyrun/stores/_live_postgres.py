"""``PostgresLive``: the live feed of a PostgreSQL store, over ``NOTIFY``.

Followers ``LISTEN`` on one connection per process (named ``steadyrun-live`` so owners can
see that someone listens); an owner sends its messages with ``pg_notify`` from a task of its
own, several waiting frames in one pipeline, so a run never waits for its followers. Owners
publish only while a listener exists (looked up twice a second while runs execute here), so a
deployment with nobody watching pays one small query per half second per busy process. A
broken listening connection is replaced, and every subscription is told it may have missed
messages (it reloads its run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import psycopg

from steadyrun.stores._live import LiveHub, LiveSubscription, Sender, decode_frame

if TYPE_CHECKING:
    from steadyrun.stores._postgres import PostgresStore

__all__ = ["PostgresLive"]

log = logging.getLogger("steadyrun.live")

APPLICATION = "steadyrun-live"
_QUEUE = 2000
LOOK_EVERY = 0.5
"""Seconds between lookups of listeners while runs here ask whether anyone follows."""
LOOK_FOR = 5.0
"""Seconds the lookups go on after the last time a run asked."""


class PostgresLive:
    """The live feed of a PostgreSQL store (see the module).

    Args:
        store: The store whose database carries the messages.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.channel = f"steadyrun_live_{store.schema}"[:63]
        self.hub = LiveHub()
        self._sender = Sender(self.hub.token)
        self._queue: deque[bytes] = deque()
        self._more = asyncio.Event()
        self._sending: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listen_conn: psycopg.AsyncConnection[Any] | None = None
        self._listening = False
        # Nobody listens until a lookup says so (it starts on first use and takes a moment):
        # a process that no follower watches never opens a connection for the feed.
        self._others = False
        self._asked = -1e9
        self._looking: asyncio.Task[None] | None = None
        # Live traffic has a connection of its own: a send cut off mid-pipeline (a close, a
        # cancelled task) must never hand the store's pool a connection in a broken state.
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._conn_lock = asyncio.Lock()

    def followed(self) -> bool:
        """Whether a process listens on this store's live channel.

        Answered from a lookup that a task of its own repeats every ``LOOK_EVERY`` seconds
        while this is asked (and for ``LOOK_FOR`` seconds after), so a run that asks as each
        model call starts gets an answer at most that old, without waiting for the database.
        """
        if len(self.hub):
            return True
        return self._elsewhere()

    def follows(self, run_id: str) -> bool:
        """Whether ``run_id`` is followed here, or a process listens (as ``followed``)."""
        return self.hub.watched(run_id) or self._elsewhere()

    def _elsewhere(self) -> bool:
        self._asked = time.monotonic()
        if self._looking is None or self._looking.done():
            with contextlib.suppress(RuntimeError):  # no running loop: keep the last answer
                self._looking = asyncio.get_running_loop().create_task(self._keep_looking())
        return self._others

    async def _keep_looking(self) -> None:
        while time.monotonic() - self._asked < LOOK_FOR:
            await self._look()
            await asyncio.sleep(LOOK_EVERY)

    async def _own(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await self._store.database.connect()
        return self._conn

    async def _drop_conn(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                await conn.close()

    async def _look(self) -> None:
        try:
            # One short autocommit query on the store's pool (no pipeline): a cancelled one
            # leaves the connection mid-query, which the pool closes rather than reuses.
            async with self._store.database.connection() as conn:
                cur = await conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = %s"
                    " AND datname = current_database() AND pid <> pg_backend_pid())",
                    (APPLICATION,),
                )
                row = await cur.fetchone()
            self._others = bool(row and row[0])
        except Exception:  # a failed look publishes nothing until the next one
            log.debug("live listener lookup failed", exc_info=True)
            self._others = False

    async def publish(self, message: dict[str, Any]) -> None:
        """Queue the message for the sending task (never waits for the database)."""
        frames = self._sender.frames(message)
        self.hub.deliver_own(str(message["run"]), frames)
        if not self._others:
            return
        self._queue.extend(frames)
        while len(self._queue) > _QUEUE:
            self._queue.popleft()  # the followers see the gap in the numbering
        self._more.set()
        if self._sending is None or self._sending.done():
            self._sending = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), 50))]
            try:
                async with self._conn_lock:
                    conn = await self._own()
                    async with conn.pipeline():
                        for frame in batch:
                            await conn.execute(
                                "SELECT pg_notify(%s, %s)", (self.channel, frame.decode())
                            )
            except Exception:  # the followers see the gap; the run goes on
                log.debug("live messages not sent", exc_info=True)
                await self._drop_conn()

    async def subscribe(self, run_id: str, *, limit: int = 1000) -> LiveSubscription:
        """Start receiving ``run_id``'s messages (listens on first use)."""
        sub = self.hub.subscribe(run_id, limit)
        if self._listener is None or self._listener.done():
            ready = asyncio.get_running_loop().create_future()
            self._listener = asyncio.get_running_loop().create_task(self._listen(ready))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(ready), 10)
        return sub

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        first = True
        while True:
            try:
                conn = await self._store.database.connect()
                self._listen_conn = conn
                await conn.execute(f"SET application_name = '{APPLICATION}'")
                await conn.execute(f"LISTEN {self.channel}")
                if not ready.done():
                    ready.set_result(None)
                if not first:
                    self.hub.gap_all()  # what came while we were away is lost
                first = False
                async for note in conn.notifies():
                    message = decode_frame(note.payload)
                    if message is not None:
                        self.hub.deliver(message)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("live listener lost its connection", exc_info=True)
            finally:
                if self._listen_conn is not None:
                    conn, self._listen_conn = self._listen_conn, None
                    with contextlib.suppress(Exception):
                        await conn.close()
            if not ready.done():
                ready.set_result(None)
            self.hub.gap_all()
            await asyncio.sleep(1.0)

    async def close(self) -> None:
        """Stop listening and sending."""
        for task in (self._listener, self._sending, self._looking):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._listener = self._sending = self._looking = None
        await self._drop_conn()
