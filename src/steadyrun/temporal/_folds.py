"""One order for a run's events and updates, live and on replay (issue 24).

SDK core does not always group a workflow task's jobs into activations the same way live and
on replay, and the workflow's commands can depend on the grouping: two coroutines (the loop
and the record flusher) woken in one activation run in another order than when woken in two.

Updates: SDK core sometimes hands a live worker an update in the same activation as events
that a replay of the history hands over earlier, in an activation of their own. A worker that takes
over a run cold (after its worker was lost) and gets an update folds the task before, if that
task sent no command, into the update's: one activation, the update first (the Python SDK
runs updates and signals before the other jobs). Replay, seeing the update's sequencing
event, ends a task there instead: those events come first, alone, and the update after them.
A suspended run's last task is usually such an empty one (its record activity's completion),
so an approval sent while the run's worker is down and taken by another worker did this; when
the workflow's commands depended on the order (the record activity and the approved tool were
scheduled the other way round) the history no longer replayed and the run was stuck
(``order-00081`` in ``benchmarks/scale.py``).

Events: a query that comes while a workflow task waits is answered as a legacy query, over
the events no task has handled yet, in an activation of their own; the task then brings the
rest. Replay hands all of them over in one activation. ``order-00017`` (a record activity's
and a model call's completions) scheduled the record and the tool in one order live and in
the other on replay, and was stuck the same way.

Two parts:

* **One job each** (histories with the ``ONE_JOB_EACH`` marker, which ``AgentWorkflow``
  records when a run starts): a worker hands an activation's jobs to the workflow one per
  activation, in the activation's order with its updates last, live and on replay alike.
  However core groups them (a folded task, a legacy query), the workflow sees the same
  sequence. Histories without the marker (written before it) keep the SDK's grouping: they
  replay as they ran.
* **Folds** (histories written before the marker): after a replay of a run fails at an
  activation of updates alone that followed a replayed activation without commands, the next
  try holds that activation back and hands its jobs over with the updates, as the live worker
  folded them. ``Folds`` is that search for one run; a fold that fails too is given up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ONE_JOB_EACH", "Folds", "after_failure", "foldable", "one_by_one"]

ONE_JOB_EACH = "steadyrun.one-job-per-activation"
"""The patch marker of runs whose jobs are handed over one per activation, updates last."""

# Jobs every activation starts with: they go with the first part.
_FIRST = frozenset({"initialize_workflow", "notify_has_patch", "update_random_seed"})

# Jobs that never wait for the next activation: the start, updates, queries, evictions and
# patch notices (which must reach the workflow in their own activation).
_NOT_FOLDABLE = frozenset(
    {"initialize_workflow", "do_update", "query_workflow", "remove_from_cache", "notify_has_patch"}
)


@dataclass(frozen=True)
class Folds:
    """Where one run's fold search stands.

    Attributes:
        at: History lengths of replayed activations held back and handed over with the next.
        exhausted: A fold did not replay either: stop folding.
    """

    at: frozenset[int] = field(default_factory=frozenset)
    exhausted: bool = False


def one_by_one(kinds: list[str]) -> list[list[int]]:
    """Indexes of an activation's jobs, one part per activation, for ``ONE_JOB_EACH`` runs.

    ``kinds`` are the jobs' variant names. The jobs every activation starts with (start,
    patches, seed) go with the first part; every other job gets a part of its own, in the
    activation's order, the updates after all the others.
    """
    first = [i for i, k in enumerate(kinds) if k in _FIRST]
    others = [i for i, k in enumerate(kinds) if k not in _FIRST and k != "do_update"]
    updates = [i for i, k in enumerate(kinds) if k == "do_update"]
    rest = others + updates
    if not rest:
        return [first] if first else []
    return [first + rest[:1], *([i] for i in rest[1:])]


def foldable(kinds: list[str]) -> bool:
    """Whether an activation of these job kinds may be held back for the next one."""
    return bool(kinds) and not any(k in _NOT_FOLDABLE for k in kinds)


def after_failure(folds: Folds, quiet_at: int | None, merged_at: int | None) -> Folds:
    """The search after a replay of the run failed.

    Args:
        folds: The search before that replay.
        quiet_at: When the failing activation carried updates alone and directly followed a
            replayed activation without commands: that one's history length.
        merged_at: When the failing activation carried a held one: its history length.
    """
    if folds.exhausted:
        return folds
    if merged_at is not None:
        return Folds(at=folds.at - {merged_at}, exhausted=True)
    if quiet_at is not None and quiet_at not in folds.at:
        return Folds(at=folds.at | {quiet_at})
    return folds
