"""The fold search of ``steadyrun.temporal._folds`` (histories a cold worker folded)."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from steadyrun.temporal._folds import Folds, after_failure, foldable  # noqa: E402


def test_only_an_activation_of_events_is_held_back() -> None:
    assert foldable(["resolve_activity"])
    assert foldable(["resolve_activity", "signal_workflow", "fire_timer"])
    assert not foldable([])
    assert not foldable(["resolve_activity", "do_update"])
    assert not foldable(["initialize_workflow"])
    assert not foldable(["notify_has_patch", "resolve_activity"])
    assert not foldable(["query_workflow"])
    assert not foldable(["remove_from_cache"])


def test_a_failure_after_a_quiet_activation_folds_it_next() -> None:
    assert after_failure(Folds(), 49, None) == Folds(at=frozenset({49}))
    # Another failure later in the same history folds one more.
    assert after_failure(Folds(at=frozenset({49})), 80, None) == Folds(at=frozenset({49, 80}))


def test_a_failure_elsewhere_folds_nothing() -> None:
    assert after_failure(Folds(), None, None) == Folds()
    assert after_failure(Folds(at=frozenset({49})), 49, None) == Folds(at=frozenset({49}))


def test_a_fold_that_fails_too_is_given_up() -> None:
    given_up = after_failure(Folds(at=frozenset({49, 80})), None, 80)
    assert given_up == Folds(at=frozenset({49}), exhausted=True)
    assert after_failure(given_up, 90, None) == given_up
