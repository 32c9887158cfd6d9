"""apply is pure, follows sequence numbers, and diff/apply round-trip on random snapshots."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrun.chat import Usage
from steadyrun.stream import (
    BlockAdded,
    Delta,
    DisplayBlock,
    DisplayCall,
    DisplayPending,
    DisplaySnapshot,
    SequenceGapError,
    TextFragment,
    apply,
    delta_from_json,
    diff,
    snapshot_from_json,
    to_json,
)

ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])
texts = st.text(alphabet="xyz ", max_size=6)

blocks = st.builds(
    DisplayBlock,
    id=ids,
    kind=st.sampled_from(["thinking", "content", "tool_call"]),
    position=st.integers(0, 5),
    text=texts,
    call_id=st.none() | ids,
    turn=st.integers(0, 2),
)
calls = st.builds(
    DisplayCall,
    id=ids,
    name=st.sampled_from(["refund", "lookup"]),
    arguments=st.sampled_from(["{}", '{"x": 1}']),
    status=st.sampled_from(["queued", "running", "succeeded", "awaiting_decision"]),
    result=st.none() | texts,
)
pendings = st.builds(
    DisplayPending,
    kind=st.sampled_from(["decision", "input"]),
    blocking=st.booleans(),
    call_id=ids,
    name=st.just("refund"),
    prompt=st.none() | texts,
)
plans = st.none() | st.lists(st.fixed_dictionaries({"id": ids, "status": texts}), max_size=3)


def unique(key: str) -> st.SearchStrategy[tuple[object, ...]]:
    items = {"blocks": blocks, "calls": calls}[key]
    return st.lists(items, max_size=5, unique_by=lambda x: x.id).map(tuple)  # type: ignore[attr-defined]


snapshots = st.builds(
    DisplaySnapshot,
    run_id=st.just("r"),
    agent=st.just("support"),
    status=st.sampled_from(["running", "suspended", "completed", "failed"]),
    text=st.none() | texts,
    error=st.none() | texts,
    usage=st.builds(Usage, input_tokens=st.integers(0, 9), output_tokens=st.integers(0, 9)),
    plan=plans,
    blocks=unique("blocks"),
    calls=unique("calls"),
    pending=st.lists(pendings, max_size=3).map(tuple),
    seq=st.integers(0, 50),
).map(lambda s: s.normalized())


def fold(snapshot: DisplaySnapshot, deltas: list[Delta]) -> DisplaySnapshot:
    for delta in deltas:
        snapshot = apply(snapshot, delta)
    return snapshot


@settings(max_examples=300, deadline=None)
@given(snapshots, snapshots)
def test_the_deltas_between_two_snapshots_lead_from_one_to_the_other(
    old: DisplaySnapshot, new: DisplaySnapshot
) -> None:
    deltas = diff(old, new)
    end = fold(old, deltas)
    assert replace(end, seq=0) == replace(new, seq=0)
    assert end.seq == old.seq + len(deltas)
    assert [d.seq for d in deltas] == list(range(old.seq + 1, old.seq + 1 + len(deltas)))


@st.composite
def edited(draw: st.DrawFn) -> tuple[DisplaySnapshot, DisplaySnapshot]:
    """A snapshot and a later one made by editing it, as a run changes its timeline.

    Most blocks and calls persist, so a block added or moved must land between them: two
    snapshots drawn independently rarely share enough for that to be tested.
    """
    old = draw(snapshots)
    kept = []
    for block in old.blocks:
        how = draw(st.sampled_from(["same", "same", "grow", "retext", "move", "drop"]))
        if how == "grow":
            block = replace(block, text=block.text + draw(texts))
        elif how == "retext":
            block = replace(block, text=draw(texts))
        elif how == "move":
            block = replace(block, position=draw(st.integers(0, 5)))
        if how != "drop":
            kept.append(block)
    fresh = st.builds(
        DisplayBlock,
        id=st.sampled_from(["g", "h", "i", "j"]),
        kind=st.sampled_from(["thinking", "content", "tool_call"]),
        position=st.integers(0, 5),
        text=texts,
        turn=st.integers(0, 2),
    )
    added = draw(st.lists(fresh, max_size=3, unique_by=lambda b: b.id))
    calls_kept = [
        replace(c, status=draw(st.sampled_from(["running", "succeeded", "needs_review"])))
        for c in old.calls
        if draw(st.booleans())
    ]
    new_calls = draw(st.lists(calls, max_size=2, unique_by=lambda c: c.id))
    known = {c.id for c in calls_kept}
    new = replace(
        old,
        status=draw(st.sampled_from(["running", "suspended", "completed"])),
        blocks=(*kept, *added),
        calls=(*calls_kept, *(c for c in new_calls if c.id not in known)),
    ).normalized()
    return old, new


@settings(max_examples=300, deadline=None)
@given(edited())
def test_the_deltas_of_an_edited_snapshot_lead_to_it_blocks_in_place(
    pair: tuple[DisplaySnapshot, DisplaySnapshot],
) -> None:
    old, new = pair
    end = fold(old, diff(old, new))
    assert end.blocks == new.blocks  # every block where (position, id) puts it
    assert replace(end, seq=0) == replace(new, seq=0)


@settings(max_examples=200, deadline=None)
@given(snapshots, snapshots)
def test_apply_changes_neither_argument(old: DisplaySnapshot, new: DisplaySnapshot) -> None:
    deltas = diff(old, new)
    before = copy.deepcopy(old)
    kept = copy.deepcopy(deltas)
    fold(old, deltas)
    assert old == before
    assert deltas == kept


@settings(max_examples=100, deadline=None)
@given(snapshots, snapshots)
def test_snapshots_and_deltas_survive_the_wire(old: DisplaySnapshot, new: DisplaySnapshot) -> None:
    assert snapshot_from_json(to_json(old)) == old
    for delta in diff(old, new):
        raw = to_json(delta)
        assert raw.startswith(b'{"format":1,')
        assert delta_from_json(raw) == delta


def test_no_change_no_delta() -> None:
    snap = DisplaySnapshot(run_id="r", blocks=(DisplayBlock(id="a", kind="content", position=0),))
    assert diff(snap, snap) == []


def test_growing_text_is_sent_as_a_fragment() -> None:
    block = DisplayBlock(id="a", kind="content", position=0, text="Hel")
    old = DisplaySnapshot(run_id="r", blocks=(block,))
    new = replace(old, blocks=(replace(block, text="Hello"),))
    assert diff(old, new) == [TextFragment(seq=1, block_id="a", text="lo")]


def test_a_delta_out_of_sequence_is_refused() -> None:
    snap = DisplaySnapshot(run_id="r", seq=3)
    block = DisplayBlock(id="a", kind="content", position=0)
    with pytest.raises(SequenceGapError):
        apply(snap, BlockAdded(seq=5, block=block))
    assert apply(snap, BlockAdded(seq=4, block=block)).blocks == (block,)


@given(snapshots)
def test_normalized_keeps_a_snapshot_in_order_and_sorts_one_that_is_not(
    snap: DisplaySnapshot,
) -> None:
    ordered = snap.normalized()
    assert ordered.normalized() is ordered  # in order already: the snapshot itself, no copy
    shuffled = replace(ordered, blocks=tuple(reversed(ordered.blocks)))
    assert shuffled.normalized() == ordered
    assert [b.order for b in shuffled.normalized().blocks] == sorted(b.order for b in snap.blocks)
