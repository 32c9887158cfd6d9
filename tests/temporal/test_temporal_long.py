"""Long runs: continue-as-new carries the run on, with exactly the context it had."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import Deps, agents, build_app  # noqa: E402
from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun._codec import to_plain  # noqa: E402
from steadyrun.chat import Message  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402


async def test_continue_as_new_keeps_the_context(temporal_server: Any, tmp_path: Path) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(
        tmp_path / "runs.db", tmp_path / "fx", task_queue=queue, continue_as_new_after=25
    )
    runs = TemporalRuns(client, task_queue=queue)
    async with app.worker(client):
        handle = await runs.start("counter", run_id="count-1", input="Look them all up.")
        out = await handle.result()
        first_history = await handle.fetch_history()  # the first run, ended by continue-as-new
    assert out.status == "completed" and out.text == "looked up 6 orders"
    assert out.generations >= 2  # it really continued as new, more than once

    # The same agent on the built-in engine: the context must be identical, message by message.
    (counter,) = [a for a in agents(Deps(effects=tmp_path / "fx")) if a.name == "counter"]
    local = await sr.Runtime(sr.MemoryStore()).run(
        counter, run_id="count-1", input="Look them all up."
    )
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load("count-1")
    await store.close()
    assert snap is not None and snap.run.status == "completed"
    plain = to_plain(snap.context, list[Message])
    assert plain == to_plain(local.messages, list[Message])
    assert len(snap.calls) == 6 and all(c.status == "succeeded" for c in snap.calls)
    assert snap.checkpoint.model_calls == local_model_calls(local)

    await app.replayer().replay_workflow(first_history)


def local_model_calls(result: sr.RunResult) -> int:
    return sum(1 for m in result.messages if m.role == "assistant")
