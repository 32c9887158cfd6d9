"""One order for an update and its workflow task's events, live and on replay (issue 24).

SDK core sometimes hands a live worker an update in the same activation as events that a
replay of the history hands over earlier, in an activation of their own. A worker that takes
over a run cold (after its worker was lost) and gets an update folds the task before, if that
task sent no command, into the update's: one activation, the update first (the Python SDK
runs updates and signals before the other jobs). Replay, seeing the update's sequencing
event, ends a task there instead: those events come first, alone, and the update after them.
A suspended run's last task is usually such an empty one (its record activity's completion),
so an approval sent while the run's worker is down and taken by another worker did this; when
the workflow's commands depended on the order (the record activity and the approved tool were
scheduled the other way round) the history no longer replayed and the run was stuck
(``order-00081`` in ``benchmarks/scale.py``).

Two parts:

* **Updates last** (histories with the ``UPDATES_LAST`` marker, which ``AgentWorkflow``
  records when a run starts): a worker hands every activation's updates to the workflow
  after its other jobs, as two activations, live and on replay alike. The folded live
  activation then runs as replay runs it (the events, then the update), and so does one whose
  update and events share a task on both sides (a legacy query had run the workflow over those
  events first: ``steadyrun.temporal._ahead``). Histories without the marker (written before
  it) keep the SDK's order: they replay as they ran.
* **Folds** (histories written before the marker): after a replay of a run fails at an
  activation of updates alone that followed a replayed activation without commands, the next
  try holds that activation back and hands its jobs over with the updates, as the live worker
  folded them. ``Folds`` is that search for one run; a fold that fails too is given up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["UPDATES_LAST", "Folds", "after_failure", "foldable"]

UPDATES_LAST = "steadyrun.updates-after-events"
"""The patch marker of runs whose updates are handed over after their activation's events."""

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
