"""The fragments of a run nobody follows: held in place, shown to whoever joins mid-answer.

While nobody follows a run executing here, the publisher keeps its model call's fragments (the
words so far, joined) instead of diffing each into the display; a follower that joins during
the answer sees those words in its first snapshot, then the rest as they come. Holding a
fragment is done in place: ``on_model_delta`` returns nothing to await for such a run (a
coroutine and two awaits per fragment were most of what a fragment cost a busy service).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage
from steadyrun.stores import MemoryStore
from steadyrun.stream import DisplaySnapshot, Publisher, apply
from steadyrun.stream._channel import Channel
from steadyrun.stream._publisher import Publisher as _Publisher
from steadyrun.testing import text

NEVER = 20.0


class _HalfwayWriter:
    """A fake streaming model: ``first`` words, a wait for the test, then ``rest`` words."""

    def __init__(self, first: list[str], rest: list[str]) -> None:
        self.first, self.rest = first, rest
        self.halfway = asyncio.Event()
        self.go_on = asyncio.Event()

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return text("".join(self.first + self.rest))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        for word in self.first:
            yield ResponseDelta(part="text", index=0, text=word)
        self.halfway.set()
        await self.go_on.wait()
        for word in self.rest:
            yield ResponseDelta(part="text", index=0, text=word)
        yield ResponseDelta(part="finish", finish_reason="stop", usage=Usage(output_tokens=1))


def _text(snapshot: DisplaySnapshot) -> str:
    return "".join(getattr(b, "text", "") or "" for b in snapshot.blocks if b.kind == "content")


async def test_a_follower_joining_mid_answer_sees_the_words_so_far_then_the_rest() -> None:
    store = MemoryStore()
    publisher = Publisher(store)
    model = _HalfwayWriter(["w0 ", "w1 ", "w2 "], ["w3 ", "w4"])
    agent = sr.Agent(name="writer", model=model)
    runtime = sr.Runtime(store, agents=[agent], observers=[publisher])
    running = asyncio.create_task(runtime.run(agent, run_id="r", input="write"))
    await asyncio.wait_for(model.halfway.wait(), NEVER)
    channel = publisher._channels["r"]
    assert channel.followers == 0 and channel.held, "nobody follows: the words are held"

    stream = publisher.follow("r", poll_interval=0.05)
    first = await asyncio.wait_for(anext(stream), NEVER)
    assert first.kind == "snapshot" and first.snapshot is not None
    assert _text(first.snapshot) == "w0 w1 w2 ", "the words so far, before any more come"

    model.go_on.set()
    snap = first.snapshot
    while snap.status != "completed":
        event = await asyncio.wait_for(anext(stream), NEVER)
        if event.kind == "snapshot" and event.snapshot is not None:
            snap = event.snapshot
        elif event.kind == "delta" and event.delta is not None:
            snap = apply(snap, event.delta)
    await stream.aclose()
    result = await running
    assert result.text == "w0 w1 w2 w3 w4"
    assert _text(snap) == "w0 w1 w2 w3 w4"


async def test_a_fragment_of_a_run_nobody_follows_is_held_in_place() -> None:
    store = MemoryStore()
    publisher = Publisher(store)
    await publisher.run_started("r", "writer")
    await publisher.on_model_request("r", "mc", _request())
    for word in ("a", "b", "c"):
        out = publisher.on_model_delta("r", "mc", ResponseDelta(part="text", index=0, text=word))
        assert out is None, "nothing to await: held in place"
    assert publisher.on_model_delta("nobody", "mc", ResponseDelta(part="text", text="x")) is None
    channel = publisher._channels["r"]
    assert len(channel.held) == 2, "one call start and the three words joined"
    # Somebody reads it: what was held is shown.
    assert _text(await publisher.snapshot("r")) == "abc"
    assert not channel.held


def _request() -> ModelRequest:
    return ModelRequest(messages=())


_fragments = st.lists(
    st.tuples(
        st.sampled_from(["text", "thinking", "tool_call"]),
        st.integers(min_value=0, max_value=2),
        st.text(max_size=4),
        st.one_of(st.none(), st.sampled_from(["f", "g"])),
    ),
    max_size=12,
)


@given(calls=st.lists(_fragments, min_size=1, max_size=3))
def test_held_fragments_show_what_applying_each_as_it_came_shows(calls: list) -> None:  # type: ignore[type-arg]
    async def both() -> tuple[DisplaySnapshot, DisplaySnapshot]:
        shown = []
        for held in (True, False):
            store = MemoryStore()
            publisher = _Publisher(store)
            await publisher.run_started("r", "writer")
            channel: Channel = publisher._channels["r"]
            if not held:
                channel.followers = 1  # watched: each applied as it comes
            for n, fragments in enumerate(calls):
                await publisher.on_model_request("r", f"mc{n}", _request())
                for part, index, piece, name in fragments:
                    delta = ResponseDelta(part=part, index=index, text=piece, name=name)
                    out = publisher.on_model_delta("r", f"mc{n}", delta)
                    if out is not None:
                        await out
            channel.followers = 0
            async with channel.lock:
                publisher._catch_up(channel)
            assert not channel.held
            shown.append(channel.snapshot)
        return shown[0], shown[1]

    held, each = asyncio.run(both())

    def shown(snap: DisplaySnapshot) -> list[tuple[object, ...]]:
        return [(b.kind, b.text, b.name, b.position, b.live) for b in snap.blocks]

    assert shown(held) == shown(each)
