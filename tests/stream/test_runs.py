"""The stream of real runs: its deltas lead from the first snapshot to the last, which is the
stored run; late joiners and resumed followers see the same."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runkit import build_agent, drive, scripts

import steadyrun as sr
from steadyrun.stores import MemoryStore
from steadyrun.stream import (
    DisplaySnapshot,
    Publisher,
    apply,
    pending_items,
    snapshot_from_store,
)
from steadyrun.testing import text, tool_calls


def fold(first: DisplaySnapshot, deltas: list) -> DisplaySnapshot:  # type: ignore[type-arg]
    snap = first
    for delta in deltas:
        snap = apply(snap, delta)
    return snap


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scripts, st.lists(st.booleans(), min_size=1, max_size=3))
def test_a_runs_deltas_lead_from_its_first_snapshot_to_its_last(script, approvals) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        store = MemoryStore()
        recorded = await drive(store, script, approvals)
        assert fold(recorded.first, recorded.deltas) == recorded.last
        stored = await snapshot_from_store(store, "r")
        assert replace(recorded.last, seq=0) == stored
        # Contiguous: a joined fragment (a follower that lagged) covers first_seq..seq.
        seq = recorded.first.seq
        for d in recorded.deltas:
            first = getattr(d, "first_seq", None)
            assert (first if first is not None else d.seq) == seq + 1
            seq = d.seq
        assert seq == recorded.last.seq

    asyncio.run(main())


async def test_the_display_shows_blocks_calls_pending_and_the_end() -> None:
    store = MemoryStore()
    script = [
        tool_calls(
            ("lookup", {"order_id": "A-1"}), ("refund", {"order_id": "A-1", "amount_cents": 5})
        ),
        text("Refunded.", thinking="ok"),
    ]
    recorded = await drive(store, script, [True])
    last = recorded.last
    assert last.status == "completed" and last.text == "Refunded."
    kinds = [b.kind for b in last.blocks]
    assert kinds == ["input", "tool_call", "tool_call", "thinking", "content"]
    assert [(c.name, c.status) for c in last.calls] == [
        ("lookup", "succeeded"),
        ("refund", "succeeded"),
    ]
    assert last.calls[1].decision is not None and last.calls[1].decision.approve
    assert last.pending == ()
    kinds = [d.kind for d in recorded.deltas]
    assert "pending" in kinds and "call_status" in kinds and "run_status" in kinds
    statuses = [d.status for d in recorded.deltas if d.kind == "run_status"]  # type: ignore[union-attr]
    assert "suspended" in statuses and statuses[-1] == "completed"


async def test_pending_items_agree_with_the_runtime() -> None:
    store = MemoryStore()
    script = [
        tool_calls(
            ("refund", {"order_id": "A-1", "amount_cents": 5}), ("ask", {"question": "Card?"})
        ),
        text("ok"),
    ]
    runtime = sr.Runtime(store)
    result = await runtime.run(build_agent(script), run_id="r", input="hi")
    assert result.status == "suspended"
    theirs = await runtime.pending("r")
    snap = await store.load("r")
    assert snap is not None
    ours = pending_items(snap.calls)
    assert [(p.kind, p.call_id, p.prompt, p.wait_id, p.blocking) for p in ours] == [
        (p.kind, p.call_id, p.prompt, p.wait_id, p.blocking) for p in theirs
    ]
    assert [p.kind for p in ours] == ["decision", "input"]


async def test_a_late_follower_resumes_or_starts_over() -> None:
    store = MemoryStore()
    recorded = await drive(store, [text("Hello!")], [True])
    publisher = Publisher(store, buffer_size=2)
    await publisher.run_started("r", "support")
    await publisher.run_ended("r")
    # New publisher: a fresh snapshot under its own epoch; old ids do not replay.
    stream = publisher.follow("r", last_event_id="deadbeef.3", poll_interval=0.01)
    first = await anext(stream)
    assert first.kind == "snapshot" and first.snapshot == publisher.current("r")
    epoch = first.id.partition(".")[0]
    await stream.aclose()
    assert recorded.last.status == "completed"
    # A known id still in the buffer: only what came after it.
    seq = first.snapshot.seq
    stream = publisher.follow("r", last_event_id=f"{epoch}.{seq - 1}", poll_interval=0.01)
    again = await anext(stream)
    assert again.kind == "delta" and again.delta is not None and again.delta.seq == seq
    await stream.aclose()


async def test_idle_runs_are_evicted_beyond_the_bound() -> None:
    store = MemoryStore()
    publisher = Publisher(store, max_idle=2)
    runtime = sr.Runtime(store, observers=[publisher])
    agent = build_agent([text("hi")] * 5)
    for i in range(5):
        await publisher.run_started(f"r{i}", "support")
        await runtime.run(agent, run_id=f"r{i}", input="hi")
        await publisher.run_ended(f"r{i}")
    await publisher.wait_idle()
    kept = [f"r{i}" for i in range(5) if publisher.current(f"r{i}") is not None]
    assert kept == ["r3", "r4"]
    assert (await publisher.snapshot("r0")).status == "completed"  # rebuilt from the store
