"""Updates are refused while a legacy query has run a workflow ahead of its history.

Why (the cause of the stuck runs in ``test_temporal_update_replay.py``): see
``steadyrun.temporal._ahead``. The activation sequences below are the ones the SDK gave the
workers of the three recorded histories (history lengths from those histories).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from temporal_kit import build_app  # noqa: E402
from temporalio.bridge.proto.workflow_activation import (  # noqa: E402
    WorkflowActivation,
    WorkflowActivationJob,
)
from temporalio.bridge.proto.workflow_completion import (  # noqa: E402
    WorkflowActivationCompletion,
)
from test_temporal_engine import connect, eventually  # noqa: E402

from steadyrun import RunBusyError  # noqa: E402
from steadyrun.temporal import TemporalRuns, _ahead  # noqa: E402
from steadyrun.temporal._ahead import (  # noqa: E402
    Ahead,
    AheadAwareRunner,
    Kind,
    activation_kind,
    on_activation,
    refusing_updates,
)


def refusals(steps: list[tuple[Kind, int]]) -> list[bool]:
    state, out = Ahead(), []
    for kind, length in steps:
        refuse, state = on_activation(state, kind, length)
        out.append(refuse)
    return out


# -- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        # order-00039: the legacy query applied events 26 and 29 (activation at 29); the
        # update came with the workflow task started at 32.
        ("00039", [("jobs", 21), ("jobs", 29), ("legacy_query", 29), ("jobs", 32)]),
        # order-00179: the same at 29, the update's task started at 30.
        ("00179", [("jobs", 21), ("jobs", 29), ("legacy_query", 29), ("jobs", 30)]),
        # order-00199: the legacy query applied event 26 only; the update came at 32.
        ("00199", [("jobs", 21), ("jobs", 26), ("legacy_query", 26), ("jobs", 32)]),
    ],
)
def test_the_update_after_a_legacy_query_that_applied_events_is_refused(
    name: str, steps: list[tuple[Kind, int]]
) -> None:
    assert refusals(steps) == [False, False, False, True]
    # Once that task is done, the update asked again is taken.
    assert refusals([*steps, ("jobs", steps[-1][1] + 5)])[-1] is False


def test_a_legacy_query_on_a_workflow_up_to_date_refuses_nothing() -> None:
    # The last task (started at 21) was completed: its events and commands (22-24) follow.
    assert refusals([("jobs", 21), ("legacy_query", 24), ("jobs", 27)]) == [False] * 3
    # Queries delivered with a workflow task run after it: nothing is held.
    assert refusals([("jobs", 21), ("query", 21), ("jobs", 27)]) == [False] * 3


def test_an_eviction_forgets_what_was_held() -> None:
    assert (
        refusals([("jobs", 29), ("legacy_query", 29), ("evict", 29), ("jobs", 32)]) == [False] * 4
    )


def test_a_second_legacy_query_with_more_events_keeps_the_workflow_ahead() -> None:
    steps: list[tuple[Kind, int]] = [
        ("jobs", 29),
        ("legacy_query", 29),
        ("jobs", 31),  # the second legacy query's new events
        ("legacy_query", 31),
        ("jobs", 34),  # the workflow task, with the update
    ]
    assert refusals(steps)[-1] is True


def test_a_dropped_task_of_a_refused_update_leaves_no_refusal_behind() -> None:
    # The server drops the task of an update refused on an idle workflow: a legacy query
    # after it has the history before it, the worker's last activation that task's length.
    steps: list[tuple[Kind, int]] = [
        ("jobs", 29),
        ("legacy_query", 29),
        ("jobs", 32),  # the task with the held commands and the update: refused
        ("legacy_query", 35),  # the client asks again which calls wait
        ("updates", 38),  # its update, in a task the server drops if refused
        ("legacy_query", 38),
        ("updates", 38),
    ]
    assert refusals(steps) == [False, False, True, False, False, False, False]


KINDS: list[Kind] = ["jobs", "updates", "legacy_query", "query", "evict"]
activations = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(min_value=0, max_value=6)), max_size=30
).map(
    # History lengths never decrease from one activation to the next.
    lambda raw: [(kind, sum(d for _, d in raw[: i + 1])) for i, (kind, _) in enumerate(raw)]
)


@given(activations)
def test_without_a_legacy_query_nothing_is_refused(steps: list[tuple[Kind, int]]) -> None:
    plain = [(k, n) for k, n in steps if k != "legacy_query"]
    assert not any(refusals(plain))


@given(activations)
def test_a_refusal_follows_a_legacy_query_at_the_last_events_length(
    steps: list[tuple[Kind, int]],
) -> None:
    out = refusals(steps)
    for i, refused in enumerate(out):
        if not refused:
            continue
        assert steps[i][0] in ("jobs", "updates")
        # Looking back: only queries since the last activation that worked (or evicted) ...
        k = i - 1
        while steps[k][0] in ("query", "legacy_query"):
            k -= 1
        assert k >= 0 and steps[k][0] != "evict"
        # ... one of them a legacy query at the length of the last activation of events.
        a = k
        while steps[a][0] != "jobs":
            assert steps[a][0] != "evict"
            a -= 1
        assert ("legacy_query", steps[a][1]) in steps[k + 1 : i]


@given(activations)
def test_the_next_activation_ends_the_refusals(
    steps: list[tuple[Kind, int]],
) -> None:
    out = refusals([*steps, ("updates", 10_000), ("updates", 10_000)])
    assert out[-1] is False


# -- the runner -----------------------------------------------------------------------------


def activation(run_id: str, length: int, *jobs: WorkflowActivationJob) -> WorkflowActivation:
    act = WorkflowActivation(run_id=run_id, history_length=length)
    act.jobs.extend(jobs)
    return act


def resolve() -> WorkflowActivationJob:
    job = WorkflowActivationJob()
    job.resolve_activity.seq = 5
    return job


def update() -> WorkflowActivationJob:
    job = WorkflowActivationJob()
    job.do_update.id = "u1"
    job.do_update.name = "decide"
    return job


def query(query_id: str) -> WorkflowActivationJob:
    job = WorkflowActivationJob()
    job.query_workflow.query_id = query_id
    job.query_workflow.query_type = "pending"
    return job


def evict() -> WorkflowActivationJob:
    job = WorkflowActivationJob()
    job.remove_from_cache.message = "gone"
    return job


def test_activation_kinds() -> None:
    assert activation_kind(activation("r", 3, resolve())) == "jobs"
    assert activation_kind(activation("r", 3, update(), resolve())) == "jobs"
    assert activation_kind(activation("r", 3, update())) == "updates"
    assert activation_kind(activation("r", 3, query("legacy_query"))) == "legacy_query"
    assert activation_kind(activation("r", 3, query("q-1"), query("q-2"))) == "query"
    assert activation_kind(activation("r", 3, evict())) == "evict"


class Recording:
    """A stand-in for the SDK's instance: notes whether updates were refused in each."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        self.seen.append(refusing_updates(act.run_id))
        return WorkflowActivationCompletion(run_id=act.run_id)

    def get_info(self) -> str:
        return "info"

    def get_thread_id(self) -> int:
        return 7


class Runner:
    def __init__(self, inner: Recording) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: Any) -> None:
        pass

    def create_instance(self, det: Any) -> Any:
        return self.inner

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        pass


def test_the_runner_refuses_updates_for_that_run_only_during_that_activation() -> None:
    inner = Recording()
    instance = AheadAwareRunner(Runner(inner)).create_instance(None)  # type: ignore[arg-type]
    other = AheadAwareRunner(Runner(Recording())).create_instance(None)  # type: ignore[arg-type]
    instance.activate(activation("r1", 29, resolve()))
    instance.activate(activation("r1", 29, query("legacy_query")))
    other.activate(activation("r2", 29, resolve()))
    instance.activate(activation("r1", 32, update()))
    instance.activate(activation("r1", 36, update()))
    assert inner.seen == [False, False, True, False]
    assert not refusing_updates("r1") and not refusing_updates("r2")
    assert instance.get_info() == "info"
    assert instance.get_thread_id() == 7  # the worker interrupts a deadlock by it


# -- on a server ----------------------------------------------------------------------------


async def test_a_worker_refuses_updates_while_ahead_and_the_client_asks_again(
    temporal_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused update reaches the client as ``RunBusyError`` (after it asked again a few
    times), leaves nothing in the history, and the same update is taken once the worker is
    no longer ahead."""
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    ahead: set[str] = set()
    real = _ahead.on_activation

    def forced(state: Ahead, kind: Kind, length: int) -> tuple[bool, Ahead]:
        refuse, after = real(state, kind, length)
        return refuse or (kind in ("jobs", "updates") and bool(ahead)), after

    monkeypatch.setattr(_ahead, "on_activation", forced)
    async with app.worker(client):
        handle = await runs.start("support", run_id="ahead-1", input="I was charged twice.")
        pending = await eventually(lambda: runs.pending("ahead-1"), lambda p: len(p) == 2)
        decision = next(p for p in pending if p.kind == "decision")
        ahead.add("ahead-1")
        with pytest.raises(RunBusyError, match="ahead-1"):
            await runs.decide("ahead-1", decision.call_id, approve=True)
        with pytest.raises(RunBusyError, match="ahead-1"):
            await runs.send("ahead-1", "anything new?")
        ahead.clear()
        record = await runs.decide("ahead-1", decision.call_id, approve=True)
        assert record.decision is not None and record.decision.approve
        history = await handle.fetch_history()
    accepted = [
        e
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    assert len(accepted) == 1
