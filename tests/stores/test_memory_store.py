"""MemoryStore as a Journal (its Feed side is in test_memory_feed.py)."""

import asyncio
import json
from dataclasses import replace

import pytest

from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import MediaRef, Message, Usage
from steadyrun.records import (
    Block,
    CallDecision,
    CallRecord,
    CallUpdate,
    Checkpoint,
    ContextChange,
    InputRequest,
    RunRecord,
    Step,
)
from steadyrun.stores import Feed, Journal, MemoryStore, Store

RUN = "run-1"


def run_row(**kw: object) -> RunRecord:
    return RunRecord(run_id=RUN, agent="agent", **kw)  # type: ignore[arg-type]


def call(call_id: str = "c1", rev: int = 1, **kw: object) -> CallRecord:
    return CallRecord(id=call_id, name="tool", rev=rev, **kw)  # type: ignore[arg-type]


def block(block_id: str, position: int, **kw: object) -> Block:
    return Block(id=block_id, kind="content", position=position, **kw)  # type: ignore[arg-type]


def step(**kw: object) -> Step:
    kw.setdefault("run", run_row())
    kw.setdefault("checkpoint", Checkpoint())
    return Step(**kw)  # type: ignore[arg-type]


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def test_memory_store_satisfies_the_ports(store: MemoryStore) -> None:
    assert isinstance(store, Store)
    assert isinstance(store, Journal)
    assert isinstance(store, Feed)


# -- journal ---------------------------------------------------------------------------------


async def test_load_of_an_unknown_run_is_none(store: MemoryStore) -> None:
    assert await store.load("nope") is None
    assert store.run_ids() == []


async def test_save_step_then_load_returns_what_was_saved(store: MemoryStore) -> None:
    saved = step(
        run=run_row(usage=Usage(requests=1, input_tokens=5), plan={"todo": ["a"]}),
        checkpoint=Checkpoint(turn=1, iteration=2, batch=["c1", "c2"], extra={"ext": [1]}),
        context=ContextChange(append=[Message.user("hi", id="m1"), Message.user("there")]),
        blocks=[block("b2", 2, text="two"), block("b1", 1, text="one")],
        calls=[call("c1", payload={"k": [1, 2]}), call("c2", status="succeeded", result="ok")],
    )
    await store.save_step(RUN, saved)
    snap = await store.load(RUN)
    assert snap is not None
    assert snap.run == saved.run
    assert snap.checkpoint == saved.checkpoint
    assert snap.context == saved.context.append
    assert snap.blocks == [saved.blocks[1], saved.blocks[0]]  # by position
    assert snap.calls == saved.calls
    assert store.run_ids() == [RUN]


async def test_loaded_values_are_copies(store: MemoryStore) -> None:
    saved = step(
        checkpoint=Checkpoint(batch=["c1"]),
        context=ContextChange(append=[Message.user("hi")]),
        blocks=[block("b1", 0)],
        calls=[call(notes={"a": "b"})],
    )
    await store.save_step(RUN, saved)
    first = await store.load(RUN)
    assert first is not None
    assert first.run is not saved.run
    assert first.calls[0] is not saved.calls[0]
    # Mutating what was saved, or what was loaded, does not change the store.
    saved.checkpoint.batch.append("zzz")
    saved.calls[0].notes["x"] = "y"
    first.checkpoint.batch.clear()
    first.calls[0].status = "failed"
    first.context.clear()
    first.blocks[0].text = "changed"
    first.run.steps = 99
    again = await store.load(RUN)
    assert again is not None
    assert again.checkpoint.batch == ["c1"]
    assert again.calls == [call(notes={"a": "b"})]
    assert again.context == [Message.user("hi")]
    assert again.blocks == [block("b1", 0)]
    assert again.run.steps == 0


async def test_context_is_append_only_until_a_new_base(store: MemoryStore) -> None:
    a, b, c, d = (Message.user(t) for t in "abcd")
    await store.save_step(RUN, step(context=ContextChange(append=[a])))
    await store.save_step(RUN, step(context=ContextChange(append=[b, c])))
    await store.save_step(RUN, step())
    snap = await store.load(RUN)
    assert snap is not None and snap.context == [a, b, c]
    summary = Message(role="system", parts=[])
    await store.save_step(RUN, step(context=ContextChange(base=[summary], append=[d])))
    snap = await store.load(RUN)
    assert snap is not None and snap.context == [summary, d]
    await store.save_step(RUN, step(context=ContextChange(base=[])))
    snap = await store.load(RUN)
    assert snap is not None and snap.context == []


async def test_later_steps_replace_run_checkpoint_and_blocks(store: MemoryStore) -> None:
    await store.save_step(RUN, step(blocks=[block("b1", 0, text="draft"), block("b2", 1)]))
    await store.save_step(
        RUN,
        step(
            run=run_row(status="completed", text="done", steps=2),
            checkpoint=Checkpoint(phase="done", turn=1),
            blocks=[block("b1", 0, text="final")],
        ),
    )
    snap = await store.load(RUN)
    assert snap is not None
    assert snap.run == run_row(status="completed", text="done", steps=2)
    assert snap.checkpoint == Checkpoint(phase="done", turn=1)
    assert snap.blocks == [block("b1", 0, text="final"), block("b2", 1)]


async def test_removed_blocks_and_calls(store: MemoryStore) -> None:
    await store.save_step(
        RUN,
        step(blocks=[block("b1", 0), block("b2", 1)], calls=[call("c1"), call("c2")]),
    )
    await store.save_step(RUN, step(removed_blocks=["b1", "unknown"], removed_calls=["c2"]))
    snap = await store.load(RUN)
    assert snap is not None
    assert [b.id for b in snap.blocks] == ["b2"]
    assert [c.id for c in snap.calls] == ["c1"]


async def test_a_removed_call_saved_in_the_same_step_starts_afresh(store: MemoryStore) -> None:
    await store.save_step(RUN, step(calls=[call("c1", rev=5, status="succeeded")]))
    # Removals apply before calls: the new snapshot is not merged with the removed record.
    await store.save_step(RUN, step(removed_calls=["c1"], calls=[call("c1", rev=1)]))
    snap = await store.load(RUN)
    assert snap is not None and snap.calls == [call("c1", rev=1)]


async def test_an_older_snapshot_in_a_step_does_not_beat_save_call(store: MemoryStore) -> None:
    await store.save_step(RUN, step(calls=[call(rev=1, status="running")]))
    await store.save_call(RUN, call(rev=3, status="succeeded", result="done"))
    await store.save_step(RUN, step(calls=[call(rev=2, status="running")]))
    snap = await store.load(RUN)
    assert snap is not None
    assert snap.calls == [call(rev=3, status="succeeded", result="done")]


async def test_a_newer_step_snapshot_cannot_unsettle_a_call(store: MemoryStore) -> None:
    await store.save_step(RUN, step(calls=[call(rev=1, status="running")]))
    await store.save_call(RUN, call(rev=2, status="failed", error="boom"))
    await store.save_step(RUN, step(calls=[call(rev=3, status="running", notes={"n": "1"})]))
    snap = await store.load(RUN)
    assert snap is not None
    (merged,) = snap.calls
    assert (merged.rev, merged.status, merged.error, merged.notes) == (
        3,
        "failed",
        "boom",
        {"n": "1"},
    )


async def test_concurrent_save_calls(store: MemoryStore) -> None:
    await store.save_step(RUN, step())
    writes = [call(f"c{i % 5}", rev=rev) for i, rev in enumerate([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])]
    await asyncio.gather(*(store.save_call(RUN, w) for w in writes))
    snap = await store.load(RUN)
    assert snap is not None
    revs = {c.id: c.rev for c in snap.calls}
    expected: dict[str, int] = {}
    for w in writes:
        expected[w.id] = max(expected.get(w.id, 0), w.rev)
    assert revs == expected


async def test_save_call_for_an_unknown_run_is_a_store_error(store: MemoryStore) -> None:
    with pytest.raises(StoreError):
        await store.save_call("nope", call())
    assert await store.load("nope") is None


async def test_step_of_another_run_is_a_store_error(store: MemoryStore) -> None:
    with pytest.raises(StoreError):
        await store.save_step("other", step())
    assert await store.load("other") is None
    assert await store.load(RUN) is None


async def test_update_call_overlays_a_host_write(store: MemoryStore) -> None:
    request = InputRequest(wait_id="w1", prompt="?")
    await store.save_step(
        RUN,
        step(calls=[call(rev=4, status="awaiting_input", input_request=request, media=[])]),
    )
    ref = MediaRef(key="k", mime="image/png", size=2)
    decision = CallDecision(approve=True, decided_by="ops")
    await store.update_call(RUN, "c1", CallUpdate(input_response=1, wait_id="w1"))
    await store.update_call(RUN, "c1", CallUpdate(status="awaiting_decision"))
    await store.update_call(RUN, "c1", CallUpdate(decision=decision, status="running"))
    out = await store.update_call(
        RUN, "c1", CallUpdate(status="succeeded", result="r", media=[ref])
    )
    assert (out.rev, out.status, out.result, out.media, out.decision) == (
        4,
        "succeeded",
        "r",
        [ref],
        decision,
    )
    assert out.input_request == replace(request, response=1)
    snap = await store.load(RUN)
    assert snap is not None and snap.calls == [out]
    # A later runtime snapshot merges over the host's write.
    await store.save_call(RUN, call(rev=5, status="running", decision=None))
    snap = await store.load(RUN)
    assert snap is not None
    assert (snap.calls[0].status, snap.calls[0].decision) == ("succeeded", decision)


async def test_update_call_of_an_unknown_call_or_run_is_a_key_error(store: MemoryStore) -> None:
    with pytest.raises(KeyError):
        await store.update_call("nope", "c1", CallUpdate(status="succeeded"))
    await store.save_step(RUN, step(calls=[call()]))
    with pytest.raises(KeyError):
        await store.update_call(RUN, "c9", CallUpdate(status="succeeded"))


async def test_checkpoint_of_an_unknown_format_is_refused_on_load(store: MemoryStore) -> None:
    await store.save_step(RUN, step(checkpoint=Checkpoint(format=99)))
    with pytest.raises(FormatVersionError):
        await store.load(RUN)


async def test_tampered_document_format_is_refused_on_load(store: MemoryStore) -> None:
    await store.save_step(RUN, step())
    stored = store._runs[RUN]
    doc = json.loads(stored.checkpoint)
    doc["format"] = 2
    stored.checkpoint = json.dumps(doc).encode()
    with pytest.raises(FormatVersionError):
        await store.load(RUN)
    stored.checkpoint = b"not json"
    with pytest.raises(StoreError):
        await store.load(RUN)


async def test_step_bytes_are_recorded(store: MemoryStore) -> None:
    await store.save_step(RUN, step(context=ContextChange(append=[Message.user("x" * 100)])))
    await store.save_step(RUN, step())
    assert len(store.step_bytes) == 2
    assert store.step_bytes[0] > store.step_bytes[1] > 0
    assert store.bytes_written >= sum(store.step_bytes)


async def test_step_bytes_do_not_grow_with_history(store: MemoryStore) -> None:
    for i in range(60):
        await store.save_step(
            RUN,
            step(
                checkpoint=Checkpoint(turn=1, context_length=i + 1, next_position=i + 1),
                context=ContextChange(append=[Message.user(f"message {i:03}")]),
                blocks=[block(f"b{i:03}", i, text=f"text {i:03}")],
                calls=[call(f"c{i:03}", rev=1)],
            ),
        )
    assert store.step_bytes[-1] <= store.step_bytes[9] + 8


async def test_a_failed_save_leaves_the_saved_state_intact(store: MemoryStore) -> None:
    await store.save_step(
        RUN,
        step(
            context=ContextChange(append=[Message.user("a")]),
            blocks=[block("b1", 0), block("b2", 1)],
            calls=[call("c1", rev=1), call("c2", rev=1)],
        ),
    )
    before = await store.load(RUN)
    sizes = list(store.step_bytes)
    bad = step(
        run=run_row(steps=2),
        checkpoint=Checkpoint(turn=5),
        context=ContextChange(base=[Message.user("new base")], append=[Message.user("b")]),
        blocks=[block("b3", 2)],
        calls=[call("c1", rev=2, status="succeeded"), call("c3", rev=1, payload=object())],
        removed_blocks=["b1"],
        removed_calls=["c2"],
    )
    with pytest.raises(StoreError, match="cannot store"):
        await store.save_step(RUN, bad)
    assert await store.load(RUN) == before
    assert store.step_bytes == sizes


async def test_a_failed_first_save_creates_no_run(store: MemoryStore) -> None:
    with pytest.raises(StoreError, match="cannot store"):
        await store.save_step(RUN, step(calls=[call(payload=object())]))
    assert await store.load(RUN) is None
    assert store.run_ids() == []


async def test_failed_save_call_and_update_call_leave_the_call_intact(store: MemoryStore) -> None:
    await store.save_step(RUN, step(calls=[call(rev=1, status="waiting")]))
    before = await store.load(RUN)
    with pytest.raises(StoreError, match="cannot store"):
        await store.save_call(RUN, call(rev=2, status="waiting", payload=object()))
    with pytest.raises(StoreError, match="cannot store"):
        await store.update_call(RUN, "c1", CallUpdate(payload=object()))
    assert await store.load(RUN) == before
