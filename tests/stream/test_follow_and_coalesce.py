"""``follow`` from a store, ``stream_send``, and the joining of fragments for lagging
followers (a pure rule: applying the joined deltas gives what applying each gives)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import steadyrun as sr
from steadyrun.runtime import RunCompleted, TextDelta
from steadyrun.stores import MemoryStore
from steadyrun.stream import (
    BlockAdded,
    DisplayBlock,
    DisplaySnapshot,
    RunStatusChanged,
    TextFragment,
    ThinkingFragment,
    ToolArgumentsFragment,
    apply,
    coalesce,
    follow,
)
from steadyrun.testing import ScriptedModel, text

_blocks = st.sampled_from(["a", "b"])
_kinds = st.sampled_from([TextFragment, ThinkingFragment, ToolArgumentsFragment, None])


@st.composite
def _deltas(draw: st.DrawFn) -> list[object]:
    out: list[object] = []
    for seq, (kind, block) in enumerate(
        draw(st.lists(st.tuples(_kinds, _blocks), max_size=30)), start=3
    ):
        if kind is None:
            out.append(RunStatusChanged(seq=seq, status="running"))
        else:
            out.append(kind(seq=seq, block_id=block, text=draw(st.text(max_size=3))))
    return out


START = DisplaySnapshot(
    run_id="r",
    seq=2,
    blocks=(
        DisplayBlock(id="a", kind="content", position=0, live=True),
        DisplayBlock(id="b", kind="tool_call", position=1, live=True),
    ),
)


def _fold(snap: DisplaySnapshot, deltas: list) -> DisplaySnapshot:  # type: ignore[type-arg]
    for delta in deltas:
        snap = apply(snap, delta)
    return snap


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_deltas())
def test_joined_fragments_apply_to_the_same_snapshot(deltas: list) -> None:  # type: ignore[type-arg]
    joined = coalesce(deltas)
    assert _fold(START, joined) == _fold(START, deltas)
    assert len(joined) <= len(deltas)
    for a, b in zip(joined, joined[1:], strict=False):  # nothing left to join
        assert not (
            type(a) is type(b)
            and isinstance(a, TextFragment | ThinkingFragment | ToolArgumentsFragment)
            and a.block_id == b.block_id  # type: ignore[union-attr]
        )


def test_a_joined_fragment_out_of_sequence_is_refused() -> None:
    import pytest

    from steadyrun.stream import SequenceGapError

    joined = TextFragment(seq=9, first_seq=5, block_id="a", text="x")
    with pytest.raises(SequenceGapError):
        apply(START, joined)
    assert apply(replace(START, seq=4), joined).blocks[0].text == "x"
    # Fragments that do not follow each other (a gap between them) are not joined.
    apart = [
        TextFragment(seq=3, block_id="a", text="x"),
        TextFragment(seq=5, block_id="a", text="y"),
    ]
    assert coalesce(apart) == apart
    assert coalesce([BlockAdded(seq=3, block=START.blocks[0])]) == [
        BlockAdded(seq=3, block=START.blocks[0])
    ]


async def test_follow_reads_a_stored_run_from_any_store() -> None:
    store = MemoryStore()
    agent = sr.Agent(name="a", model=ScriptedModel([text("hello there")]))
    await sr.Runtime(store).run(agent, run_id="r", input="hi")
    stream = follow(store, "r")
    first = await anext(stream)
    await stream.aclose()
    assert first.kind == "snapshot" and first.snapshot is not None
    assert first.snapshot.text == "hello there"


async def test_stream_send_continues_a_conversation_with_its_events() -> None:
    store = MemoryStore()
    agent = sr.Agent(name="a", model=ScriptedModel([text("one"), text("two words here")]))
    runtime = sr.Runtime(store, agents=[agent])
    await runtime.run(agent, run_id="r", input="hi")
    events = [e async for e in runtime.stream_send("r", "more please", id="m-2")]
    said = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert said == "two words here"
    assert isinstance(events[-1], RunCompleted)
    # The same id again adds nothing: the run stays as it is.
    again = [e async for e in runtime.stream_send("r", "more please", id="m-2")]
    assert isinstance(again[-1], RunCompleted)
    assert asyncio.get_running_loop() is not None


async def test_a_first_follower_sees_what_another_process_saved_since_the_start() -> None:
    # The built-in engine's form of it: a serve without a worker shows a started run
    # (``expect``), a worker elsewhere executes it; the first follower after that sees it as
    # stored, not the start's placeholder until its next poll.
    from steadyrun.stream import Publisher

    store = MemoryStore()
    publisher = Publisher(store)
    await publisher.expect("r", "a")
    agent = sr.Agent(name="a", model=ScriptedModel([text("hello there")]))
    await sr.Runtime(store).run(agent, run_id="r", input="hi")  # "elsewhere": no observer
    stream = publisher.follow("r", poll_interval=30.0)
    first = await anext(stream)
    await stream.aclose()
    assert first.kind == "snapshot" and first.snapshot is not None
    assert first.snapshot.status == "completed" and first.snapshot.text == "hello there"
