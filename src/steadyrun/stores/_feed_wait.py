"""Waiting for a run's input inside one process: the loop the memory and SQLite stores share.

An append of this store object wakes its waiters at once. A store that other processes write
too (SQLite) also polls, backing off, since their appends wake nothing here. PostgreSQL keeps
its own loop: ``LISTEN``/``NOTIFY`` wakes it for appends of any process.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

__all__ = ["FeedWaiters"]


class FeedWaiters:
    """The waits of one store object for input of its runs."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def wake(self, run_id: str) -> None:
        """Wake every wait for input of ``run_id`` (the store just appended some)."""
        for waiter in self._events.get(run_id, ()):
            waiter.set()

    async def wait(
        self,
        run_id: str,
        pending: Callable[[], Awaitable[int]],
        max_wait: float,
        *,
        poll: tuple[float, float] | None = None,
    ) -> int:
        """Wait until ``pending`` finds input or ``max_wait`` seconds have passed.

        Args:
            run_id: The run whose appends wake this wait.
            pending: The store's check: the last sequence number of new input, or 0.
            max_wait: Seconds to wait at most; ``pending`` is checked at least once.
            poll: ``(first, longest)`` interval in seconds between checks when nothing
                wakes the wait, doubling from the first; ``None``: only a wake-up checks again.

        Returns:
            What the last check of ``pending`` returned.
        """
        deadline = time.monotonic() + max_wait
        interval = poll[0] if poll is not None else math.inf
        while True:
            seq = await pending()
            left = deadline - time.monotonic()
            if seq or left <= 0:
                return seq
            waiter = asyncio.Event()
            waiters = self._events.setdefault(run_id, set())
            waiters.add(waiter)
            try:
                await asyncio.wait_for(waiter.wait(), min(interval, left))
            except TimeoutError:
                if poll is not None:
                    interval = min(interval * 2, poll[1])
            finally:
                waiters.discard(waiter)
                if not waiters and self._events.get(run_id) is waiters:
                    del self._events[run_id]
