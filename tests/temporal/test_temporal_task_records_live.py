"""Background tasks of Temporal runs are in the app's store as they start and progress.

As on the built-in engine, whose ``TaskManager`` writes a task when it is adopted and each
update as it comes: the workflow queues the adopted task (running) for the record activity
it already runs, and the ``steadyrun.background`` activity writes the operation's updates to
the task tables as it heartbeats (no workflow event for them). A task going when its
workflow is terminated stays in the store as it was; the load that starts the run's next
workflow run settles it as the built-in engine settles a task lost with its worker.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import bg_engines  # noqa: E402

from bgkit import Build, Registry  # noqa: E402
from steadyrun._codec import to_plain  # noqa: E402
from steadyrun.background import MemoryTaskStore, Task, Update  # noqa: E402
from steadyrun.records import Checkpoint, RunRecord, Step  # noqa: E402
from steadyrun.stores import MemoryStore, SqliteStore  # noqa: E402
from steadyrun.temporal import TemporalApp  # noqa: E402
from steadyrun.temporal._activities import Activities  # noqa: E402
from steadyrun.temporal._payloads import RecordInput, RecordOp  # noqa: E402
from steadyrun.temporal._taskrecords import HELD_UNTIL, task_op_data, task_records  # noqa: E402
from steadyrun.testing import ScriptedModel, text, tool_calls  # noqa: E402

_NOW = datetime(2026, 1, 1, tzinfo=UTC)
_LATER = _NOW + timedelta(days=365 * 50)


async def test_a_task_is_in_the_store_as_it_runs_and_stays_when_its_workflow_is_terminated(
    temporal_server: Any, tmp_path: Path
) -> None:
    opener = bg_engines.on_temporal(temporal_server, tmp_path)
    reg, r = Registry(), bg_engines.run_id_for(opener)
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("started"), text("more")])
    async with opener(model, [Build(reg)]) as session:
        records = task_records(session.store)
        assert records is not None
        await session.start(r, "go")
        task_id = f"{r}/m1.c1"

        async def stored_going() -> bool:
            task = await records.get(task_id)
            kept = [u.event_id for u in await records.updates(task_id)]
            return task is not None and task.status == "running" and kept == ["e1", "e2"]

        await bg_engines.eventually(stored_going, "the task in the store, running, its updates")
        # No built-in worker sharing the tables takes it over (the workflow owns it).
        assert await records.claimable(datetime.now(UTC) + timedelta(days=1), 10) == []
        assert await records.unnotified(10) == []
        handle = session.runs.client.get_workflow_handle(r)
        await handle.terminate("test")
        (left,) = await session.runs.tasks(r)  # the workflow closed: from the records
        assert (left.id, left.status, left.description) == (task_id, "running", "build shop")
        assert [u.data for u in await records.updates(task_id)] == ["cloning", "compiling"]

        async def stopped() -> bool:
            return reg.stops == [task_id]

        # Its activity's next heartbeat finds the workflow gone: the operation is stopped.
        await bg_engines.eventually(stopped, "the operation stopped")
        history = await handle.fetch_history()
        await session.app.replayer().replay_workflow(history)
        # The next turn's load settles it as a task lost with its worker (the tool's traits).
        await session.runs.send(r, "and now?")

        async def settled() -> bool:
            task = await records.get(task_id)
            return task is not None and task.final

        await bg_engines.eventually(settled, "the task settled by the next workflow run")
        (done,) = await session.runs.tasks(r)
    assert (done.status, done.needs_review, done.notified) == ("failed", True, True)
    assert done.error is not None and "may or may not have taken effect" in done.error


def _task(status: str = "running", **changes: Any) -> Task:
    return Task(
        id="r/m1.c1",
        run_id="r",
        call_id="m1.c1",
        tool="build",
        arguments='{"repo": "shop"}',
        description="build shop",
        status=status,  # type: ignore[arg-type]
        started=True,
        created_at=_NOW,
        updated_at=_NOW,
        **changes,
    )


async def test_a_running_record_never_replaces_an_ended_one_and_load_settles_a_running_one(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    try:
        reg = Registry()
        activities = Activities(TemporalApp(agents=[], store=store, background=[Build(reg)]))
        record = RunRecord(run_id="r", agent="a", status="completed")
        run = Step(run=record, checkpoint=Checkpoint())
        ended = _task("completed", output={"built": "r/m1.c1"}, notified=True)
        ops = [
            RecordOp(op="save_step", data=to_plain(run, Step)),
            RecordOp(op="task", data=task_op_data(ended, [])),
            RecordOp(op="task", data=task_op_data(_task(), [Update(event_id="e1", data="x")])),
        ]
        await activities.record(RecordInput(run_id="r", ops=ops))
        records = task_records(store)
        assert records is not None
        assert await records.list_tasks("r") == [ended]
        # A running task left by a workflow that went away: settled by the next load.
        await records.modify("r/m1.c1", lambda _: _task(owner="temporal:r", lease_until=_LATER))
        loaded = await activities.load("r")
        assert loaded.carried is not None
        (given,) = loaded.carried.tasks
        (stored,) = await records.list_tasks("r")
        assert (stored.status, stored.needs_review, stored.notified) == ("failed", True, True)
        assert (stored.owner, stored.lease_until) == (None, None)
        assert given["status"] == "failed"
    finally:
        await store.close()


class _OwnStore(MemoryStore):
    """A store that says where its runs' tasks are recorded (as a store of your own kind may)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = MemoryTaskStore()

    def task_store(self) -> MemoryTaskStore:
        return self.tasks


async def test_a_store_that_gives_its_task_store_records_tasks_there() -> None:
    store = _OwnStore()
    assert task_records(store) is store.tasks
    activities = Activities(TemporalApp(agents=[], store=store, background=[Build(Registry())]))
    record = RunRecord(run_id="r", agent="a", status="completed")
    ops = [
        RecordOp(op="save_step", data=to_plain(Step(run=record, checkpoint=Checkpoint()), Step)),
        RecordOp(op="task", data=task_op_data(_task(), [], held_by="r")),
    ]
    await activities.record(RecordInput(run_id="r", ops=ops))
    (going,) = await store.tasks.list_tasks("r")
    assert (going.status, going.owner, going.lease_until) == ("running", "temporal:r", HELD_UNTIL)
    assert await store.tasks.claimable(_LATER, 10) == []
