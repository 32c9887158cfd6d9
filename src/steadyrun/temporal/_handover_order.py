"""Replaying histories written before updates were refused while ahead (recovery of stuck runs).

A history recorded when a legacy query had run the workflow ahead of its history (see
``steadyrun.temporal._ahead``) holds an update accepted after some of its workflow task's
events, where replay hands the update to the workflow before all of them. Such a run fails
every workflow task with "[TMPRL1100] Nondeterminism error" and never completes. Nothing in
the history says how many events the query had applied, so after a nondeterminism failure of
a run a worker tries again with the update handed over later: after one more of the task's
events each time (the SDK retries the failed workflow task). The SDK checks every command of
the replay against the history, so a wrong guess fails again; the first that replays is the
order the original worker had.

Only runs that failed so in this process are touched, and only in replayed activations that
carry an update together with other jobs; everything else is handed over as the SDK gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Search", "after_failure", "other_jobs", "split_for", "split_jobs"]


@dataclass(frozen=True)
class Search:
    """Where one run's search stands.

    Attributes:
        fixed: Split found for each candidate (by its order among the replay's activations
            that carry an update with other jobs): how many of its other jobs go first.
        trying: The candidate and split being tried, if any.
        exhausted: Every split of the failing candidate failed: stop guessing.
    """

    fixed: dict[int, int] = field(default_factory=dict)
    trying: tuple[int, int] | None = None
    exhausted: bool = False


def split_for(search: Search, candidate: int) -> int:
    """How many of the candidate's other jobs to hand over before its updates (0: as given)."""
    if candidate in search.fixed:
        return search.fixed[candidate]
    if search.trying is not None and search.trying[0] == candidate:
        return search.trying[1]
    return 0


def after_failure(search: Search, failed_at: int | None, others: dict[int, int]) -> Search:
    """The search after a replay of the run failed.

    Args:
        search: The search before that replay.
        failed_at: The candidate whose activation failed (``None``: another activation).
        others: For each candidate of that replay, how many other jobs it carried.
    """
    if search.exhausted:
        return search
    fixed = dict(search.fixed)
    trying = search.trying
    if failed_at is None:
        if trying is None:
            return search  # not a failure this search can mend
        # A split that replayed its own task but failed later was a wrong guess too.
        failed_at = trying[0]
    elif trying is not None and trying[0] < failed_at:
        # The candidate tried before replayed past: its split was the right one.
        fixed[trying[0]] = trying[1]
    current = split_for(Search(fixed=fixed, trying=trying), failed_at)
    if current >= others.get(failed_at, 0):
        return Search(fixed=fixed, trying=None, exhausted=True)
    fixed.pop(failed_at, None)
    return Search(fixed=fixed, trying=(failed_at, current + 1))


_FIRST = ("initialize_workflow", "notify_has_patch", "update_random_seed")


def split_jobs(kinds: list[str], split: int) -> tuple[list[int], list[int]]:
    """Indexes of an activation's jobs for its two parts, ``split`` other jobs first.

    ``kinds`` are the jobs' variant names. The first part has the jobs every activation
    starts with (start, patches, seed) and the first ``split`` of the other jobs; the second,
    the updates and the rest. With ``split`` 0 the first part is empty of other jobs.
    """
    first = [i for i, k in enumerate(kinds) if k in _FIRST]
    others = [i for i, k in enumerate(kinds) if k not in _FIRST and k != "do_update"]
    updates = [i for i, k in enumerate(kinds) if k == "do_update"]
    return first + others[:split], updates + others[split:]


def other_jobs(kinds: list[str]) -> int:
    """How many jobs of a candidate activation can go before its updates (0: no candidate)."""
    if "do_update" not in kinds or "initialize_workflow" in kinds:
        return 0
    return sum(1 for k in kinds if k not in _FIRST and k != "do_update")
