"""``on_handover`` on Temporal: the host's hook runs in an activity (it may do I/O) before a
pending confirmation is saved, and a ``CallRejected`` refuses the call, as on the built-in engine.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_parity_kit import (  # noqa: E402
    Deps,
    build_parity_app,
    handover_hook,
    marks,
    parity_agents,
)
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402


async def _built_in(tmp: Path, run_id: str, said: str) -> tuple[Any, Any]:
    deps = Deps(effects=tmp / "builtin-fx")
    store = sr.SqliteStore(tmp / "builtin.db")
    runtime = sr.Runtime(store, agents=parity_agents(deps), on_handover=handover_hook(deps))
    result = await runtime.run(runtime._agents["wire"], run_id=run_id, input=said)
    snap = await store.load(run_id)
    await store.close()
    return result, snap


async def test_a_refused_handover_rejects_the_call_as_on_the_built_in_engine(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue, hook=True)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"wire-{uuid.uuid4().hex}"
    async with app.worker(client):
        out = await runs.run("wire", run_id=run_id, input="Wire 5000.")
    expected, built_in = await _built_in(tmp_path, "big", "Wire 5000.")

    assert out.status == expected.status == "completed"
    assert out.text == expected.text
    assert "wires above 1000 need a second bank" in (out.text or "")
    # The hook ran in the worker (it wrote its line); the wire never did.
    assert [w for w, _ in marks(tmp_path / "fx")] == ["handover-wire-awaiting_decision"]
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load(run_id)
    await store.close()
    (call,) = snap.calls
    (twin,) = built_in.calls
    assert (call.status, call.result) == (twin.status, twin.result) == ("rejected", twin.result)


async def test_an_accepted_handover_waits_for_the_decision(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue, hook=True)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"wire-{uuid.uuid4().hex}"
    async with app.worker(client):
        await runs.start("wire", run_id=run_id, input="Wire 300.")
        (item,) = await eventually(lambda: runs.pending(run_id), lambda p: len(p) == 1)
        assert item.kind == "decision" and item.prompt == "Wire 300?"
        await runs.decide(run_id, item.call_id, approve=True)
        out = await runs.result(run_id)
    assert out.status == "completed" and out.text == "ended: wired 300"
    assert [w for w, _ in marks(tmp_path / "fx")] == [
        "handover-wire-awaiting_decision",
        "wire300",
    ]
