"""Host calls on a Temporal run that ended, or never existed, raise steadyrun's typed errors.

A decision, answer or result for an ended run is answered from its records, as ``Runtime``
answers it (tests/engines/test_refusals.py has the whole table on both engines).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import build_app  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

from steadyrun import (  # noqa: E402
    ConflictError,
    NotPendingError,
    RunCancelledError,
    RunNotFoundError,
    UnknownCallError,
)
from steadyrun.temporal import TemporalRuns  # noqa: E402


async def _setup(server: Any, tmp_path: Path) -> tuple[Any, Any, TemporalRuns]:
    """A client of ``server``, an app working a fresh task queue and the runs' client on it."""
    client = await connect(server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    return client, app, TemporalRuns(client, task_queue=queue)


async def test_a_completed_run_refuses_host_calls_with_typed_errors(
    temporal_server: Any, tmp_path: Path
) -> None:
    client, app, runs = await _setup(temporal_server, tmp_path)
    run_id = f"done-{uuid.uuid4().hex}"
    async with app.worker(client):
        assert (await runs.run("counter", run_id=run_id, input="Go.")).status == "completed"

        # New input would start a new turn (test_temporal_turns.py); its calls wait for
        # nothing, and there is nothing to cancel or resume.
        with pytest.raises(UnknownCallError, match="has no call 'c1'"):
            await runs.decide(run_id, "c1", approve=True)
        with pytest.raises(NotPendingError, match="not waiting for a decision"):
            await runs.decide(run_id, "m1.c1", approve=True)
        with pytest.raises(NotPendingError, match="not open"):
            await runs.answer(run_id, "m1.c1.w1", "yes")
        with pytest.raises(ConflictError, match="already settled"):
            await runs.settle(run_id, "m1.c1", result="ok")
        with pytest.raises(NotPendingError, match="nothing to cancel"):
            await runs.cancel(run_id)
        with pytest.raises(NotPendingError, match="nothing to resume"):
            await runs.resume(run_id)
        assert await runs.status(run_id) == "completed"  # reading an ended run still works


async def test_a_cancelled_run_refuses_input_and_cancels_again_quietly(
    temporal_server: Any, tmp_path: Path
) -> None:
    client, app, runs = await _setup(temporal_server, tmp_path)
    run_id = f"cancelled-{uuid.uuid4().hex}"
    async with app.worker(client):
        handle = await runs.start("support", run_id=run_id, input="I was charged twice.")
        pending = await eventually(lambda: runs.pending(run_id), lambda p: len(p) == 2)
        await runs.cancel(run_id)
        await eventually(lambda: handle.describe(), lambda d: d.status.name == "CANCELED")

        with pytest.raises(RunCancelledError, match="cancelled"):
            await runs.send(run_id, "Still there?")
        # Its calls were cancelled: as on the built-in engine, they wait for no decision.
        with pytest.raises(NotPendingError, match="'cancelled', not waiting for a decision"):
            await runs.decide(run_id, pending[0].call_id, approve=True)
        await runs.cancel(run_id)  # as on the built-in engine: again changes nothing


async def test_a_write_an_ended_workflow_cannot_take_is_refused(
    temporal_server: Any, tmp_path: Path
) -> None:
    client, app, runs = await _setup(temporal_server, tmp_path)
    run_id = f"terminated-{uuid.uuid4().hex}"
    async with app.worker(client):
        handle = await runs.start("support", run_id=run_id, input="I was charged twice.")
        pending = await eventually(lambda: runs.pending(run_id), lambda p: len(p) == 2)
        await handle.terminate("operator")

        # The run would take the decision, but its workflow takes no update: refused, not
        # lost silently; resume continues the run, and then it takes it.
        decision = next(i for i in pending if i.kind == "decision")
        with pytest.raises(NotPendingError, match=r"terminated.*TemporalRuns\.resume"):
            await runs.decide(run_id, decision.call_id, approve=True)
        await runs.resume(run_id)
        await eventually(lambda: runs.pending(run_id), lambda p: len(p) == 2)
        record = await runs.decide(run_id, decision.call_id, approve=True)
        assert record.decision is not None and record.decision.approve


async def test_an_unknown_run_is_not_found(temporal_server: Any) -> None:
    client = await connect(temporal_server)
    runs = TemporalRuns(client, task_queue=f"q-{uuid.uuid4().hex}")
    run_id = f"never-{uuid.uuid4().hex}"
    with pytest.raises(RunNotFoundError, match=r"TemporalRuns\.start"):
        await runs.send(run_id, "Hello?")
    with pytest.raises(RunNotFoundError):
        await runs.send(run_id, "Hello?", wait=False)
    with pytest.raises(RunNotFoundError):
        await runs.decide(run_id, "c1", approve=True)
    with pytest.raises(RunNotFoundError):
        await runs.pending(run_id)
    with pytest.raises(RunNotFoundError):
        await runs.status(run_id)
    with pytest.raises(RunNotFoundError):
        await runs.cancel(run_id)
    with pytest.raises(RunNotFoundError):
        await runs.result(run_id)
