"""The shared feed wait of the memory and SQLite stores: woken by appends, polling when asked."""

from __future__ import annotations

import asyncio
import time

from steadyrun.stores._feed_wait import FeedWaiters


class Feed:
    """A feed whose input arrives without waking anyone (another process's append)."""

    def __init__(self) -> None:
        self.last = 0
        self.checks = 0

    async def pending(self) -> int:
        self.checks += 1
        return self.last


async def test_an_append_wakes_the_wait_at_once() -> None:
    waiters, feed = FeedWaiters(), Feed()
    waiting = asyncio.create_task(waiters.wait("r", feed.pending, 30))
    await asyncio.sleep(0.01)
    feed.last = 3
    waiters.wake("r")
    assert await asyncio.wait_for(waiting, 1) == 3
    assert waiters._events == {}  # nothing left behind for a finished wait


async def test_without_polling_only_a_wake_up_checks_again() -> None:
    waiters, feed = FeedWaiters(), Feed()
    feed.last = 0
    started = time.monotonic()
    assert await waiters.wait("r", feed.pending, 0.1) == 0
    assert time.monotonic() - started >= 0.1
    assert feed.checks == 2  # the first look, and the one at the deadline


async def test_polling_sees_input_nobody_woke_it_for() -> None:
    waiters, feed = FeedWaiters(), Feed()
    waiting = asyncio.create_task(waiters.wait("r", feed.pending, 30, poll=(0.01, 0.02)))
    await asyncio.sleep(0.05)
    feed.last = 5
    assert await asyncio.wait_for(waiting, 1) == 5
    assert feed.checks >= 3


async def test_a_wake_for_another_run_does_not_end_the_wait() -> None:
    waiters, feed = FeedWaiters(), Feed()
    waiting = asyncio.create_task(waiters.wait("r", feed.pending, 0.1))
    await asyncio.sleep(0.01)
    waiters.wake("other")
    assert await waiting == 0
    assert feed.checks == 2
