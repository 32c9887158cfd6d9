"""A run approved while its worker was being replaced must replay (found by benchmarks/scale.py).

The history in ``data/scale_update_after_timeout.json`` is run ``order-00039`` of a
``benchmarks/scale.py`` run (Temporal, 2 worker processes, one SIGKILLed every 5 s;
2026-12-01). Its worker was killed with a workflow task in flight (event 30,
``WorkflowTaskTimedOut``); the next workflow task, on a new worker, scheduled the record
activity (event 34) and then accepted and completed the client's ``decide`` update (35, 36).
After the next kill (event 52) the replacement worker replays that history and fails it with
``[TMPRL1100] Nondeterminism error: Update machine does not handle this event:
HistoryEvent(id: 34, ActivityTaskScheduled)`` (event 55, ``WorkflowTaskFailed``). The
workflow task then fails on every worker, so the run never completes: the charge is in the
ledger and the store shows the run ``running`` forever.

The same happened on main ``feda7eb`` with a SIGKILL every 10 s (1 worker): ``order-00179``
(the same error at event 32) and ``order-00199`` (``Activity id of scheduled event
'tool:m2.c1:4' does not match activity id of activity command '7'``); their histories are the
two other cases. ``order-00077`` is a fourth, from main ``6ce1be3`` (1 worker, a SIGKILL every
5 s, every second run approved; 1 of 100 runs stuck, the same error at event 40).

Cause (``steadyrun.temporal._ahead``): before each of these updates, the client's query for the
call to approve was answered as a *legacy query* while the run's workflow task waited for a
lost worker; the worker that answered ran the workflow over the events no task had handled yet
(00039, 00179: both activity completions; 00199: the first), so the update that followed was
validated on that state and accepted after those events' commands. Replay hands the workflow
the update before its task's events. Workers now refuse updates while a workflow is so ahead
(``test_temporal_ahead.py``), so no such history is written any more.

These histories were written before that. A worker whose replay of a run fails so tries again
with the update handed over after one more of its task's events (``_handover_order``); the
SDK's retries of the failed workflow task are those tries. Below: the first replay fails as
the workers' did, a later one (the original order) replays, and the rest of the history with
it. The replay is that of a worker, without a server: it needs the benchmark's agent
(``benchmarks/scale_kit.py``), whose code the histories were recorded with.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import sys  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

from temporalio.client import WorkflowHistory  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions, _ahead  # noqa: E402

DATA = Path(__file__).with_name("data")
CASES = [
    # run, history, task queue, replays until one replays (1 + events the query applied)
    ("order-00039", "scale_update_after_timeout.json", "scale-temporal_2", 3),
    ("order-00179", "scale_update_feda7eb_00179.json", "scale-temporal_1", 3),
    ("order-00199", "scale_update_feda7eb_00199.json", "scale-temporal_1", 2),
    ("order-00077", "scale_update_6ce1be3_00077.json", "scale-temporal_1", 3),
]
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize(("run_id", "name", "queue", "replays"), CASES)
async def test_an_update_accepted_after_a_legacy_query_replays_on_a_later_try(
    tmp_path: Path, run_id: str, name: str, queue: str, replays: int
) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from scale_kit import build_agent
    finally:
        sys.path.remove(str(BENCHMARKS))
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=5),
        retry_interval=timedelta(milliseconds=200),
    )
    app = TemporalApp(
        agents=[build_agent(tmp_path / "ledger")], store=sr.MemoryStore(), options=options
    )
    history = WorkflowHistory.from_json(run_id, (DATA / name).read_text())
    failures = []
    try:
        for _ in range(replays):
            result = await app.replayer().replay_workflow(history, raise_on_replay_failure=False)
            if result.replay_failure is None:
                break
            failures.append(str(result.replay_failure))
    finally:
        _ahead.forget(history.run_id)  # another test replays it afresh

    assert result.replay_failure is None, failures
    assert len(failures) == replays - 1
    assert "[TMPRL1100] Nondeterminism error" in failures[0]


async def test_an_update_accepted_after_an_empty_workflow_task_replays(tmp_path: Path) -> None:
    """``order-00081``: a second way, found with the fix above (same benchmark, 1 worker, a
    SIGKILL every 5 s, every second run approved: 1 of 100 runs stuck).

    The task started at 49 handled the record activity's completion and sent no command; the
    next one (54) accepted the update and scheduled the tool (58), then the record (59). The
    worker that wrote 54 had folded the empty task into it (one activation: the update, then
    the completion: the flusher still waited for its record activity). Replay, seeing the
    update's sequencing event, ends a task at 49 instead: the completion comes first, the
    flusher is idle when the update arrives, and the record is scheduled before the tool
    ("Activity id of scheduled event 'tool:m2.c1:4' does not match activity id of activity
    command '8'"). The update is alone in its activation, so ``_handover_order`` does not
    apply, and a legacy query was not involved.

    The first replay fails so; the next holds the empty task's activation back and hands its
    completion over with the update, as the live worker had folded them (``_folds``), and the
    history replays to its end.
    """
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from scale_kit import build_agent
    finally:
        sys.path.remove(str(BENCHMARKS))
    options = TemporalOptions(task_queue="scale-temporal_1")
    app = TemporalApp(
        agents=[build_agent(tmp_path / "ledger")], store=sr.MemoryStore(), options=options
    )
    text = (DATA / "scale_update_empty_task_00081.json").read_text()
    history = WorkflowHistory.from_json("order-00081", text)
    failures = []
    try:
        for _ in range(4):
            result = await app.replayer().replay_workflow(history, raise_on_replay_failure=False)
            if result.replay_failure is None:
                break
            failures.append(str(result.replay_failure))
    finally:
        _ahead.forget(history.run_id)
    assert result.replay_failure is None, failures
    assert len(failures) == 1
    assert "does not match activity id of activity command '8'" in failures[0]
