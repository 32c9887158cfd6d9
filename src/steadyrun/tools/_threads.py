"""The threads that run sync tool bodies, so a blocking tool never blocks the event loop.

``run_in_thread`` is ``asyncio.to_thread`` without the executor machinery: the call goes on a
queue that idle worker threads wait on, and the worker hands the outcome back with one
``call_soon_threadsafe``. ``to_thread`` wraps each call in a ``concurrent.futures.Future``
chained to an asyncio future (locks, callbacks, a second hop back); the loop of a run made one
such call per tool call, about half the cost of its hand-off (``benchmarks/peers``, issue 20).

A quick body is waited for in place. When a tool's last body was done within
``QUICK_WAIT_S`` of its hand-off, the loop has nothing else ready to run and a thread is idle,
the caller waits for the outcome on a lock (the GIL released, so the thread runs) for at most
``QUICK_WAIT_S`` before it falls back to awaiting it. The loop would otherwise go idle in
``epoll`` and be woken through its self-pipe: waiting in place took about 0.02 ms off each
iteration of the N=400 memory loop, of the 0.07-0.09 ms the thread costs over an inline body
(the rest is the other CPU's wake-up; docs/benchmarks.md). The loop is held at most
``QUICK_WAIT_S`` (100 us), and only while nothing else is ready; a tool whose body ran longer
is awaited as before, probed again every ``REPROBE`` calls.

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
import collections
import contextlib
import contextvars
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["Pace", "run_in_thread", "sync_bodies_on_the_loop"]

T = TypeVar("T")

MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""Threads at most, as ``asyncio``'s default executor (``ThreadPoolExecutor``) has."""

QUICK_WAIT_S = 100e-6
"""The longest the loop waits in place for a quick body before it awaits the outcome."""

REPROBE = 16
"""A tool found slow is waited for in place again after this many calls, in case it sped up."""

_now = time.perf_counter


class Pace:
    """Whether a tool's bodies come back quickly enough to be waited for in place.

    One per tool; written by the worker thread (a bool, atomic under the GIL) and read by the
    loop. A new tool is assumed quick: its first call learns otherwise at a cost of at most
    ``QUICK_WAIT_S``.
    """

    __slots__ = ("quick", "_skipped")

    def __init__(self) -> None:
        self.quick = True
        self._skipped = 0

    def wait_in_place(self) -> bool:
        """Whether to wait for this call in place (a slow tool is probed again now and then)."""
        if self.quick:
            return True
        self._skipped += 1
        if self._skipped < REPROBE:
            return False
        self._skipped = 0
        return True


class _Job:
    """One call handed to a thread, and how its outcome gets back."""

    __slots__ = (
        "fn",
        "context",
        "loop",
        "future",
        "pace",
        "done",
        "since",
        "result",
        "exc",
        "over",
    )

    def __init__(
        self,
        fn: Callable[[], Any],
        loop: asyncio.AbstractEventLoop,
        pace: Pace | None,
        done: threading.Lock | None,
    ) -> None:
        self.fn = fn
        self.context = contextvars.copy_context()
        self.loop = loop
        self.future: asyncio.Future[Any] | None = None  # set once the caller awaits
        self.pace = pace
        self.done = done  # held by a caller waiting in place; released when the body is done
        self.since = _now()
        self.result: Any = None
        self.exc: BaseException | None = None
        self.over = False


# Orders a body's end against its caller giving up the wait in place: exactly one of them
# hands the outcome over (the caller takes it, or the worker settles the future).
_handover = threading.Lock()

_worker = threading.local()  # ``on`` in the pool's own threads


class _Pool:
    """Worker threads waiting on one queue; one is started when none is idle (up to a bound)."""

    def __init__(self, max_threads: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        # A token per thread gone idle. A deque's append and pop are atomic: the pure-Python
        # Semaphore it replaces took a Condition's lock on both sides, every call.
        self._idle: collections.deque[None] = collections.deque()
        self._lock = threading.Lock()
        self._threads = 0
        self._max = max_threads

    async def call(self, fn: Callable[[], T], pace: Pace | None) -> T:
        loop = asyncio.get_running_loop()
        try:
            self._idle.pop()  # an idle thread takes the job at once
            idle = True
        except IndexError:
            idle = False  # the body waits for a thread or starts one: not waited for in place
        done: threading.Lock | None = None
        if idle and pace is not None and _loop_idle(loop) and pace.wait_in_place():
            done = threading.Lock()
            done.acquire()
        job = _Job(fn, loop, pace, done)
        self._jobs.put(job)
        if not idle:
            # A body of the pool asking (it runs a loop of its own) gets a thread past the
            # bound: with every thread taken by such bodies, its job would wait for itself.
            self._start_one(beyond=getattr(_worker, "on", False))
        if done is not None:
            done.acquire(timeout=QUICK_WAIT_S)
        with _handover:
            if not job.over:
                job.future = future = loop.create_future()
        if job.future is None:
            return _outcome(job)  # type: ignore[no-any-return]
        return await future  # type: ignore[no-any-return]

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


def _loop_idle(loop: asyncio.AbstractEventLoop) -> bool:
    # asyncio's own loops keep their ready callbacks in ``_ready``; a loop without one
    # (uvloop) is never waited on in place: it is not known to have nothing else to do. A
    # cancelled handle is no work (the loop skips it): a reader removed after its fd was
    # reported ready again leaves one there, as psycopg's waits and the PostgreSQL loop
    # step's did before each tool call, and the body was awaited through the self-pipe.
    ready = getattr(loop, "_ready", None)
    if ready is None:
        return False
    return not ready or all(handle.cancelled() for handle in ready)


def _outcome(job: _Job) -> Any:
    exc, job.exc = job.exc, None  # the job is not to be kept alive by its own traceback
    if exc is not None:
        raise exc
    return job.result


def _run(job: _Job, idle: collections.deque[None]) -> None:
    try:
        job.result = job.context.run(job.fn)
    except BaseException as exc:  # the caller's to see, as to_thread shows it
        job.exc = exc
    if job.pace is not None:
        job.pace.quick = _now() - job.since <= QUICK_WAIT_S
    # Idle before the hand-back: once the loop is woken, this thread only goes back to wait
    # (the woken loop waits for the GIL as long as this thread runs Python code).
    idle.append(None)
    with _handover:
        job.over = True
        future = job.future
    if future is None:
        if job.done is not None:
            job.done.release()
        return
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        job.loop.call_soon_threadsafe(_settle, future, job.result, job.exc)


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


async def run_in_thread(fn: Callable[[], T], pace: Pace | None = None) -> T:
    """Run ``fn()`` in a worker thread and return (or raise) what it did.

    Args:
        fn: The call, with its arguments bound (``functools.partial``).
        pace: The calling tool's record of how quick its bodies are; with one, a quick body
            is waited for in place (see the module's docstring).

    Returns:
        What ``fn`` returned.
    """
    if _ON_THE_LOOP.get():
        return fn()
    return await _pool.call(fn, pace)
