"""Histories written before updates were refused while ahead: the search for their order.

``steadyrun.temporal._handover_order``; the recorded histories it replays are in
``test_temporal_update_replay.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from steadyrun.temporal._handover_order import (  # noqa: E402
    Search,
    after_failure,
    other_jobs,
    split_for,
    split_jobs,
)

JOBS = ["do_update", "resolve_activity", "signal_workflow", "notify_has_patch", "fire_timer"]


@given(st.lists(st.sampled_from(JOBS), max_size=8), st.integers(min_value=0, max_value=9))
def test_a_split_hands_over_every_job_once_in_order(kinds: list[str], split: int) -> None:
    first, second = split_jobs(kinds, split)
    assert sorted(first + second) == list(range(len(kinds)))
    others = [i for i, k in enumerate(kinds) if k not in ("do_update", "notify_has_patch")]
    assert [i for i in first if i in others] == others[:split]
    assert all(kinds[i] != "do_update" for i in first)
    assert all(kinds[i] != "notify_has_patch" for i in second)  # patches apply to both parts
    assert [i for i in second if kinds[i] == "do_update"] == [
        i for i, k in enumerate(kinds) if k == "do_update"
    ]


def test_candidates_carry_an_update_and_other_jobs() -> None:
    assert other_jobs(["do_update", "resolve_activity", "resolve_activity"]) == 2
    assert other_jobs(["resolve_activity"]) == 0
    assert other_jobs(["do_update"]) == 0
    assert other_jobs(["initialize_workflow", "do_update"]) == 0  # the start comes first


def test_the_recorded_cases() -> None:
    # order-00039: the one candidate (0) with two completions needed both first.
    search = after_failure(Search(), 0, {0: 2})
    assert split_for(search, 0) == 1
    search = after_failure(search, 0, {0: 2})
    assert split_for(search, 0) == 2
    # Had that failed too, nothing is left to try.
    assert after_failure(search, 0, {0: 2}).exhausted


def test_a_failure_elsewhere_is_no_guess_to_make() -> None:
    assert after_failure(Search(), None, {0: 2}) == Search()


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=4))
def test_the_search_finds_the_order_of_every_candidate(truth: list[int]) -> None:
    """A replay passes a candidate iff its split is the one the original had; the first it
    misses fails the replay there. The search finds them all, one more replay per step."""
    others = {i: 3 for i in range(len(truth))}
    search, replays = Search(), 1
    while (
        failed := next((i for i, t in enumerate(truth) if split_for(search, i) != t), None)
    ) is not None:
        seen = {i: n for i, n in others.items() if i <= failed}
        search = after_failure(search, failed, seen)
        assert not search.exhausted
        replays += 1
        assert replays <= 1 + sum(truth), search
    assert replays == 1 + sum(truth)


def test_a_guess_that_fails_later_is_wrong_too() -> None:
    search = after_failure(Search(), 0, {0: 2})
    assert after_failure(search, None, {0: 2}).trying == (0, 2)
