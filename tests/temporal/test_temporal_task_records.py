"""Background tasks of Temporal runs outlive their workflow, as the built-in engine's do.

A task that ended is written to the built-in engine's task tables in the app's store (by the
record activity), given back to a new workflow run by the load that starts a new turn, and
listed by ``TemporalRuns.tasks`` and the service once the workflow no longer answers (closed
with no worker polling, or its history deleted).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import json  # noqa: E402
import uuid  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import bg_engines  # noqa: E402

import pgkit  # noqa: E402
import steadyrun as sr  # noqa: E402
from bgkit import Build, Registry  # noqa: E402
from steadyrun._codec import to_plain  # noqa: E402
from steadyrun.background import MemoryTaskStore, Task, TaskManager, Update  # noqa: E402
from steadyrun.control import Confirm  # noqa: E402
from steadyrun.records import Checkpoint, RunRecord, Step  # noqa: E402
from steadyrun.stores import MemoryStore, PostgresStore, SqliteStore, Store  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions  # noqa: E402
from steadyrun.temporal._activities import Activities  # noqa: E402
from steadyrun.temporal._payloads import RecordInput, RecordOp  # noqa: E402
from steadyrun.temporal._taskrecords import task_op_data, task_records  # noqa: E402
from steadyrun.testing import ScriptedModel, text, tool_calls  # noqa: E402

pg_dsn = pgkit.database_fixture(prefix="steadyrun_trecords")

DATA = Path(__file__).with_name("data")

_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "runs.db")
    return PostgresStore(request.getfixturevalue("pg_dsn"))


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_an_ended_task_is_recorded_once_and_loaded_for_the_next_turn(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _store(kind, tmp_path, request)
    try:
        record = RunRecord(run_id="r", agent="a", status="completed")
        run = Step(run=record, checkpoint=Checkpoint())
        task = Task(
            id="r/m1.c1",
            run_id="r",
            call_id="m1.c1",
            tool="build",
            arguments='{"repo": "shop"}',
            description="build shop",
            status="completed",
            output={"built": "r/m1.c1"},
            started=True,
            notified=True,
            created_at=_NOW,
            updated_at=_NOW,
        )
        updates = [Update(event_id=f"e{n}", data=f"step {n}") for n in range(30)]
        ops = [
            RecordOp(op="save_step", data=to_plain(run, Step)),
            RecordOp(op="task", data=task_op_data(task, updates)),
        ]
        activities = Activities(TemporalApp(agents=[], store=store))
        await activities.record(RecordInput(run_id="r", ops=ops))
        await activities.record(RecordInput(run_id="r", ops=ops))  # a retry writes it again
        tasks = task_records(store)
        assert tasks is not None and task_records(store) is tasks  # one per store
        assert await tasks.list_tasks("r") == [task]
        kept = await tasks.updates("r/m1.c1")
        assert [u.event_id for u in kept] == [f"e{n}" for n in range(10, 30)]  # the last 20
        assert await tasks.claimable(_NOW + timedelta(days=1), 10) == []  # no worker takes it
        assert await tasks.unnotified(10) == []
        loaded = await activities.load("r")
        assert loaded.carried is not None
        assert loaded.carried.tasks == [to_plain(task, Task)]
        assert loaded.carried.task_updates == {"r/m1.c1": [to_plain(u, Update) for u in kept]}
    finally:
        await store.close()


async def test_tasks_are_listed_after_the_workflow_closed_and_after_its_history_is_gone(
    temporal_server: Any, tmp_path: Path
) -> None:
    import httpx
    from temporalio.client import Client

    from steadyrun.service import App, create_app
    from steadyrun.temporal import TemporalEngine
    from steadyrun.temporal._quiet import forget

    reg, r = Registry(), f"r{uuid.uuid4().hex[:8]}"
    build = Build(reg)
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [build])
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("started"), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    client = await Client.connect(temporal_server.target)
    queue = f"q-{uuid.uuid4().hex}"
    store = sr.SqliteStore(tmp_path / "runs.db")
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=2),
        retry_interval=timedelta(milliseconds=200),
    )
    app = TemporalApp(agents=[agent], store=store, options=options, background=[build])
    runs = app.runs(client)
    async with app.worker(client):
        await runs.start("a", run_id=r, input="build")

        async def adopted() -> bool:
            snap = await store.load(r)
            return snap is not None and snap.run.status == "completed"

        await bg_engines.eventually(adopted, "the first turn ended with the build adopted")
        reg.gate(f"{r}/m1.c1").set()
        out = await runs.result(r)
        assert out.status == "completed"
        (live,) = await runs.tasks(r)
    assert live.status == "completed"
    service = App(store, engine=TemporalEngine(client, task_queue=queue))

    async def listed() -> list[dict[str, Any]]:
        api = create_app(service, tokens=["t0k"])
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            got = await http.get(f"/runs/{r}/tasks", headers={"Authorization": "Bearer t0k"})
        assert got.status_code == 200, got.text
        return list(got.json()["tasks"])

    try:
        # No worker polls: the closed workflow cannot answer a query; the store does.
        assert await runs.tasks(r) == [live]
        (shown,) = await listed()
        assert (shown["id"], shown["status"]) == (f"{r}/m1.c1", "completed")
        assert shown["output"] == {"built": f"{r}/m1.c1"}
        await forget(client, r, settle=60.0)  # the namespace's retention, in effect
        assert await runs.tasks(r) == [live]
        assert [t["id"] for t in await listed()] == [f"{r}/m1.c1"]
        # Deleting the run deletes its task records too.
        deleted = await service.engine.delete(r)
        assert deleted.tasks == 1
        records = task_records(store)
        assert records is not None and await records.list_tasks(r) == []
    finally:
        await store.close()


async def test_the_worker_writes_task_updates_to_the_output_folder_as_the_built_in_does(
    temporal_server: Any, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from steadyrun.background import Materializer

    reg, r = Registry(), f"r{uuid.uuid4().hex[:8]}"
    build = Build(reg)
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [build])
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("started"), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    client = await Client.connect(temporal_server.target)
    queue = f"q-{uuid.uuid4().hex}"
    out = tmp_path / "out"
    app = TemporalApp(
        agents=[agent],
        store=sr.MemoryStore(),
        options=TemporalOptions(task_queue=queue, heartbeat_timeout=timedelta(seconds=2)),
        background=[build],
        task_output_dir=out,
    )
    runs = app.runs(client)
    async with app.worker(client):
        await runs.start("a", run_id=r, input="build")

        async def adopted() -> bool:
            return [t.id for t in await runs.tasks(r)] == [f"{r}/m1.c1"]

        await bg_engines.eventually(adopted, "the build was adopted")
        reg.gate(f"{r}/m1.c1").set()
        assert (await runs.result(r)).status == "completed"
    # The same file the built-in TaskManager(output_dir=...) writes: each event id once.
    path = Materializer(out).path(f"{r}/m1.c1")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"event_id": "e1", "kind": "log", "data": "cloning"},
        {"event_id": "e2", "kind": "log", "data": "compiling"},
    ]


@sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Ship it?"), concurrency_key="")
def ship(what: str) -> str:
    """Ship something (after a person approves).

    Args:
        what: What to ship.
    """
    return f"shipped {what}"


async def test_the_tasks_of_a_cancelled_run_end_cancelled_and_are_recorded(
    temporal_server: Any, tmp_path: Path
) -> None:
    # As the built-in engine's cancel asks its tasks to stop: each ends cancelled, its
    # operation stopped, and is listed so once the workflow closed.
    opener = bg_engines.on_temporal(temporal_server, tmp_path, extra_tools=[ship])
    reg, r = Registry(), bg_engines.run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(
                ("build", {"repo": "shop"}), ("build", {"repo": "app"}), ("ship", {"what": "app"})
            )
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")

        async def waiting() -> bool:
            decisions = [i for i in await session.pending(r) if i.kind == "decision"]
            return bool(decisions) and len(await session.tasks(r)) == 2

        await bg_engines.eventually(waiting, "the run waits for a decision, two tasks going")
        await session.runs.cancel(r)
        with pytest.raises(sr.RunCancelledError):
            await session.runs.result(r)
        history = await session.runs.client.get_workflow_handle(r).fetch_history()
        await session.app.replayer().replay_workflow(history)
        listed = await session.tasks(r)  # the workflow closed: from the records
    assert sorted(reg.stops) == [f"{r}/m1.c1", f"{r}/m1.c2"]
    assert [(t.id, t.status, t.error, t.notified) for t in listed] == [
        (f"{r}/m1.c1", "cancelled", "cancelled", True),
        (f"{r}/m1.c2", "cancelled", "cancelled", True),
    ]


@pytest.mark.parametrize(
    ("name", "run_id"),
    [
        ("bg_task_ended_before_records.json", "before-records-ended"),
        ("bg_task_cancel_before_records.json", "before-records-cancel"),
    ],
)
async def test_histories_from_before_task_records_replay(name: str, run_id: str) -> None:
    """Recorded by the release before (7294c5c): a task that ended and was announced; a
    cancel with two tasks going, which ended the workflow at once. Neither recorded a task,
    nor waited for the tasks to end: behind the patch, they replay as they ran."""
    from temporalio.client import WorkflowHistory

    reg = Registry()
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [Build(reg)])
    model = ScriptedModel([])
    agent = sr.Agent(name="a", model=model, tools=[*manager.tools(), ship])
    app = TemporalApp(agents=[agent], store=sr.MemoryStore(), background=[Build(reg)])
    history = WorkflowHistory.from_json(run_id, (DATA / name).read_text())
    await app.replayer().replay_workflow(history)


async def test_a_run_cancelled_during_a_model_call_with_tasks_going_ends_cancelled(
    temporal_server: Any, tmp_path: Path
) -> None:
    # The model call's cancelled activity is the run's cancel, not a failed model call
    # (which left the workflow waiting for its tasks, its cancel spent).
    import asyncio

    thinking = asyncio.Event()

    async def think(request: Any) -> Any:
        thinking.set()
        await asyncio.Event().wait()  # until the cancel stops the model activity

    opener = bg_engines.on_temporal(temporal_server, tmp_path)
    reg, r = Registry(), bg_engines.run_id_for(opener)
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), think])
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")

        async def going() -> bool:
            return thinking.is_set() and len(await session.tasks(r)) == 1

        await bg_engines.eventually(going, "a task going and the next model call in flight")
        await session.runs.cancel(r)
        with pytest.raises(sr.RunCancelledError):
            await asyncio.wait_for(session.runs.result(r), 120)  # a cap, not a limit
        history = await session.runs.client.get_workflow_handle(r).fetch_history()
        await session.app.replayer().replay_workflow(history)
        listed = await session.tasks(r)
        snap = await session.store.load(r)
    assert reg.stops == [f"{r}/m1.c1"]
    assert [(t.status, t.error) for t in listed] == [("cancelled", "cancelled")]
    assert snap is not None and snap.run.status == "cancelled"
