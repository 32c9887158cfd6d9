"""A quick sync body waited for in place (``tools/_threads.py``, issue 20).

When a tool's bodies come back within ``QUICK_WAIT_S`` and the loop has nothing else ready, the
caller waits for the outcome on a lock instead of letting the loop go idle and be woken
through its self-pipe. These pin when it does and when it must not, and that the wait never
loses, doubles or swaps an outcome, never outlasts its bound, and keeps what ``to_thread`` gave.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import steadyrun.tools._threads as threads
from steadyrun.tools import tool
from steadyrun.tools._threads import REPROBE, Pace, run_in_thread

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("quick_request_id", default="-")


class Wakes:
    """Counts the loop's ``call_soon_threadsafe``: the way an awaited outcome comes back."""

    def __init__(self, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A bound no machine's thread wake-up misses, so "waited in place" is certain, not likely.
    monkeypatch.setattr(threads, "QUICK_WAIT_S", 30.0)
    yield


@tool
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


async def test_a_quick_body_on_an_idle_loop_comes_back_without_waking_the_loop(
    patient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    wakes = Wakes(asyncio.get_running_loop(), monkeypatch)
    assert [await double.invoke({"x": i}) for i in range(20)] == [2 * i for i in range(20)]
    assert wakes.count == 0


async def test_a_body_is_awaited_when_the_loop_has_other_work_ready(
    patient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    wakes = Wakes(loop, monkeypatch)
    ran: list[int] = []
    for i in range(5):
        loop.call_soon(ran.append, i)  # ready: the loop is not idle
        assert await double.invoke({"x": i}) == 2 * i
    assert wakes.count == 5
    assert ran == [0, 1, 2, 3, 4]


async def test_a_cancelled_callback_left_ready_is_no_work(
    patient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader removed after its fd was reported ready again leaves its handle, cancelled, in
    # the loop's ready queue (psycopg's waits, the PostgreSQL loop step's): the loop would
    # skip it, so it has nothing to do, and the body is still waited for in place.
    loop = asyncio.get_running_loop()
    wakes = Wakes(loop, monkeypatch)
    for i in range(5):
        loop.call_soon(lambda: None).cancel()
        assert await double.invoke({"x": i}) == 2 * i
    assert wakes.count == 0


async def test_without_a_pace_the_body_is_always_awaited(
    patient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    wakes = Wakes(asyncio.get_running_loop(), monkeypatch)
    assert [await run_in_thread(lambda i=i: i) for i in range(3)] == [0, 1, 2]
    assert wakes.count == 3


async def test_the_wait_in_place_is_bounded_a_body_that_needs_the_loop_still_ends() -> None:
    # The body can only end once the loop has run a callback: a wait in place without its
    # bound would hold the loop forever.
    loop = asyncio.get_running_loop()
    needed = threading.Event()

    @tool
    def needs_the_loop() -> str:
        """Waits for the loop."""
        loop.call_soon_threadsafe(needed.set)
        if not needed.wait(10):
            return "the loop was held"
        return "done"

    assert await asyncio.wait_for(needs_the_loop.invoke({}), 20) == "done"


async def test_a_slow_tool_is_not_waited_for_then_probed_again() -> None:
    pace = Pace()
    release = threading.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, release.set)
    # The first body outlasts the bound: the caller falls back to awaiting it.
    assert await run_in_thread(lambda: release.wait(10), pace) is True
    assert pace.quick is False
    waits = [pace.wait_in_place() for _ in range(2 * REPROBE)]
    assert waits.count(True) == 2
    assert waits[REPROBE - 1] and waits[2 * REPROBE - 1]


async def test_errors_and_context_come_through_the_wait_in_place(patient: None) -> None:
    @tool
    def boom() -> None:
        """Raises."""
        raise KeyError("inside the tool")

    @tool
    def read_and_set() -> str:
        """Reads the caller's variable, then sets it."""
        seen = request_id.get()
        request_id.set("changed in the tool")
        return seen

    with pytest.raises(KeyError, match="inside the tool"):
        await boom.invoke({})
    request_id.set("r-7")
    assert await read_and_set.invoke({}) == "r-7"
    assert request_id.get() == "r-7"


async def test_outcomes_racing_the_bound_are_each_delivered_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bound about as long as a thread's wake-up: calls end on both sides of it, and the
    # caller's giving up races the body's end. Every call gets its own outcome, once.
    monkeypatch.setattr(threads, "QUICK_WAIT_S", 20e-6)
    pace = Pace()
    for i in range(2000):
        pace.quick = True
        assert await asyncio.wait_for(run_in_thread(lambda i=i: i, pace), 10) == i


async def test_calls_side_by_side_with_a_pace_each_get_their_own_outcome(patient: None) -> None:
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def meet(x: int) -> int:
        """Waits for the others."""
        barrier.wait()
        return x

    assert await asyncio.gather(*(meet.invoke({"x": i}) for i in range(3))) == [0, 1, 2]


def test_an_event_loop_that_cannot_say_it_is_idle_awaits_every_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setattr(threads, "QUICK_WAIT_S", 30.0)

    async def main() -> tuple[list[int], int]:
        wakes = Wakes(asyncio.get_running_loop(), monkeypatch)
        return [await double.invoke({"x": i}) for i in range(3)], wakes.count

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == ([0, 2, 4], 3)
