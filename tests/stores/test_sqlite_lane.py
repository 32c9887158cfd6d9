"""The SQLite connection threads take their trips through a ``Lane``: one thread, a queue, in
order, no ``concurrent.futures.Future`` per trip (``ThreadPoolExecutor.submit`` made one, with
its condition and callbacks, for callers that answer through their own asyncio futures:
about 30 us of CPU a trip here, two trips a loop iteration on SQLite)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import steadyrun as sr
from loopsteps import loop_steps
from steadyrun._lane import Lane


def test_a_lane_runs_what_it_is_handed_in_order_on_one_thread() -> None:
    lane = Lane("test-lane")
    seen: list[tuple[int, str]] = []
    done = threading.Event()
    for i in range(50):
        lane.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    lane.submit(done.set)
    assert done.wait(5)
    assert [i for i, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"test-lane"}
    lane.shutdown()


def test_a_failing_function_is_logged_and_the_lane_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lane = Lane("test-lane")
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR):
        lane.submit(boom)
        lane.submit(done.set)
        assert done.wait(5)
    assert "boom" in caplog.text
    lane.shutdown()


def test_shutdown_runs_what_was_handed_first_and_a_later_submit_starts_again() -> None:
    lane = Lane("test-lane")
    seen: list[int] = []
    lane.submit(seen.append, 1)
    lane.shutdown()
    assert seen == [1]
    assert lane.threads() == 0
    done = threading.Event()
    lane.submit(done.set)
    assert done.wait(5)
    lane.shutdown()
    lane.shutdown()  # idempotent


def test_a_lane_in_a_forked_child_starts_its_own_thread() -> None:
    lane = Lane("test-lane")
    lane.submit(lambda: None)
    lane._pid = -1  # as a forked child sees it: the parent's thread did not come along
    done = threading.Event()
    lane.submit(done.set)
    assert done.wait(5)
    lane.shutdown()


async def test_no_concurrent_future_per_sqlite_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    init = concurrent.futures.Future.__init__

    def counted(self: Any) -> None:
        made.append(1)
        init(self)

    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        steps = loop_steps(3)
        await store.save_step("r", steps[0])
        monkeypatch.setattr(concurrent.futures.Future, "__init__", counted)
        for step in steps[1:]:
            await store.save_step("r", step)
        assert await store.load("r") is not None
        monkeypatch.undo()
    assert made == []


async def test_stop_waits_on_the_loop_for_what_was_handed() -> None:
    lane = Lane("test-lane")
    seen: list[int] = []
    lane.submit(seen.append, 1)
    await lane.stop()
    assert seen == [1] and lane.threads() == 0
