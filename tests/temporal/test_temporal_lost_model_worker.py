"""A model call whose worker is lost does not use up the call's attempts (issue 24 parity).

On the built-in engine a worker lost in a model call costs nothing but time: the next executor
calls the model again. On Temporal the loss shows as a heartbeat timeout of the model activity;
those timeouts must not fail the run after ``model_attempts``. A worker whose event loop is
held (here: a model that blocks it with ``time.sleep``) sends no heartbeat, which Temporal
takes for a lost worker, as it does after a SIGKILL.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import time  # noqa: E402
import uuid  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions, TemporalRuns  # noqa: E402
from steadyrun.testing import FunctionModel, text  # noqa: E402


async def test_a_model_call_outlives_more_lost_workers_than_its_attempts(
    temporal_server: Any, tmp_path: Path
) -> None:
    lost = {"left": 2}  # two attempts lost in a row, with model_attempts=1

    def answer(request: ModelRequest) -> ModelResponse:
        if lost["left"] > 0:
            lost["left"] -= 1
            time.sleep(2.5)  # no heartbeat for 2.5 s: to Temporal, a lost worker
        return text("answered")

    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = TemporalApp(
        agents=[sr.Agent(name="a", model=FunctionModel(answer))],
        store=sr.SqliteStore(tmp_path / "runs.db"),
        options=TemporalOptions(
            task_queue=queue,
            heartbeat_timeout=timedelta(seconds=1),
            retry_interval=timedelta(milliseconds=100),
            model_attempts=1,
        ),
    )
    runs = TemporalRuns(client, task_queue=queue)
    async with app.worker(client):
        result = await runs.run("a", run_id=f"lost-{uuid.uuid4().hex}", input="Hi.")
    assert lost["left"] == 0
    assert (result.status, result.text, result.error_kind) == ("completed", "answered", None)
