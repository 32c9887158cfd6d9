"""Background tools with the same observable result on the built-in engine and on Temporal.

Each scenario of ``bg_engines`` runs on both: adoption with a receipt and a notification
later, the background asked for at once, the task tools and cancel, progress, and a resumable
operation waiting for input.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import bg_engines
import bg_subagents
import pytest

import steadyrun as sr
from bgkit import Build, Registry
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, text, tool_calls

Scenario = Callable[[bg_engines.Opener], Awaitable[None]]

SCENARIOS: list[Scenario] = [
    bg_engines.adoption,
    bg_engines.in_background_at_once,
    bg_engines.task_tools_and_cancel,
    bg_engines.progress,
    bg_engines.waiting_input,
    bg_engines.failure_and_time_limit,
    bg_engines.listed_by_the_service,
    bg_subagents.subagent_adoption,
    bg_subagents.subagent_later_turn_counts,
    bg_engines.task_tools_in_a_later_turn,
]


@pytest.fixture(params=["builtin", "temporal"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "builtin":
        return bg_engines.builtin
    pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")
    server = request.getfixturevalue("temporal_server")
    return bg_engines.on_temporal(server, tmp_path)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_background_scenario(opener: Any, scenario: Scenario) -> None:
    await scenario(opener)


async def test_a_run_continues_as_new_only_once_its_tasks_ended(
    temporal_server: Any, tmp_path: Path
) -> None:
    # Past the history length at every step: only a task going keeps the workflow run (a
    # continued run would lose the activity: the operation stopped, the run never told),
    # and the task that ended goes on with the run.
    opener = bg_engines.on_temporal(temporal_server, tmp_path, continue_as_new_after=1)
    reg, r = Registry(), bg_engines.run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            text("started"),
            tool_calls(("task_status", {"task_id": f"{r}/m1.c1"})),
            text("it is building"),
            tool_calls(("task_output", {"task_id": f"{r}/m1.c1"})),
            text("built"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")
        await session.first_turn(r)
        await session.runs.send(r, "how is it going?")
        await bg_engines.eventually(
            bg_engines.text_is(session, r, "it is building"), "the second turn"
        )
        reg.gate(f"{r}/m1.c1").set()
        snap = await session.settled(r)
        out = session.outputs[r]
        (task,) = await session.tasks(r)
    assert out.text == "built" and out.generations >= 1
    # The task that ended was carried into the continued workflow runs.
    output = next(c for c in snap.calls if c.name == "task_output")
    assert output.result == json.dumps({"built": f"{r}/m1.c1"}) and task.status == "completed"
    assert reg.starts == {f"{r}/m1.c1": 1} and reg.stops == []


@sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Ship it?"), concurrency_key="")
def ship(what: str) -> str:
    """Ship something (after a person approves).

    Args:
        what: What to ship.
    """
    return f"shipped {what}"


async def test_cancelling_a_run_stops_its_tasks_but_a_completed_run_is_not_cancelled(
    temporal_server: Any, tmp_path: Path
) -> None:
    opener = bg_engines.on_temporal(temporal_server, tmp_path, extra_tools=[ship])
    reg, r = Registry(), bg_engines.run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            text("started"),
            tool_calls(("build", {"repo": "app"}), ("ship", {"what": "app"})),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")
        await session.first_turn(r)
        # Completed while its task runs: nothing to cancel, as on the built-in engine.
        with pytest.raises(sr.NotPendingError):
            await session.runs.cancel(r)
        await session.runs.send(r, "now the app, and ship it")

        async def asks() -> bool:
            return any(i.kind == "decision" for i in await session.pending(r))

        await bg_engines.eventually(asks, "the run waits for a decision, two tasks going")
        await session.runs.cancel(r)

        async def stopped() -> bool:
            return sorted(reg.stops) == [f"{r}/m1.c1", f"{r}/m3.c1"]

        await bg_engines.eventually(stopped, "both operations are stopped")
        with pytest.raises(sr.RunCancelledError):
            await session.runs.result(r)
        snap = await session.store.load(r)
    assert reg.starts == {f"{r}/m1.c1": 1, f"{r}/m3.c1": 1}
    assert snap is not None and snap.run.status == "cancelled"


async def test_recovery_of_background_calls_reads_the_workflow_not_a_workers_task_store(
    temporal_server: Any, tmp_path: Path
) -> None:
    from datetime import timedelta

    from temporalio.client import Client

    from bgkit import RecoverableBuild
    from steadyrun.background import MemoryTaskStore, Task, TaskManager
    from steadyrun.temporal import TemporalApp, TemporalOptions

    class Slow(RecoverableBuild):
        foreground_timeout = 60.0

    reg, r = Registry(), f"r{uuid.uuid4().hex[:8]}"
    tool = Slow(reg)
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [tool])
    # This worker's own task store knows a task of that id; a workflow must not read it
    # (another worker's would differ): its tasks are its own.
    stale = Task(id=f"{r}/m1.c1", run_id=r, call_id="m1.c1", tool="rbuild", arguments="{}")
    await manager.store.insert(stale)
    model = ScriptedModel([tool_calls(("rbuild", {"repo": "shop"})), text("built")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools(), extensions=[manager.recovery()])
    client = await Client.connect(temporal_server.target)
    queue = f"q-{uuid.uuid4().hex}"
    store = sr.SqliteStore(tmp_path / "runs.db")
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
    )
    app = TemporalApp(agents=[agent], store=store, options=options, background=[tool])
    runs = app.runs(client)
    async with app.worker(client):
        handle = await runs.start("a", run_id=r, input="build")

        async def running() -> bool:
            snap = await store.load(r)
            return reg.starts.get(f"{r}/m1.c1") == 1 and snap is not None and bool(snap.calls)

        await bg_engines.eventually(running, "the call waits in the foreground")
        await handle.terminate("an operator stopped it")  # the workflow fails mid-call
        reg.gate(f"{r}/m1.c1").set()
        await runs.resume(r)
        out = await runs.result(r)
        snap = await store.load(r)
    await store.close()
    assert out.status == "completed" and out.text == "built"
    # Run again (re-attached: start is idempotent by task id), not given the stale receipt.
    assert snap is not None
    (call,) = snap.calls
    assert call.status == "succeeded" and json.loads(call.result or "") == {"built": f"{r}/m1.c1"}
