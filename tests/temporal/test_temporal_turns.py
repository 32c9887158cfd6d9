"""New input on a completed Temporal run, and resume of a terminated one, as on the built-in engine.

A run's workflow ends when the run completes or fails; new input (``send``, or ``start``/``run``
with input for that run id) starts a new workflow run for the same run id that continues from
the stored run, and ``resume`` does the same without input. Resuming a run whose model failed
is in the two-engine suite (tests/engines).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_parity_kit import Deps, build_parity_app, marks, parity_agents  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalOptions, TemporalRuns  # noqa: E402


def _texts(snap: Any) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in snap.context]


async def _stored(path: Path, run_id: str) -> Any:
    store = sr.SqliteStore(path)
    try:
        return await store.load(run_id)
    finally:
        await store.close()


async def _built_in_conversation(tmp: Path) -> tuple[list[Any], list[tuple[str, str]]]:
    """The same conversation on the built-in engine: three turns, the last through ``run``."""
    store = sr.SqliteStore(tmp / "builtin.db")
    runtime = sr.Runtime(store, agents=parity_agents(Deps(effects=tmp / "builtin-fx")))
    agent = runtime._agents["chat"]
    results = [await runtime.run(agent, run_id="talk", input="Hello.")]
    await runtime.send("talk", "And you?")
    results.append(await runtime.resume("talk"))
    results.append(await runtime.run(agent, run_id="talk", input="Bye."))
    snap = await store.load("talk")
    await store.close()
    return results, _texts(snap)


async def test_new_input_on_a_completed_run_starts_a_new_turn(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"talk-{uuid.uuid4().hex}"
    async with app.worker(client):
        first = await runs.run("chat", run_id=run_id, input="Hello.")
        sent = await runs.send(run_id, "And you?")
        assert sent is not None and sent.content == "And you?"
        second = await runs.result(run_id)
        third = await runs.run("chat", run_id=run_id, input="Bye.")
        assert await runs.status(run_id) == "completed"

    expected, context = await _built_in_conversation(tmp_path)
    got = [first, second, third]
    assert [(r.status, r.text) for r in got] == [(r.status, r.text) for r in expected]
    assert third.text == "turn 3: Bye."
    snap = await _stored(tmp_path / "runs.db", run_id)
    assert snap.run.status == "completed" and _texts(snap) == context


async def test_new_turns_continue_as_new_where_the_history_demands(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    options = TemporalOptions(task_queue=queue, continue_as_new_after=8)
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue, options=options)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"long-{uuid.uuid4().hex}"
    async with app.worker(client):
        await runs.run("chat", run_id=run_id, input="Hello.")
        await runs.send(run_id, "And you?")
        second = await runs.result(run_id)
        third = await runs.run("chat", run_id=run_id, input="Bye.")
    # A restarted run's turn was long enough to continue as new, carrying the feed's numbering.
    assert second.generations + third.generations > 0
    expected, context = await _built_in_conversation(tmp_path)
    assert third.text == expected[2].text == "turn 3: Bye."
    assert _texts(await _stored(tmp_path / "runs.db", run_id)) == context


async def test_a_signal_on_a_completed_run_starts_a_new_turn_too(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"talk-{uuid.uuid4().hex}"
    async with app.worker(client):
        await runs.run("chat", run_id=run_id, input="Hello.")
        assert await runs.send(run_id, "Still there?", wait=False) is None
        out = await eventually(lambda: runs.result(run_id), lambda r: r.text != "turn 1: Hello.")
        assert out.text == "turn 2: Still there?"


async def test_resume_settles_a_call_cut_off_by_a_failed_workflow_by_its_traits(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue, block=True)
    deps = app.agent("flaky").deps
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"cut-{uuid.uuid4().hex}"
    async with app.worker(client):
        handle = await runs.start("flaky", run_id=run_id, input="Charge C-1.")
        probe = lambda: asyncio.to_thread(marks, tmp_path / "fx")  # noqa: E731
        await eventually(probe, lambda m: any(w == "charge" for w, _ in m))
        await eventually(
            lambda: _stored(tmp_path / "runs.db", run_id),
            lambda s: s is not None and any(c.status == "running" for c in s.calls),
        )
        await handle.terminate("an operator stopped it")  # the workflow fails mid-call
        deps.block = False
        await runs.resume(run_id)
        out = await runs.result(run_id)

    assert out.status == "completed"
    assert [w for w, _ in marks(tmp_path / "fx")].count("charge") == 1  # not run again
    snap = await _stored(tmp_path / "runs.db", run_id)
    (call,) = snap.calls
    assert call.name == "slow_charge" and call.status == "needs_review"
