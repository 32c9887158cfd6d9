"""Input enters the context once, and what the run remembers for that stays bounded.

``Checkpoint.seen_inputs`` holds the keys of the input the run took since its turn began (the
feed's claimed position guards everything before), so it is not copied whole into every
checkpoint of a long conversation.
"""

from __future__ import annotations

from typing import Any

import steadyrun as sr
from steadyrun.records import Checkpoint, ContextChange, RunRecord, Step
from steadyrun.stores import Claim
from steadyrun.testing import ScriptedModel, text

TURNS = 150


async def test_a_long_conversation_does_not_grow_its_checkpoint() -> None:
    store = sr.MemoryStore()
    model = ScriptedModel([text(f"answer {i}") for i in range(TURNS)])
    agent = sr.Agent(name="chat", model=model)
    runtime = sr.Runtime(store)
    for i in range(TURNS):
        result = await runtime.run(agent, run_id="r", input=f"question {i}", input_id=f"u{i:04d}")
        assert result.text == f"answer {i}"
    snap = await store.load("r")
    assert snap is not None
    assert snap.checkpoint.seen_inputs == [f"u{TURNS - 1:04d}@1"]
    # The last turn's saves cost what the tenth turn's did (two steps a turn); only counters
    # and the answers' numbers get longer.
    steps = store.step_bytes
    assert abs(steps[-1] - steps[19]) < 40, (steps[19], steps[-1])
    # Every question entered the context once, in order.
    questions = [m.text for m in snap.context if m.role == "user"]
    assert questions == [f"question {i}" for i in range(TURNS)]


class Stuttering:
    """A store whose claims hand every message back twice (a faulty adapter)."""

    def __init__(self, inner: sr.MemoryStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def claim(self, run_id: str, through: int) -> Claim:
        claim = await self.inner.claim(run_id, through)
        return Claim(end_seq=claim.end_seq, messages=[m for m in claim.messages for _ in range(2)])


async def test_a_message_handed_back_twice_enters_the_context_once() -> None:
    store = Stuttering(sr.MemoryStore())
    model = ScriptedModel([text("one"), text("two")])
    agent = sr.Agent(name="chat", model=model)
    runtime = sr.Runtime(store)  # type: ignore[arg-type]
    await runtime.run(agent, run_id="r", input="first", input_id="u1")
    await runtime.send("r", "second", id="u2")
    await runtime.send("r", "third", id="u3")
    result = await runtime.resume("r")
    assert [m.text for m in result.messages if m.role == "user"] == ["first", "second", "third"]


async def test_a_checkpoint_written_with_every_key_is_read_and_trimmed_at_the_next_turn() -> None:
    store = sr.MemoryStore()
    model = ScriptedModel([text("one"), text("two")])
    agent = sr.Agent(name="chat", model=model)
    runtime = sr.Runtime(store)
    first = await runtime.run(agent, run_id="r", input="first", input_id="u1")
    assert first.status == "completed"
    # A run saved by an earlier release kept every key it ever took.
    snap = await store.load("r")
    assert snap is not None
    old = [f"old{i}@1" for i in range(500)] + snap.checkpoint.seen_inputs
    step = Step(
        run=RunRecord(**{f: getattr(snap.run, f) for f in snap.run.__slots__}),  # type: ignore[attr-defined]
        checkpoint=Checkpoint(
            **{f: getattr(snap.checkpoint, f) for f in snap.checkpoint.__slots__}  # type: ignore[attr-defined]
            | {"seen_inputs": old}
        ),
        context=ContextChange(),
    )
    await store.save_step("r", step)
    # The same message again is still not taken twice; a new one starts a turn.
    await runtime.send("r", "first", id="u1")
    await runtime.send("r", "second", id="u2")
    result = await runtime.resume("r")
    assert [m.text for m in result.messages if m.role == "user"] == ["first", "second"]
    snap = await store.load("r")
    assert snap is not None and snap.checkpoint.seen_inputs == ["u2@1"]
