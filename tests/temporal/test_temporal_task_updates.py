"""The rule by which a Temporal workflow keeps a task's progress updates (no server needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from steadyrun.background import Update  # noqa: E402
from steadyrun.temporal._wtasks import keep_updates  # noqa: E402

updates = st.lists(
    st.builds(Update, event_id=st.sampled_from("abcdefgh"), data=st.text(max_size=3)),
    max_size=12,
)
batches = st.lists(updates, max_size=4)


def fold(batches: list[list[Update]], limit: int) -> tuple[list[Update], frozenset[str]]:
    kept: list[Update] = []
    seen: frozenset[str] = frozenset()
    for batch in batches:
        kept, seen = keep_updates(kept, seen, batch, limit)
    return kept, seen


@given(batches, st.integers(min_value=0, max_value=10))
def test_each_event_is_kept_once_in_first_arrival_order_and_only_the_last_ones(
    arrived: list[list[Update]], limit: int
) -> None:
    kept, seen = fold(arrived, limit)
    firsts: list[Update] = []
    for update in (u for batch in arrived for u in batch):
        if update.event_id not in {f.event_id for f in firsts}:
            firsts.append(update)
    assert kept == (firsts[-limit:] if limit else [])
    assert seen == {u.event_id for batch in arrived for u in batch}


@given(batches, st.integers(min_value=1, max_value=10))
def test_a_replayed_batch_adds_nothing(arrived: list[list[Update]], limit: int) -> None:
    kept, seen = fold(arrived, limit)
    for batch in arrived:  # a recovered operation sends its updates again from the start
        assert keep_updates(kept, seen, batch, limit) == (kept, seen)
