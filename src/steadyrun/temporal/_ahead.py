"""Updates refused while a query has run a workflow ahead of its history.

Temporal answers a query that comes while a workflow task waits for a worker (the worker that
ran the workflow last was lost) as a *legacy query*: any worker gets the whole history,
including events that no workflow task has handled yet. The SDK runs the workflow over those
events in an activation of their own, answers the query, and keeps the commands the workflow
emitted until the next workflow task completes. An update delivered in that next task is
therefore handled *after* those events (its validator sees them) and accepted *after* their
commands. Replay knows nothing of the query: it hands the workflow the update first, before
every event of its task. The history does not replay ("[TMPRL1100] Nondeterminism error:
Update machine does not handle this event") and the run never completes. benchmarks/scale.py
found it: its client finds the call to approve by a query, so under worker kills the query
often was such a legacy query, and the approval followed it.

A worker therefore refuses updates while a workflow is ahead of its history: from a legacy
query that followed an activation of events at the same history length (events applied
outside any workflow task) through the next activation (the workflow task that sends the held
commands). A refused update leaves nothing in the history; ``TemporalRuns`` asks
again. Validators run only when an update is first delivered, never on replay, so the refusal
changes no command and histories written before it replay as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from temporalio.bridge.proto.workflow_activation import RemoveFromCache, WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import WorkflowInstance

from steadyrun.temporal import _folds
from steadyrun.temporal._folds import ONE_JOB_EACH, Folds, foldable, one_by_one
from steadyrun.temporal._handover_order import (
    Search,
    after_failure,
    other_jobs,
    split_for,
    split_jobs,
)
from steadyrun.temporal._passing import PassingInstance, PassingRunner

__all__ = [
    "AHEAD_NOTE",
    "LEGACY_QUERY_ID",
    "Ahead",
    "AheadAwareRunner",
    "Kind",
    "activation_kind",
    "forget",
    "on_activation",
    "refusing_updates",
]

LEGACY_QUERY_ID = "legacy_query"
"""The query id the SDK's core gives a legacy query's job."""

Kind = Literal["jobs", "updates", "legacy_query", "query", "evict"]

AHEAD_NOTE = "a legacy query ran the workflow ahead of its history"
"""Begins the log line a worker writes when it starts refusing updates for a run."""

_log = logging.getLogger("steadyrun.temporal")
_REFUSING: set[str] = set()  # run ids whose current activation refuses updates
_SEARCHES: dict[str, Search] = {}  # runs that failed to replay here: see _handover_order
_FOLDS: dict[str, Folds] = {}  # runs that failed to replay here: see _folds


def forget(run_id: str) -> None:
    """Drop what this process learnt from failed replays of ``run_id`` (tests replay afresh)."""
    _SEARCHES.pop(run_id, None)
    _FOLDS.pop(run_id, None)


@dataclass(frozen=True)
class Ahead:
    """What a worker knows of one workflow run's activations.

    Attributes:
        applied_at: History length of the last activation that applied events (or ``None``).
        held_at: History length up to which a legacy query ran the workflow ahead of its
            history (``None``: not ahead).
    """

    applied_at: int | None = None
    held_at: int | None = None


def on_activation(state: Ahead, kind: Kind, length: int) -> tuple[bool, Ahead]:
    """Whether updates are refused during this activation, and the state after it.

    Args:
        state: The state before the activation.
        kind: ``jobs`` (events or signals, maybe updates too), ``updates`` (updates only),
            ``legacy_query``, ``query`` (a query delivered with a workflow task) or
            ``evict`` (the worker drops the run).
        length: The activation's history length (the last event the SDK applied).
    """
    if kind == "evict":
        return False, Ahead()
    if kind == "legacy_query":
        if state.applied_at == length:
            return False, Ahead(applied_at=length, held_at=length)
        return False, state
    if kind == "query":
        return False, state
    # The task after the legacy query carries the held commands: its first activation is
    # the one to refuse in. An activation of updates alone applies no events: a refused
    # update's task can be dropped by the server, and a legacy query after it, at that
    # task's length, must not find the workflow ahead (it would refuse every update again).
    refuse = state.held_at is not None
    applied = length if kind == "jobs" else state.applied_at
    return refuse, Ahead(applied_at=applied, held_at=None)


def activation_kind(act: WorkflowActivation) -> Kind:
    """The kind of ``act`` for ``on_activation``."""
    jobs = act.jobs
    if any(job.HasField("remove_from_cache") for job in jobs):
        return "evict"
    queries = [job.query_workflow for job in jobs if job.HasField("query_workflow")]
    if queries and len(queries) == len(jobs):
        if any(q.query_id == LEGACY_QUERY_ID for q in queries):
            return "legacy_query"
        return "query"
    if jobs and all(job.HasField("do_update") for job in jobs):
        return "updates"
    return "jobs"


def refusing_updates(run_id: str) -> bool:
    """Whether the activation now running for ``run_id`` must refuse updates (validators)."""
    return run_id in _REFUSING


class _Instance(PassingInstance):
    """A workflow instance that tracks ``Ahead`` around the SDK's instance.

    It also hands jobs over one per activation, updates last, in runs that carry the
    ``ONE_JOB_EACH`` marker, and replays histories written before the refusal
    (``_handover_order``) or before the marker (``_folds``).
    """

    def __init__(self, inner: WorkflowInstance) -> None:
        super().__init__(inner)
        self._state = Ahead()
        self._others: dict[int, int] = {}  # candidate -> its other jobs, in this replay
        self._last_candidate: int | None = None  # the last activation's, if it was one
        self._marked = False  # the run's history carries ONE_JOB_EACH
        self._held: WorkflowActivation | None = None  # a replayed activation folded forward
        self._quiet_at: int | None = None  # last activation: replayed, foldable, no command
        self._fold_candidate: int | None = None  # last: updates alone, after quiet at this
        self._merged_at: int | None = None  # last activation carried the held one from this

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        kind = activation_kind(act)
        if kind == "evict":
            self._after_eviction(act)
        refuse, after = on_activation(self._state, kind, act.history_length)
        if after.held_at is not None and self._state.held_at is None:
            _log.warning(
                "%s (run %s, events to %d): its updates are refused until its next workflow task",
                AHEAD_NOTE,
                act.run_id,
                after.held_at,
            )
        if refuse:
            _REFUSING.add(act.run_id)
        try:
            if kind in ("query", "legacy_query", "evict"):
                return self._inner.activate(act)
            return self._folded(act, kind)
        finally:
            _REFUSING.discard(act.run_id)
            self._state = after

    def _folded(self, act: WorkflowActivation, kind: Kind) -> WorkflowActivationCompletion:
        """``act`` handed over, held back or with a held one (``_folds``)."""
        kinds: list[str] = [job.WhichOneof("variant") or "" for job in act.jobs]
        if any(job.notify_has_patch.patch_id == ONE_JOB_EACH for job in act.jobs):
            self._marked = True
        quiet_before, self._quiet_at = self._quiet_at, None
        self._fold_candidate = self._merged_at = None
        replayed_quiet = act.is_replaying and kind == "jobs" and foldable(kinds)
        folds = _FOLDS.get(act.run_id)
        if replayed_quiet and folds is not None and act.history_length in folds.at:
            self._held = act
            self._last_candidate = None
            held = WorkflowActivationCompletion()
            held.successful.SetInParent()  # as the live worker did: no command there
            return held
        if self._held is not None:
            merged = WorkflowActivation()
            merged.CopyFrom(act)
            del merged.jobs[:]
            merged.jobs.extend(self._held.jobs)
            merged.jobs.extend(act.jobs)
            self._merged_at = self._held.history_length
            self._held = None
            self._last_candidate = None
            return self._inner.activate(merged)
        if kind == "updates" and act.is_replaying:
            self._fold_candidate = quiet_before
        completion = self._handed_over(act, kind, kinds)
        if not completion.HasField("successful"):
            return completion
        commands = completion.successful.commands
        if replayed_quiet and not commands:
            self._quiet_at = act.history_length
        if any(c.set_patch_marker.patch_id == ONE_JOB_EACH for c in commands):
            self._marked = True
        return completion

    def _handed_over(
        self, act: WorkflowActivation, kind: Kind, kinds: list[str]
    ) -> WorkflowActivationCompletion:
        others = other_jobs(kinds) if kind == "jobs" else 0
        self._last_candidate = None
        parts: list[list[int]]
        if self._marked and "initialize_workflow" not in kinds:
            # One job each, updates last, live and on replay alike (``_folds``). A start is
            # never split: live, the marker is only known after it.
            parts = one_by_one(kinds)
        elif others and act.is_replaying:
            candidate = len(self._others)
            self._others[candidate] = others
            self._last_candidate = candidate
            search = _SEARCHES.get(act.run_id)
            split = split_for(search, candidate) if search is not None else 0
            parts = list(split_jobs(kinds, split)) if split else []
        else:
            parts = []
        if len(parts) < 2:
            return self._inner.activate(act)
        completion = WorkflowActivationCompletion()
        for part in parts:
            sub = WorkflowActivation()
            sub.CopyFrom(act)
            del sub.jobs[:]
            sub.jobs.extend(act.jobs[i] for i in part)
            done = self._inner.activate(sub)
            if not done.HasField("successful"):
                return done
            if not completion.HasField("successful"):
                completion.CopyFrom(done)
                continue
            completion.successful.commands.extend(done.successful.commands)
            for flag in done.successful.used_internal_flags:
                if flag not in completion.successful.used_internal_flags:
                    completion.successful.used_internal_flags.append(flag)
        return completion

    def _after_eviction(self, act: WorkflowActivation) -> None:
        reason = next(
            j.remove_from_cache.reason for j in act.jobs if j.HasField("remove_from_cache")
        )
        self._held = None
        if reason != RemoveFromCache.EvictionReason.NONDETERMINISM:
            return
        before_folds = _FOLDS.get(act.run_id, Folds())
        folds = _folds.after_failure(before_folds, self._fold_candidate, self._merged_at)
        if folds != before_folds:
            _FOLDS[act.run_id] = folds
            _log.warning(
                "run %s did not replay; next, a replayed task without commands is handed over "
                "with the updates after it (a history a worker recorded after folding them): %s",
                act.run_id,
                folds,
            )
            return
        before = _SEARCHES.get(act.run_id, Search())
        found = after_failure(before, self._last_candidate, self._others)
        if found != before:
            _SEARCHES[act.run_id] = found
            _log.warning(
                "run %s did not replay; next, updates replayed after more of their task's "
                "events (a history recorded while a query had run it ahead): %s",
                act.run_id,
                found,
            )


class AheadAwareRunner(PassingRunner):
    """``inner`` (Temporal's sandbox), its instances tracking whether a query ran them ahead."""

    instance = _Instance
