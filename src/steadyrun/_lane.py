"""One thread that runs the functions handed to it, in order: a lighter single-thread executor.

SQLite's connection threads (``_sqlite_thread``) take a function per trip (a group's commit, a
whole write group, a read on the thread) and answer their callers through the jobs' own
asyncio futures. ``ThreadPoolExecutor(max_workers=1).submit`` made a
``concurrent.futures.Future`` (a condition, a callback list) and a work item per trip that
nobody waited on: about 30 us of CPU a trip here against a ``queue.SimpleQueue`` put and get,
and a SQLite loop iteration makes two trips, a service run seven.

What the executor gave is kept: functions run one at a time in the order handed; a function
that raises does not stop the thread (it is logged: the callers here never raise, so one that
does is a bug to see); ``shutdown`` runs what was handed before it and joins the thread, and a
later ``submit`` starts a new one; the thread does not keep the interpreter from exiting, and
at exit what was handed still runs (as the executor's exit hook drains its queue); a forked
child, which has none of its parent's threads, gets a thread of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Lane"]

log = logging.getLogger("steadyrun")

_Item = tuple[Callable[..., Any], tuple[Any, ...]] | None

_live: weakref.WeakSet[Lane] = weakref.WeakSet()


class Lane:
    """A thread named ``name`` and its queue, started on first use.

    Args:
        name: The thread's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the lane's thread after what was handed before."""
        if self._thread is None or self._pid != os.getpid():
            self._start()
        self._queue.put((fn, args))

    def threads(self) -> int:
        """1 while the lane's thread runs in this process, else 0."""
        thread = self._thread
        return int(thread is not None and self._pid == os.getpid() and thread.is_alive())

    def shutdown(self) -> None:
        """Run what was handed so far, then stop the thread (idempotent; blocks)."""
        with self._lock:
            thread, self._thread = self._thread, None
            mine = self._pid == os.getpid()
        if thread is not None and mine:
            self._queue.put(None)
            if thread is not threading.current_thread():
                thread.join()

    async def stop(self) -> None:
        """``shutdown`` without blocking the event loop while what was handed runs."""
        loop = asyncio.get_running_loop()
        drained: asyncio.Future[None] = loop.create_future()
        self.submit(loop.call_soon_threadsafe, _set_none, drained)
        await drained
        self.shutdown()  # the queue is empty: the thread ends at once

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._pid == os.getpid():
                return
            # A new queue for a new thread: after a fork the parent's queue may hold items
            # (and a lock state) that are the parent's.
            self._queue = queue.SimpleQueue()
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=_work, args=(self._queue, self.name), name=self.name, daemon=True
            )
            self._thread.start()
            _live.add(self)


def _work(items: queue.SimpleQueue[_Item], name: str) -> None:
    while True:
        item = items.get()
        if item is None:
            return
        fn, args = item
        try:
            fn(*args)
        except BaseException:
            log.exception("a function handed to thread %s raised; the thread goes on", name)
        del item, fn, args  # nothing of a trip outlives it


def _set_none(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@atexit.register
def _drain() -> None:
    """At exit, what was handed still runs (daemon threads would be cut off mid-trip)."""
    for lane in list(_live):
        lane.shutdown()
