"""``copied``: ``dataclasses.replace`` for records, at a tenth of the cost (issue 20)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyrun.chat import Usage
from steadyrun.records import CallRecord, Checkpoint, RunRecord
from steadyrun.records._copy import copied

texts = st.text(max_size=5)
records = st.builds(
    CallRecord,
    id=texts,
    name=texts,
    arguments=texts,
    rev=st.integers(0, 9),
    status=st.sampled_from(["queued", "running", "succeeded", "failed"]),
    result=st.none() | texts,
    notes=st.dictionaries(texts, texts, max_size=2),
)
runs = st.builds(
    RunRecord,
    run_id=texts,
    agent=texts,
    text=st.none() | texts,
    usage=st.builds(Usage, requests=st.integers(0, 9)),
    steps=st.integers(0, 99),
)
checkpoints = st.builds(
    Checkpoint, turn=st.integers(0, 9), batch=st.lists(st.text(max_size=3), max_size=2)
)


@given(st.one_of(records, runs, checkpoints, st.builds(Usage, input_tokens=st.integers(0, 9))))
def test_a_copy_is_what_replace_makes(obj: Any) -> None:
    copy = copied(obj)
    assert copy == replace(obj) and copy is not obj and type(copy) is type(obj)
    for name in obj.__slots__:  # shallow, as replace: the same field values
        assert getattr(copy, name) is getattr(obj, name)


@given(records, st.integers(0, 99), st.text(max_size=5))
def test_changes_are_set_on_the_copy_only(record: CallRecord, rev: int, result: str) -> None:
    before = replace(record)
    copy = copied(record, rev=rev, status="succeeded", result=result)
    assert copy == replace(record, rev=rev, status="succeeded", result=result)
    assert record == before


@dataclass(frozen=True)
class Frozen:
    a: int
    b: list[int] = field(default_factory=list)


@dataclass
class Checked:
    a: int
    seen: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seen.append(self.a)


def test_classes_replace_treats_otherwise_are_copied_by_replace() -> None:
    assert copied(Frozen(1), a=2) == Frozen(2)
    checked = copied(Checked(1, []), a=2)
    assert checked.seen == [1, 2]  # __post_init__ ran on the copy (the list is shared)


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenSlots:
    kind: str = "x"
    a: int
    b: tuple[int, ...] = ()


def test_a_frozen_slotted_class_is_copied_without_replace_and_stays_frozen() -> None:
    from steadyrun.records import _copy
    from steadyrun.stream import DisplayBlock, DisplaySnapshot

    obj = FrozenSlots(a=1, b=(2,))
    copy = copied(obj, a=3)
    assert copy == replace(obj, a=3) and obj == FrozenSlots(a=1, b=(2,))
    assert copy.b is obj.b
    # The copier made for the class, not ``replace`` (which builds through __init__).
    assert _copy._copiers[FrozenSlots][0] is not replace
    with pytest.raises(AttributeError):  # still frozen
        copy.a = 4  # type: ignore[misc]
    snap = DisplaySnapshot(run_id="r", blocks=(DisplayBlock(id="b", kind="content", position=1),))
    assert copied(snap, seq=2) == replace(snap, seq=2)


@given(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=3))
def test_a_frozen_copy_is_what_replace_makes(a: int, b: list[int]) -> None:
    obj = FrozenSlots(a=a, b=tuple(b))
    assert copied(obj) == replace(obj) and copied(obj) is not obj
    assert copied(obj, a=a + 1, b=()) == replace(obj, a=a + 1, b=())
