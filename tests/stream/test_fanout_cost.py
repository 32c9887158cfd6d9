"""What a run's followers cost the event loop that executes it (issue 21 item 4).

Followers at one position share each event (and its rendering: one JSON encoding, one SSE
frame, for all of them); wake-ups are paced so that waking the followers takes a bounded share
of the loop (``wake_interval``, a pure rule); a follower the run never hears from costs nothing.
The figures are in benchmarks/stream_fanout.py.
"""

from __future__ import annotations

import asyncio
import json
import time

from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from servicecountkit import service_agent
from steadyrun.stores import MemoryStore
from steadyrun.stores._live_open import live_feed
from steadyrun.stream import (
    BlockAdded,
    Publisher,
    RunStatusChanged,
    StreamEvent,
    TextFragment,
)
from steadyrun.stream._pacing import WAKE_BUDGET, wake_interval
from steadyrun.testing import ScriptedModel, text
from streamkit import words, writer_agent

_secs = st.floats(min_value=0, max_value=10, allow_nan=False)


def test_an_event_is_rendered_once_for_all_who_receive_it() -> None:
    event = StreamEvent(kind="delta", id="e.1", delta=TextFragment(seq=1, block_id="b", text="x"))
    calls: list[StreamEvent] = []

    def render(e: StreamEvent) -> bytes:
        calls.append(e)
        return b"frame:" + e.data()

    first = event.rendered(render)
    assert event.rendered(render) is first
    assert calls == [event]
    assert event.data() is event.data()


@given(
    followers=st.integers(min_value=0, max_value=10_000),
    took=_secs,
    more=_secs,
    longest=st.floats(min_value=0.001, max_value=5, allow_nan=False),
)
def test_wake_interval_keeps_the_wake_ups_within_their_share(
    followers: int, took: float, more: float, longest: float
) -> None:
    interval = wake_interval(followers=followers, took=took, longest=longest)
    assert 0 <= interval <= longest, "never later than the longest interval"
    if interval < longest:
        assert took <= WAKE_BUDGET * interval + 1e-12, "waking takes at most its share"
    slower = wake_interval(followers=followers, took=took + more, longest=longest)
    assert slower >= interval, "costlier wake-ups are never more frequent"
    assert wake_interval(followers=followers + 1, took=took, longest=longest) >= interval


async def _start(publisher: Publisher, store: MemoryStore, count: int, delay: float) -> tuple:  # type: ignore[type-arg]
    agent = writer_agent(count, delay, 0.5)
    runtime = sr.Runtime(store, agents=[agent], observers=[publisher])
    running = asyncio.create_task(runtime.run(agent, run_id="r", input="write"))
    for _ in range(400):
        if await store.load("r") is not None:
            break
        await asyncio.sleep(0.005)
    return running, agent.model


async def _read(
    publisher: Publisher,
    got: list[StreamEvent],
    ready: asyncio.Event,
    cost: float = 0.0,
) -> None:
    """Follow until completed, keeping every event; block the loop ``cost`` s per event."""
    async for event in publisher.follow("r", poll_interval=30):
        got.append(event)
        ready.set()
        if cost:
            time.sleep(cost)  # noqa: ASYNC251 (what a server's writes to a client take)
        if isinstance(event.delta, RunStatusChanged) and event.delta.status == "completed":
            return


def _text(events: list[StreamEvent]) -> str:
    out = ""
    for event in events:
        if isinstance(event.delta, TextFragment):
            out += event.delta.text
        elif isinstance(event.delta, BlockAdded) and event.delta.block.live:
            out += event.delta.block.text
    return out


async def test_followers_at_one_position_share_each_event() -> None:
    store = MemoryStore()
    publisher = Publisher(store)
    running, _ = await _start(publisher, store, 60, 0.002)
    got: list[list[StreamEvent]] = [[], [], []]
    readies = [asyncio.Event() for _ in got]
    tasks = [asyncio.create_task(_read(publisher, g, r)) for g, r in zip(got, readies, strict=True)]
    for ready in readies:
        await ready.wait()
    assert (await running).status == "completed"
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    shared = 0
    for a_events, b_events in ((got[0], got[1]), (got[1], got[2])):
        b_after = {(b_events[i - 1].id, e.id): e for i, e in enumerate(b_events) if i}
        for i, e in enumerate(a_events):
            other = b_after.get((a_events[i - 1].id, e.id)) if i else None
            if other is not None and e.kind == "delta":
                assert other is e, "one event object for followers at one position"
                shared += 1
    assert shared > 10
    for events in got:
        assert _text(events) == "".join(words(60))


async def test_slow_followers_take_a_bounded_share_of_the_loop() -> None:
    # Ten followers that each hold the loop 2 ms per event (20 ms per wake-up): woken at every
    # change they would take most of the loop; paced, a small share of it.
    store = MemoryStore()
    publisher = Publisher(store, max_wake_interval=1.0)
    running, model = await _start(publisher, store, 150, 0.002)
    got: list[list[StreamEvent]] = [[] for _ in range(10)]
    readies = [asyncio.Event() for _ in got]
    tasks = [
        asyncio.create_task(_read(publisher, g, r, cost=0.002))
        for g, r in zip(got, readies, strict=True)
    ]
    for ready in readies:
        await ready.wait()
    started = time.monotonic()
    assert (await running).status == "completed"
    elapsed = time.monotonic() - started
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    # Events received while the run streamed; the followers' time is 2 ms each of them.
    during = sum(len(g) for g in got) * 0.002
    assert during / elapsed < 0.4, f"followers held {during:.2f} s of {elapsed:.2f} s"
    for events in got:
        assert _text(events) == "".join(words(150))


async def test_quiet_followers_get_keepalives_at_their_own_pace_and_leave_nothing() -> None:
    store = MemoryStore()
    agent = sr.Agent(name="a", model=ScriptedModel([text("hi")]))
    await sr.Runtime(store, agents=[agent]).run(agent, run_id="q", input="x")
    publisher = Publisher(store)
    got: dict[float, list[str]] = {0.05: [], 0.3: []}

    async def read(poll: float) -> None:
        async for event in publisher.follow("q", poll_interval=poll):
            got[poll].append(event.kind)

    tasks = [asyncio.create_task(read(poll)) for poll in got]
    await asyncio.sleep(0.02)
    await publisher.on_publish("q", "planning", {"steps": ["one"]})  # a change: a wake-up
    await asyncio.sleep(0.7)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert got[0.05].count("keepalive") >= 4
    assert 1 <= got[0.3].count("keepalive") <= 3
    channel = publisher._channels["q"]
    assert channel.waiters == []
    # A quiet interval is not what waking the followers took: it must not slow the pace.
    assert channel.took_round < 0.04 and channel.took < 0.04


async def test_followers_of_a_run_executing_here_do_not_listen_on_the_live_feed() -> None:
    # The runtime's callbacks show the run: the feed's copies of its fragments (encoded,
    # delivered and decoded per fragment) would be read only to be ignored.
    store = MemoryStore()
    publisher = Publisher(store)
    running, _ = await _start(publisher, store, 40, 0.005)
    feed = live_feed(store)
    assert feed is not None
    got: list[StreamEvent] = []
    ready = asyncio.Event()
    task = asyncio.create_task(_read(publisher, got, ready))
    await ready.wait()
    await asyncio.sleep(0.05)
    assert not feed.followed()
    assert (await running).status == "completed"
    await asyncio.wait_for(task, 30)
    assert _text(got) == "".join(words(40))
    # Once it ended here, a follower listens again (another process may execute it next).
    follower = publisher.follow("r", poll_interval=30)
    await anext(aiter(follower))
    await asyncio.sleep(0.05)
    assert feed.followed()
    await follower.aclose()  # type: ignore[attr-defined]


def _tool_agent(go: asyncio.Event | None = None, name: str = "a") -> sr.Agent:
    """Two calls of the service workload's ``work`` tool, then a text; waits for ``go``."""

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if go is not None:
            await go.wait()  # a follower is there before the calls
        if any(m.role == "tool" for m in request.messages):
            return text("done")
        return sr.testing.tool_calls(("work", {"job": "a"}), ("work", {"job": "b"}))

    model = sr.testing.FunctionModel(respond)
    return sr.Agent(name=name, model=model, tools=service_agent().tools, instructions="go")


async def test_a_run_nobody_follows_copies_no_call_for_the_display(monkeypatch: object) -> None:
    # The display keeps a call's arguments, so it keeps a copy of each record it is told of;
    # a run nobody follows is shown by nothing, so no record is copied for it (a service
    # copied two per call of every run: 3% of its CPU a run).
    import copy

    copied: list[object] = []
    deepcopy = copy.deepcopy

    def counted(value: object, *args: object) -> object:
        copied.append(value)
        return deepcopy(value, *args)  # type: ignore[arg-type]

    store = MemoryStore()
    publisher = Publisher(store)
    runtime = sr.Runtime(store, observers=[publisher])
    monkeypatch.setattr(copy, "deepcopy", counted)  # type: ignore[attr-defined]
    result = await runtime.run(_tool_agent(), run_id="quiet", input="go")
    assert result.status == "completed"
    assert not _records(copied)

    # Followed: the display shows each call, from records of its own.
    go = asyncio.Event()
    running = asyncio.create_task(runtime.run(_tool_agent(go, "b"), run_id="loud", input="go"))
    for _ in range(400):
        if await store.load("loud") is not None:
            break
        await asyncio.sleep(0.005)
    got: list[StreamEvent] = []
    ready = asyncio.Event()
    follower = asyncio.create_task(_read_run(publisher, "loud", got, ready))
    await asyncio.wait_for(ready.wait(), 5)
    copied.clear()
    go.set()
    result = await asyncio.wait_for(running, 5)
    await asyncio.wait_for(follower, 5)
    assert result.status == "completed"
    assert _records(copied), "the display keeps copies"
    display = await publisher.snapshot("loud")
    assert [c.status for c in display.calls] == ["succeeded", "succeeded"]
    assert [json.loads(c.arguments) for c in display.calls] == [{"job": "a"}, {"job": "b"}]


def _records(copied: list[object]) -> list[object]:
    """The copies that are (or hold) a call record: an observer's arguments or the record."""
    return [
        v
        for v in copied
        if isinstance(v, sr.CallRecord)
        or (isinstance(v, tuple) and any(isinstance(x, sr.CallRecord) for x in v))
    ]


async def _read_run(
    publisher: Publisher, run_id: str, got: list[StreamEvent], ready: asyncio.Event
) -> None:
    async for event in publisher.follow(run_id, poll_interval=30):
        got.append(event)
        ready.set()
        if isinstance(event.delta, RunStatusChanged) and event.delta.status == "completed":
            return
