"""Every task store keeps the same contract: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import pgkit
import steadyrun as sr
from steadyrun.background import MemoryTaskStore, Outcome, Task, TaskInput, TaskStore, Update
from steadyrun.background._sql import PostgresTaskStore, SqliteTaskStore

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
LEASE = timedelta(seconds=10)


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    with pgkit.fresh_database_sync("steadyrun_tasks") as dsn:
        yield dsn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def tasks(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    made: TaskStore
    if request.param == "memory":
        made = MemoryTaskStore()
    elif request.param == "sqlite":
        made = SqliteTaskStore(tmp_path / "tasks.db")
    else:
        dsn = request.getfixturevalue("pg_database")
        made = PostgresTaskStore(dsn, schema=f"t_{uuid.uuid4().hex[:12]}")
    try:
        yield made
    finally:
        await made.close()


def new_task(task_id: str = "r/m1.c1", **kw: object) -> Task:
    return Task(
        id=task_id,
        run_id="r",
        call_id="m1.c1",
        tool="build",
        arguments='{"repo": "x"}',
        created_at=NOW,
        **kw,  # type: ignore[arg-type]
    )


async def test_insert_is_idempotent_and_lists_by_run(tasks: TaskStore) -> None:
    first = await tasks.insert(new_task(description="one"))
    again = await tasks.insert(new_task(description="two"))
    assert first.description == again.description == "one"
    await tasks.insert(new_task("r/m2.c1"))
    await tasks.insert(Task(id="s/x", run_id="s", call_id="x", tool="b", arguments="{}"))
    assert [t.id for t in await tasks.list_tasks("r")] == ["r/m1.c1", "r/m2.c1"]
    assert await tasks.get("nope") is None


async def test_claims_lease_and_fence(tasks: TaskStore) -> None:
    await tasks.insert(new_task())
    (a,) = await tasks.claim("A", NOW, LEASE)
    assert a.owner == "A" and a.attempt == 1
    assert await tasks.claim("B", NOW + timedelta(seconds=5), LEASE) == []  # lease is live
    assert await tasks.renew(a.id, "A", NOW + timedelta(seconds=20))
    assert await tasks.claim("B", NOW + timedelta(seconds=15), LEASE) == []
    (b,) = await tasks.claim("B", NOW + timedelta(seconds=25), LEASE)
    assert b.owner == "B" and b.attempt == 2
    later = NOW + timedelta(seconds=26)
    assert not await tasks.renew(a.id, "A", later + LEASE)
    assert not await tasks.record(a.id, "A", later, Outcome(status="completed", output="A"))
    assert not await tasks.save_checkpoint(a.id, "A", {"x": 1})
    assert await tasks.save_checkpoint(a.id, "B", {"x": 2})
    assert await tasks.record(a.id, "B", later, Outcome(status="completed", output="B"))
    done = await tasks.get(a.id)
    assert done is not None and done.output == "B" and done.checkpoint == {"x": 2}
    assert done.final and done.owner is None
    assert await tasks.claim("C", later + LEASE * 3, LEASE) == []  # final: never claimed


async def test_waiting_tasks_are_claimable_once_answered_exactly_once(tasks: TaskStore) -> None:
    await tasks.insert(new_task())
    (a,) = await tasks.claim("A", NOW, LEASE)
    question = TaskInput(wait_id="w1", prompt="which?", response_schema={"type": "string"})
    waiting = Outcome(status="waiting_input", input=question, checkpoint={"asked": True})
    assert await tasks.record(a.id, "A", NOW, waiting)
    assert await tasks.claim("B", NOW + LEASE * 2, LEASE) == []  # nobody can work on it
    with pytest.raises(sr.UsageError):
        await tasks.answer("unknown", "w1", "x", NOW)
    assert not await tasks.answer(a.id, "forged", "x", NOW)
    assert await tasks.answer(a.id, "w1", "blue", NOW)
    assert not await tasks.answer(a.id, "w1", "red", NOW)
    (b,) = await tasks.claim("B", NOW, LEASE)
    assert b.input is not None and b.input.answer == "blue" and b.checkpoint == {"asked": True}
    assert await tasks.resumed(b.id, "B", NOW)
    running = await tasks.get(b.id)
    assert running is not None and running.status == "running"


async def test_cancel_and_notification_bookkeeping(tasks: TaskStore) -> None:
    await tasks.insert(new_task())
    cancelled = await tasks.request_cancel("r/m1.c1", NOW)
    assert cancelled is not None and cancelled.cancel_requested
    (a,) = await tasks.claim("A", NOW, LEASE)
    assert a.cancel_requested
    assert await tasks.unnotified(10) == []
    await tasks.record(a.id, "A", NOW, Outcome(status="cancelled", error="cancelled"))
    assert await tasks.unnotified(10) == ["r/m1.c1"]
    assert await tasks.mark_notified("r/m1.c1")
    assert not await tasks.mark_notified("r/m1.c1")
    assert await tasks.unnotified(10) == []


async def test_updates_are_deduplicated_and_ordered(tasks: TaskStore) -> None:
    await tasks.insert(new_task())
    for event in ("e1", "e2", "e1", "e3", "e2"):
        await tasks.add_update("r/m1.c1", Update(event_id=event, data=f"data {event}"))
    assert [u.event_id for u in await tasks.updates("r/m1.c1")] == ["e1", "e2", "e3"]
    assert [u.event_id for u in await tasks.updates("r/m1.c1", last=2)] == ["e2", "e3"]
    with pytest.raises(sr.UsageError):
        await tasks.add_update("r/m1.c1", Update(event_id="big", data="x" * 300_000))


async def test_sqlite_task_tables_of_an_unknown_version_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.insert(new_task())
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE steadyrun_tasks_meta SET version = 99")
    again = SqliteTaskStore(path)
    with pytest.raises(sr.FormatVersionError):
        await again.get("r/m1.c1")
    await again.close()
