"""When a followed run's model response shows: after its save, once, or at the latest soon.

The runtime tells its observers of a response before saving the step it makes. The publisher
reloads the run (new blocks, calls, usage) at the first callback after that save: the calls'
start, the next model call, the run's end. When none comes (a slow observer before it, say),
the reload comes ``max_wake_interval`` after the response.
"""

from __future__ import annotations

import asyncio
from typing import Any

import steadyrun as sr
from steadyrun.stores import MemoryStore
from steadyrun.stream import DisplaySnapshot, Publisher, apply
from steadyrun.testing import ScriptedModel, text, tool_calls
from streamkit import until

NEVER = 20.0


@sr.tool
async def look(what: str) -> str:
    """Look something up.

    Args:
        what: What.
    """
    return f"found {what}"


class _SlowStarts(sr.Observer):
    """Holds every tool start until the test lets it go (an observer before the publisher)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.waiting = asyncio.Event()

    async def on_tool_start(self, run_id: str, call: Any) -> None:
        self.waiting.set()
        await self.go.wait()


class _CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, run_id: str) -> Any:
        self.loads += 1
        return await super().load(run_id)


async def _follow(publisher: Publisher, run_id: str, shown: list[DisplaySnapshot]) -> None:
    snap: DisplaySnapshot | None = None
    async for event in publisher.follow(run_id, poll_interval=3600.0):
        if event.kind == "snapshot" and event.snapshot is not None:
            snap = event.snapshot
        elif event.kind == "delta" and event.delta is not None and snap is not None:
            snap = apply(snap, event.delta)
        if snap is not None:
            shown.append(snap)


def _calls(shown: list[DisplaySnapshot]) -> list[str]:
    return [c.name for c in shown[-1].calls] if shown else []


async def test_a_response_whose_next_callback_is_late_shows_after_the_interval() -> None:
    store = MemoryStore()
    publisher = Publisher(store, max_wake_interval=0.05)
    slow = _SlowStarts()
    model = ScriptedModel([tool_calls(("look", {"what": "x"})), text("done")])
    agent = sr.Agent(name="a", model=model, tools=[look])
    runtime = sr.Runtime(store, agents=[agent], observers=[slow, publisher])
    await publisher.expect("r", "a", stored=False)
    shown: list[DisplaySnapshot] = []
    follower = asyncio.create_task(_follow(publisher, "r", shown))
    await until(lambda: publisher._channels["r"].followers == 1)
    running = asyncio.create_task(runtime.run(agent, run_id="r", input="go"))
    await asyncio.wait_for(slow.waiting.wait(), NEVER)
    # The publisher has had no callback since the response (the slow observer holds the
    # call's start): the saved response shows all the same, an interval later.
    await until(lambda: _calls(shown) == ["look"])
    slow.go.set()
    assert (await running).status == "completed"
    await until(lambda: shown[-1].status == "completed")
    follower.cancel()


async def test_a_followed_response_is_read_once_after_its_save() -> None:
    store = _CountingStore()
    publisher = Publisher(store, max_wake_interval=3600.0)  # the interval never decides here
    model = ScriptedModel(
        [tool_calls(("look", {"what": "x"})), tool_calls(("look", {"what": "y"})), text("done")]
    )
    agent = sr.Agent(name="a", model=model, tools=[look])
    runtime = sr.Runtime(store, agents=[agent], observers=[publisher])
    await publisher.expect("r", "a", stored=False)
    shown: list[DisplaySnapshot] = []
    follower = asyncio.create_task(_follow(publisher, "r", shown))
    await until(lambda: publisher._channels["r"].followers == 1)
    loads = store.loads
    result = await runtime.run(agent, run_id="r", input="go")
    assert result.status == "completed"
    await until(lambda: shown[-1].status == "completed")
    # The follower's first look, the run's start (the runtime's own), each response with its
    # call's start (two), the end: no reload before a response's save, none of a response
    # twice (8 before 2026-12-07: a reload at each response, most of them before its save).
    assert store.loads - loads <= 5, store.loads - loads
    assert [c.name for c in shown[-1].calls] == ["look", "look"]
    assert shown[-1].status == "completed"
    follower.cancel()


async def test_the_next_model_call_shows_a_response_still_due() -> None:
    # A response no call followed (its text refused by a guard, say): the next model call
    # comes after its save, and reloads the run before its own fragments.
    store = _CountingStore()
    publisher = Publisher(store, max_wake_interval=3600.0)
    await publisher.run_started("r", "a")
    channel = publisher._channels["r"]
    channel.followers = 1
    publisher.on_model_response("r", "mc1", text("no"))
    assert channel.due is not None
    loads = store.loads
    await publisher.on_model_request("r", "mc2", sr.ModelRequest(messages=()))
    assert store.loads == loads + 1 and channel.due is None
    await publisher.on_model_request("r", "mc2", sr.ModelRequest(messages=()))
    assert store.loads == loads + 1, "nothing due: no reload"


async def test_what_is_saved_before_a_new_subscription_is_not_missed() -> None:
    # A follower here of a run another process executes: the publisher loads it, then
    # subscribes to its live feed. A save between the two sends no note to this process: the
    # reload after the subscription shows it (the poll is an hour away).
    from steadyrun.stores._live_open import live_feed

    store = MemoryStore()
    agent = sr.Agent(name="a", model=ScriptedModel([text("first"), text("second")]))
    elsewhere = sr.Runtime(store, agents=[agent])  # "another process": no observer here
    assert (await elsewhere.run(agent, run_id="r", input="one")).text == "first"
    feed: Any = live_feed(store)
    subscribe = feed.subscribe

    async def late_subscribe(run_id: str, **kwargs: Any) -> Any:
        await elsewhere.send("r", "two")
        assert (await elsewhere.resume("r")).text == "second"  # saved before the subscription
        return await subscribe(run_id, **kwargs)

    feed.subscribe = late_subscribe
    publisher = Publisher(store)
    stream = publisher.follow("r", poll_interval=3600.0)
    first = await asyncio.wait_for(anext(stream), NEVER)
    await stream.aclose()
    assert first.kind == "snapshot" and first.snapshot is not None
    assert first.snapshot.text == "second"


async def test_a_run_executing_elsewhere_is_read_once_per_response_too() -> None:
    # The owner's notes on the live feed: "resp" when a response came (its step is saved
    # after it), "saved" when a call starts or settles, "end". The follower's process reloads
    # at "saved" and "end", not at "resp" too, before the owner's save.
    store = _CountingStore()
    publisher = Publisher(store, max_wake_interval=3600.0)
    model = ScriptedModel(
        [tool_calls(("look", {"what": "x"})), tool_calls(("look", {"what": "y"})), text("done")]
    )
    agent = sr.Agent(name="a", model=model, tools=[look])
    elsewhere = sr.Runtime(store, agents=[agent])  # "another process": its own broadcaster
    await publisher.expect("r", "a", stored=False)
    shown: list[DisplaySnapshot] = []
    follower = asyncio.create_task(_follow(publisher, "r", shown))
    # Its first snapshot comes after its subscription and the reload that follows it.
    await until(lambda: bool(shown))
    loads = store.loads
    result = await elsewhere.run(agent, run_id="r", input="go")
    assert result.status == "completed"
    await until(lambda: bool(shown) and shown[-1].status == "completed")
    # The runtime's own look; the follower's: at the start, at each call's start and
    # settlement (four), at the end (11 before 2026-12-07: a reload at each "resp" too).
    assert store.loads - loads <= 7, store.loads - loads
    assert [c.name for c in shown[-1].calls] == ["look", "look"]
    follower.cancel()
