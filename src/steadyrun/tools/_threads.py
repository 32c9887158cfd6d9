"""The threads that run sync tool bodies, so a blocking tool never blocks the event loop.

``run_in_thread`` is ``asyncio.to_thread`` without the executor machinery: the call goes on a
queue that idle worker threads wait on, and the worker hands the outcome back with one
``call_soon_threadsafe``. ``to_thread`` wraps each call in a ``concurrent.futures.Future``
chained to an asyncio future (locks, callbacks, a second hop back); the loop of a run made one
such call per tool call, about half the cost of its hand-off (``benchmarks/peers``, issue 20).

What ``to_thread`` gives is kept: the body runs in a copy of the caller's context variables;
calls overlap, on up to as many threads as asyncio's default executor would use, and wait in
order beyond that; a cancelled caller stops waiting while the body runs to its end (a thread
cannot be stopped); exceptions reach the caller unchanged. The threads are shared by every
event loop of the process, so a body that runs an event loop of its own and calls a sync tool
there gets a thread even past the bound (asyncio's per-loop executors gave it one). They are
daemon threads: an idle one never holds up the exit (unlike ``to_thread``'s, a body still
running when the process exits is not waited for). A child process made by ``fork`` starts
with no threads and a new pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["run_in_thread", "sync_bodies_on_the_loop"]

T = TypeVar("T")

MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""Threads at most, as ``asyncio``'s default executor (``ThreadPoolExecutor``) has."""

_Job = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


_worker = threading.local()  # ``on`` in the pool's own threads


class _Pool:
    """Worker threads waiting on one queue; one is started when none is idle (up to a bound)."""

    def __init__(self, max_threads: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # a release per thread gone idle
        self._lock = threading.Lock()
        self._threads = 0
        self._max = max_threads

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, contextvars.copy_context(), fn))
        if not self._idle.acquire(blocking=False):
            # A body of the pool asking (it runs a loop of its own) gets a thread past the
            # bound: with every thread taken by such bodies, its job would wait for itself.
            self._start_one(beyond=getattr(_worker, "on", False))
        return future

    def _start_one(self, *, beyond: bool) -> None:
        with self._lock:
            if self._threads >= self._max and not beyond:
                return  # the job waits for the first thread to go idle
            self._threads += 1
            name = f"steadyrun-tool-{self._threads}"
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        _worker.on = True
        jobs, idle = self._jobs, self._idle
        while True:
            _run(jobs.get(), idle)  # a function of its own: nothing of a job outlives it


def _run(job: _Job, idle: threading.Semaphore) -> None:
    loop, future, context, fn = job
    try:
        result = context.run(fn)
    except BaseException as exc:  # the caller's to see, as to_thread shows it
        outcome: tuple[Any, BaseException | None] = (None, exc)
    else:
        outcome = (result, None)
    # Idle before the hand-back: once the loop is woken, this thread only goes back to wait
    # (the woken loop waits for the GIL as long as this thread runs Python code).
    idle.release()
    _hand_back(loop, future, *outcome)


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    # A closed loop raises RuntimeError: nobody waits for the outcome any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, result, exc)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return  # the caller stopped waiting; the body ran to its end all the same
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


_pool = _Pool(MAX_THREADS)


def _new_pool() -> None:
    global _pool
    _pool = _Pool(MAX_THREADS)


# A forked child has none of the parent's threads: counting them would leave its jobs waiting.
os.register_at_fork(after_in_child=_new_pool)


_ON_THE_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "steadyrun_sync_bodies_on_the_loop", default=False
)


@contextlib.contextmanager
def sync_bodies_on_the_loop() -> Iterator[None]:
    """Within the block, ``run_in_thread`` calls ``fn`` on the caller's loop, no thread.

    For an event loop that takes no other thread's callback: a Temporal workflow's, where
    the tools that run in the workflow (deterministic and I/O-free, or they could not run
    there) would otherwise wait forever for their thread's answer.
    """
    token = _ON_THE_LOOP.set(True)
    try:
        yield
    finally:
        _ON_THE_LOOP.reset(token)


async def run_in_thread(fn: Callable[[], T]) -> T:
    """Run ``fn()`` in a worker thread and return (or raise) what it did.

    Args:
        fn: The call, with its arguments bound (``functools.partial``).

    Returns:
        What ``fn`` returned.
    """
    if _ON_THE_LOOP.get():
        return fn()
    return await _pool.submit(fn)
