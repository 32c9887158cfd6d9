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
two other cases.

The replay below is that worker's replay, without a server: it needs the benchmark's agent
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
from steadyrun.temporal import TemporalApp, TemporalOptions  # noqa: E402

DATA = Path(__file__).with_name("data")
CASES = [
    ("order-00039", "scale_update_after_timeout.json", "scale-temporal_2"),
    ("order-00179", "scale_update_feda7eb_00179.json", "scale-temporal_1"),
    ("order-00199", "scale_update_feda7eb_00199.json", "scale-temporal_1"),
]
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.xfail(
    strict=True,
    reason="known bug, open in issue 24: a decide update accepted in the workflow task after a "
    "timed-out one does not replay ([TMPRL1100] Nondeterminism error); the run never completes",
)
@pytest.mark.parametrize(("run_id", "name", "queue"), CASES)
async def test_an_update_accepted_after_a_timed_out_workflow_task_replays(
    tmp_path: Path, run_id: str, name: str, queue: str
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

    result = await app.replayer().replay_workflow(history, raise_on_replay_failure=False)

    assert result.replay_failure is None, str(result.replay_failure)
