"""Engines respect each other's claims: a Temporal run is not executed or written beside it.

A run executed by Temporal mirrors its records into the app's SQLite store, claimed there by
its workflow. The built-in engine refuses to execute it (``ForeignEngineError``), and a host
write through that store (``Runtime.decide``, the service's API, the CLI) is refused instead of
being stored without effect; the decision sent to the workflow runs the body once.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
from temporal_kit import build_app, effects  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun import ForeignEngineError, RunBusyError  # noqa: E402
from steadyrun.service import App, create_app  # noqa: E402
from steadyrun.service._ops import Operations  # noqa: E402
from steadyrun.service._worker import Worker  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402


async def test_the_built_in_engine_refuses_a_temporal_run(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(tmp_path / "runs.db", tmp_path / "effects", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    store = sr.SqliteStore(tmp_path / "runs.db")
    try:
        async with app.worker(client):
            handle = await runs.start("support", run_id="t-1", input="I was charged twice.")
            pending = await eventually(lambda: runs.pending("t-1"), lambda p: len(p) == 2)
            decision = next(p for p in pending if p.kind == "decision")
            awaited = next(p for p in pending if p.kind == "result")
            snap = await eventually(
                lambda: store.load("t-1"),
                lambda s: s is not None and s.run.status == "suspended",
            )
            assert snap is not None

            support = [a for a in app.agents if a.name == "support"]
            runtime = sr.Runtime(store, agents=support)
            with pytest.raises(ForeignEngineError) as refused:
                await runtime.resume("t-1", wait=5)  # never waited on: it is not ours
            assert refused.value.engine == "temporal"
            assert isinstance(refused.value, RunBusyError)
            for write in (
                runtime.decide("t-1", decision.call_id, approve=True),
                runtime.settle("t-1", awaited.call_id, result="x"),
                runtime.send("t-1", "hello?"),
                Operations(store).cancel("t-1"),
            ):
                with pytest.raises(ForeignEngineError, match="TemporalRuns"):
                    await write
            # The service's API on that store answers 409 and stores nothing either.
            api = create_app(App(runtime, worker=False), tokens=["t"])
            transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                answer = await http.post(
                    f"/runs/t-1/calls/{decision.call_id}/decision",
                    json={"approve": True},
                    headers={"Authorization": "Bearer t"},
                )
            assert answer.status_code == 409, answer.text
            assert answer.json()["error"] == "other_engine", answer.json()
            after = await store.load("t-1")
            assert after is not None and after.calls == snap.calls  # nothing stored beside it

            worker = Worker(runtime, poll=0.1)
            await worker.run_until_idle()  # no runnable run: its own writes woke nothing
            assert worker.stats.executed == 0

            await runs.decide("t-1", decision.call_id, approve=True)
            await runs.settle("t-1", awaited.call_id, result="no chargeback")
            out = await handle.result()
        assert out.status == "completed"
        assert effects(tmp_path / "effects") == ["refund A-1 4999"]  # once, by the workflow
    finally:
        await store.close()
