"""Many followers of one run are woken in batches, not once per fragment (issue 21 item 4).

Every wake-up costs each follower a turn of the event loop that also executes the run, so the
publisher wakes a run's followers at most every 0.25 ms per follower (up to
``max_wake_interval``): with 100 followers of a model writing a word per millisecond, each
follower gets the words joined into fewer events, and still ends with the whole text. The
figures (what that saves a run) are in benchmarks/stream_fanout.py.
"""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun.stores import MemoryStore
from steadyrun.stream import BlockAdded, Publisher, RunStatusChanged, TextFragment
from streamkit import words, writer_agent

WORDS = 200


async def _read(publisher: Publisher, run_id: str, got: list[str], ready: asyncio.Event) -> int:
    """Follow until the run completed: the live text into ``got``; the number of events."""
    events = 0
    async for event in publisher.follow(run_id, poll_interval=30):
        events += 1
        ready.set()
        delta = event.delta
        if isinstance(delta, TextFragment):
            got.append(delta.text)
        elif isinstance(delta, BlockAdded) and delta.block.live:
            got.append(delta.block.text)
        elif isinstance(delta, RunStatusChanged) and delta.status == "completed":
            return events
    raise AssertionError("the stream ended")


async def test_a_hundred_followers_get_the_words_joined_and_whole() -> None:
    store = MemoryStore()
    agent = writer_agent(WORDS, 0.001, 0.5)
    publisher = Publisher(store)
    runtime = sr.Runtime(store, agents=[agent], observers=[publisher])
    running = asyncio.create_task(runtime.run(agent, run_id="r", input="write"))
    for _ in range(400):
        if await store.load("r") is not None:
            break
        await asyncio.sleep(0.005)
    texts: list[list[str]] = [[] for _ in range(100)]
    readies = [asyncio.Event() for _ in texts]
    followers = [
        asyncio.create_task(_read(publisher, "r", got, ready))
        for got, ready in zip(texts, readies, strict=True)
    ]
    for ready in readies:
        await ready.wait()  # all in before the pause ends and the words come
    assert (await running).status == "completed"
    counts = await asyncio.wait_for(asyncio.gather(*followers), 60)
    for got in texts:
        assert "".join(got) == "".join(words(WORDS))
        assert len(got) < WORDS, "the words came joined, not one event per word"
    assert max(counts) < WORDS
