"""The fold search of ``steadyrun.temporal._folds`` (histories a cold worker folded)."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.bridge.proto.workflow_activation import (  # noqa: E402
    RemoveFromCache,
    WorkflowActivation,
)
from temporalio.bridge.proto.workflow_completion import (  # noqa: E402
    WorkflowActivationCompletion,
)
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.records import Step  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions, TemporalRuns, _ahead  # noqa: E402
from steadyrun.temporal._ahead import AheadAwareRunner  # noqa: E402
from steadyrun.temporal._folds import (  # noqa: E402
    ONE_JOB_EACH,
    Folds,
    after_failure,
    foldable,
    one_by_one,
)
from steadyrun.temporal._payloads import SendArgs  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
WFT_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


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


# -- the runner -----------------------------------------------------------------------------


class Jobs:
    """A stand-in for the SDK's instance: notes each activation's jobs; a start records the
    marker when ``marks`` (as ``AgentWorkflow`` does)."""

    def __init__(self, marks: bool = False) -> None:
        self.marks = marks
        self.seen: list[list[str]] = []

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        kinds = [job.WhichOneof("variant") or "" for job in act.jobs]
        self.seen.append(kinds)
        done = WorkflowActivationCompletion(run_id=act.run_id)
        done.successful.SetInParent()
        if self.marks and "initialize_workflow" in kinds:
            done.successful.commands.add().set_patch_marker.patch_id = ONE_JOB_EACH
        return done


class Runner:
    def __init__(self, inner: Jobs) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: Any) -> None:
        pass

    def create_instance(self, det: Any) -> Any:
        return self.inner

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        pass


def instance(inner: Jobs) -> Any:
    return AheadAwareRunner(Runner(inner)).create_instance(None)  # type: ignore[arg-type]


def act(length: int, *kinds: str, replaying: bool = False) -> WorkflowActivation:
    out = WorkflowActivation(run_id="r-fold", history_length=length, is_replaying=replaying)
    for kind in kinds:
        job = out.jobs.add()
        if kind == "initialize_workflow":
            job.initialize_workflow.workflow_id = "w"
        elif kind == "notify_has_patch":
            job.notify_has_patch.patch_id = ONE_JOB_EACH
        elif kind == "do_update":
            job.do_update.id = "u1"
            job.do_update.name = "decide"
        elif kind == "resolve_activity":
            job.resolve_activity.seq = 7
        elif kind == "signal_workflow":
            job.signal_workflow.signal_name = "input"
        elif kind == "remove_from_cache":
            job.remove_from_cache.reason = RemoveFromCache.EvictionReason.NONDETERMINISM
    return out


@pytest.mark.parametrize("replaying", [False, True])
def test_a_marked_run_gets_its_updates_after_the_other_jobs(replaying: bool) -> None:
    # Live, the workflow records the marker at its start; on replay core notifies it.
    inner = Jobs(marks=not replaying)
    run = instance(inner)
    start = ["initialize_workflow", *(["notify_has_patch"] if replaying else [])]
    run.activate(act(3, *start, replaying=replaying))
    run.activate(act(54, "do_update", "resolve_activity", replaying=replaying))
    assert inner.seen[1:] == [["resolve_activity"], ["do_update"]]


@pytest.mark.parametrize("replaying", [False, True])
def test_a_marked_run_gets_one_job_per_activation(replaying: bool) -> None:
    """However core groups them (a legacy query's activation, then the task's; or all in
    one on replay), the workflow sees the same sequence."""
    inner = Jobs(marks=not replaying)
    run = instance(inner)
    start = ["initialize_workflow", *(["notify_has_patch"] if replaying else [])]
    run.activate(act(3, *start, replaying=replaying))
    kinds = ["do_update", "resolve_activity", "signal_workflow", "resolve_activity"]
    run.activate(act(57, *kinds, replaying=replaying))
    assert inner.seen[1:] == [
        ["resolve_activity"],
        ["signal_workflow"],
        ["resolve_activity"],
        ["do_update"],
    ]


def test_a_start_is_never_split() -> None:
    inner = Jobs()
    run = instance(inner)
    run.activate(
        act(
            3,
            "initialize_workflow",
            "notify_has_patch",
            "signal_workflow",
            "signal_workflow",
            replaying=True,
        )
    )
    assert inner.seen == [
        ["initialize_workflow", "notify_has_patch", "signal_workflow", "signal_workflow"]
    ]


def test_one_by_one_parts() -> None:
    assert one_by_one([]) == []
    assert one_by_one(["update_random_seed"]) == [[0]]
    assert one_by_one(["do_update"]) == [[0]]
    assert one_by_one(["update_random_seed", "do_update", "resolve_activity"]) == [[0, 2], [1]]
    assert one_by_one(["resolve_activity", "do_update", "resolve_activity"]) == [[0], [2], [1]]


def test_a_run_without_the_marker_keeps_the_sdks_order() -> None:
    inner = Jobs()
    run = instance(inner)
    run.activate(act(3, "initialize_workflow"))
    run.activate(act(54, "do_update", "resolve_activity", "resolve_activity"))
    assert inner.seen[1:] == [["do_update", "resolve_activity", "resolve_activity"]]


def test_a_failed_replay_folds_the_quiet_activation_into_the_updates() -> None:
    """``order-00081``: the first replay fails at the update after the quiet activation (49);
    the next holds 49 back (no command, as the live worker sent none there) and hands its
    jobs over with the update."""
    try:
        inner = Jobs()
        run = instance(inner)
        run.activate(act(3, "initialize_workflow", replaying=True))
        run.activate(act(49, "resolve_activity", replaying=True))
        run.activate(act(54, "do_update", replaying=True))
        run.activate(act(57, "remove_from_cache"))
        assert _ahead._FOLDS["r-fold"] == Folds(at=frozenset({49}))
        inner = Jobs()
        run = instance(inner)
        run.activate(act(3, "initialize_workflow", replaying=True))
        held = run.activate(act(49, "resolve_activity", replaying=True))
        assert held.HasField("successful") and not held.successful.commands
        run.activate(act(54, "do_update", replaying=True))
        assert inner.seen == [["initialize_workflow"], ["resolve_activity", "do_update"]]
    finally:
        _ahead.forget("r-fold")


# -- on a server ----------------------------------------------------------------------------


def _quiet(history: Any) -> bool:
    """Every activity scheduled has completed and the last workflow task sent no command."""
    events = list(history.events)
    scheduled = {
        e.event_id for e in events if e.HasField("activity_task_scheduled_event_attributes")
    }
    done = {
        e.activity_task_completed_event_attributes.scheduled_event_id
        for e in events
        if e.HasField("activity_task_completed_event_attributes")
    }
    return bool(events) and scheduled <= done and events[-1].event_type == WFT_COMPLETED


class HeldSuspend(sr.MemoryStore):
    """The app's store, holding the save of a suspended step until the test lets it go: the
    record activity stays in flight while the test sends its signal, whatever the load."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def save_step(self, run_id: str, step: Step) -> None:
        if step.run.status == "suspended" and not self.release.is_set():
            self.holding.set()
            await self.release.wait()  # the record activity heartbeats meanwhile
        await super().save_step(run_id, step)


def _signalled(history: Any) -> bool:
    """The signal is in the history and a workflow task after it completed (no commands)."""
    events = list(history.events)
    at = [
        i
        for i, e in enumerate(events)
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    return bool(at) and any(e.event_type == WFT_COMPLETED for e in events[at[-1] :])


async def test_an_approval_taken_by_a_cold_worker_replays(
    temporal_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``order-00081`` situation, made on purpose. A run waits for an approval; while its
    record activity (the suspended step) is in flight, a workflow task without commands
    comes (here a signal the workflow drops; in ``order-00081`` a task the worker's kill left),
    then the record's completion in another task without commands. The worker stops, the
    approval comes, and a new worker (an empty cache) takes it: SDK core hands it the record's
    completion and the update in one activation (two tasks without commands in a row are
    folded), while replay hands them over in two. With the run's jobs handed over one per
    activation, updates last (``_folds``), the history replays on the first try; without the
    marker, the record activity and the tool were scheduled in the other order and the replay
    failed as ``order-00081``'s."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from scale_kit import build_agent, order_input
    finally:
        sys.path.remove(str(BENCHMARKS))
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    store = HeldSuspend()
    run_id = f"fold-{uuid.uuid4().hex}"
    app = TemporalApp(
        agents=[build_agent(tmp_path / "ledger")],
        store=store,
        options=TemporalOptions(task_queue=queue),
    )
    runs = TemporalRuns(client, task_queue=queue)
    live: list[list[str]] = []
    real = _ahead._Instance.activate

    def seen(self: Any, act: Any) -> Any:
        if not act.is_replaying:
            live.append([job.WhichOneof("variant") or "" for job in act.jobs])
        return real(self, act)

    monkeypatch.setattr(_ahead._Instance, "activate", seen)
    async with app.worker(client):
        handle = await runs.start("scale", run_id=run_id, input=order_input("order-1", True))
        pending = await eventually(lambda: runs.pending(run_id), lambda p: len(p) == 1)
        await asyncio.wait_for(store.holding.wait(), 60)  # a cap against hanging, not a limit
        await handle.signal("input", SendArgs(id="", content="dropped: no id"))
        await eventually(handle.fetch_history, _signalled)
        store.release.set()
        await eventually(handle.fetch_history, _quiet)
    # The worker is gone; the approval waits for the next one, which has no cache.
    decided = asyncio.ensure_future(runs.decide(run_id, pending[0].call_id, approve=True))
    await asyncio.sleep(3)  # past the sticky queue's timeout: any worker takes the task
    live.clear()
    async with app.worker(client):
        record = await decided
        assert record.decision is not None and record.decision.approve
        result = await handle.result()
    assert result.status == "completed"
    folded = [kinds for kinds in live if "do_update" in kinds]
    assert folded and "resolve_activity" in folded[0], live  # the situation was made
    history = await handle.fetch_history()
    try:
        replayed = await app.replayer().replay_workflow(history, raise_on_replay_failure=False)
    finally:
        _ahead.forget(history.run_id)
    assert replayed.replay_failure is None, str(replayed.replay_failure)
