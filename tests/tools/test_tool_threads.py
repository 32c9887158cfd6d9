"""Sync tool bodies in worker threads (``tools/_threads.py``): what ``asyncio.to_thread`` gave.

The runtime hands a sync body to its own pool of threads instead of the loop's default executor
(a cheaper hand-off, issue 20). These pin what must not change: off the loop, the caller's
context variables, calls overlapping, a cancelled caller, several event loops, a forked child.
"""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import threading
import time

import pytest

from steadyrun.tools import tool
from steadyrun.tools._threads import MAX_THREADS, run_in_thread

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@tool
def where() -> int:
    """The thread it runs in."""
    return threading.get_ident()


async def test_a_sync_body_sees_the_callers_context_and_cannot_change_it() -> None:
    @tool
    def read_and_set() -> str:
        """Reads the caller's variable, then sets it."""
        seen = request_id.get()
        request_id.set("changed in the tool")
        return seen

    request_id.set("r-42")
    assert await read_and_set.invoke({}) == "r-42"
    assert request_id.get() == "r-42"  # the body ran in a copy, as with to_thread


async def test_sync_bodies_called_together_overlap() -> None:
    # Three bodies that each wait for the other two: run one after another, they time out.
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def meet() -> int:
        """Waits for the others."""
        barrier.wait()
        return threading.get_ident()

    threads = await asyncio.gather(*(meet.invoke({}) for _ in range(3)))
    assert len(set(threads)) == 3
    assert MAX_THREADS >= 3


def tool_threads() -> int:
    return sum(t.name.startswith("steadyrun-tool-") for t in threading.enumerate())


async def test_calls_one_after_another_reuse_the_idle_threads() -> None:
    loop_thread = threading.get_ident()
    await where.invoke({})
    before = tool_threads()
    seen = {await where.invoke({}) for _ in range(20)}
    assert loop_thread not in seen
    assert tool_threads() == before  # no thread started for a call while one was idle


async def test_a_cancelled_caller_stops_waiting_and_the_threads_go_on() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> str:
        started.set()
        release.wait(5)
        finished.append("slow")
        return "late"

    task = asyncio.create_task(run_in_thread(slow))
    await run_in_thread(lambda: started.wait(5))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert await run_in_thread(lambda: "next") == "next"
    for _ in range(100):  # the body ran to its end all the same
        if finished:
            break
        await asyncio.sleep(0.01)
    assert finished == ["slow"]


def test_the_threads_serve_event_loops_one_after_another_and_side_by_side() -> None:
    assert asyncio.run(run_in_thread(lambda: 1)) == 1
    assert asyncio.run(run_in_thread(lambda: 2)) == 2
    out: list[int] = []

    def other_loop(n: int) -> None:
        out.append(asyncio.run(run_in_thread(lambda: n)))

    loops = [threading.Thread(target=other_loop, args=(n,)) for n in range(3)]
    for t in loops:
        t.start()
    for t in loops:
        t.join(10)
    assert sorted(out) == [0, 1, 2]


def _child(conn: multiprocessing.connection.Connection) -> None:
    async def main() -> int:
        return await asyncio.wait_for(run_in_thread(lambda: 7), 5)

    conn.send(asyncio.run(main()))


def test_a_forked_child_runs_sync_bodies() -> None:
    asyncio.run(run_in_thread(time.time))  # the parent's pool has a thread now
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child,))
    proc.start()
    proc.join(20)
    assert proc.exitcode == 0
    assert parent.recv() == 7


async def test_a_body_that_runs_a_loop_of_its_own_gets_a_thread_when_all_are_taken() -> None:
    # The threads serve every loop of the process: a sync body that runs a loop of its own
    # (asyncio.run) whose sync body waits for a thread must not wait for itself.
    barrier = threading.Barrier(MAX_THREADS, timeout=10)

    def outer() -> int:
        barrier.wait()  # every thread of the pool is taken now
        return asyncio.run(asyncio.wait_for(run_in_thread(lambda: 1), 10))

    assert (
        await asyncio.wait_for(
            asyncio.gather(*(run_in_thread(outer) for _ in range(MAX_THREADS))), 20
        )
        == [1] * MAX_THREADS
    )
