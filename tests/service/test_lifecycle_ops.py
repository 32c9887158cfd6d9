"""Deleting runs, exporting and importing them, and the worker's retention policy.

Operations-level: one call deletes a run tree with its background tasks; a run another
executor holds is refused; an export imported into another store goes on there; the worker
deletes finished runs past their retention and gives SQLite's space back.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lifecyclekit as kit
import pgkit
import steadyrun as sr
from steadyrun import ConflictError, RunBusyError, RunNotFoundError, UsageError
from steadyrun.background import (
    MemoryTaskStore,
    PostgresTaskStore,
    SqliteTaskStore,
    Task,
    TaskStore,
)
from steadyrun.runtime._claims import owner_id
from steadyrun.service import Operations, Retention, Worker
from steadyrun.stores import SqliteStore, Store
from steadyrun.testing.conformance import expect_same_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _task(run_id: str, call_id: str, **fields: object) -> Task:
    return Task(
        id=f"{run_id}/{call_id}",
        run_id=run_id,
        call_id=call_id,
        tool="build",
        arguments="{}",
        **fields,  # type: ignore[arg-type]
    )


async def _ops(store: Store, tasks: TaskStore | None = None) -> Operations:
    return Operations(sr.Runtime(store, agents=[kit.agent()]), tasks=tasks)


async def test_delete_removes_the_run_its_sub_agent_runs_and_tasks_in_one_call() -> None:
    store, tasks = sr.MemoryStore(), MemoryTaskStore()
    ops = await _ops(store, tasks)
    await kit.start(ops.runtime, "r1")
    await kit.start(ops.runtime, "r2")
    await tasks.insert(_task("r1", "m9.c1", status="completed"))
    await tasks.insert(_task("r1/m1.c1", "m1.c1", status="completed"))  # a sub-agent's task
    await tasks.insert(_task("r2", "m9.c1", status="completed"))
    deleted = await ops.delete("r1")
    assert deleted.runs == ["r1", "r1/m1.c1"] and deleted.tasks == 2 and deleted.found
    assert deleted.messages == 2  # the run's input and its sub-agent's task
    assert store.run_ids() == ["r2", "r2/m1.c1"]
    assert [t.id for t in await tasks.list_tasks("r2")] == ["r2/m9.c1"]
    assert await tasks.get("r1/m9.c1") is None and await tasks.get("r1/m1.c1/m1.c1") is None
    # Deleting again finds nothing, and says so; the id starts a new run.
    again = await ops.delete("r1")
    assert not again.found and again.runs == [] and again.tasks == 0
    assert (await ops.start("r1", "shipper", "a lamp")).created


async def test_a_run_another_executor_holds_is_not_deleted() -> None:
    store = sr.MemoryStore()
    ops = await _ops(store)
    await kit.start(ops.runtime, "r1")
    lease = await store.leases.acquire("r1", "elsewhere:1:abc", 30)
    assert lease is not None
    with pytest.raises(RunBusyError) as raised:
        await ops.delete("r1")
    assert raised.value.owner == "elsewhere:1:abc"
    assert store.run_ids() == ["r1", "r1/m1.c1"]
    await store.leases.release(lease)
    assert (await ops.delete("r1")).runs == ["r1", "r1/m1.c1"]


async def test_a_claim_of_a_dead_process_does_not_hold_a_delete_back() -> None:
    store = sr.MemoryStore()
    ops = await _ops(store)
    await kit.start(ops.runtime, "r1")
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()  # reaped: its pid names no process now
    dead = owner_id("gone").replace(f":{os.getpid()}:", f":{child.pid}:")
    assert await store.leases.acquire("r1", dead, 30) is not None
    assert (await ops.delete("r1")).runs == ["r1", "r1/m1.c1"]
    assert await store.leases.holder("r1") is None


async def test_a_sub_agent_run_is_deleted_with_its_run_only() -> None:
    ops = await _ops(sr.MemoryStore())
    await kit.start(ops.runtime, "r1")
    with pytest.raises(UsageError, match="delete its run 'r1'"):
        await ops.delete("r1/m1.c1")


async def test_a_task_running_in_a_worker_holds_the_delete_back_and_is_asked_to_stop() -> None:
    store, tasks = sr.MemoryStore(), MemoryTaskStore()
    ops = await _ops(store, tasks)
    await kit.start(ops.runtime, "r1")
    until = datetime.now(UTC) + timedelta(minutes=1)
    await tasks.insert(_task("r1", "m9.c1", owner="worker-7", lease_until=until))
    with pytest.raises(RunBusyError) as raised:
        await ops.delete("r1")
    assert raised.value.owner == "worker-7"
    stored = await tasks.get("r1/m9.c1")
    assert stored is not None and stored.cancel_requested
    assert store.run_ids() == ["r1", "r1/m1.c1"]
    # Once its worker recorded the end, the delete goes through.
    await tasks.record("r1/m9.c1", "worker-7", until, sr.background.Outcome(status="cancelled"))
    assert (await ops.delete("r1")).tasks == 1


async def test_the_successor_claim_goes_with_the_run() -> None:
    store = sr.MemoryStore()
    ops = await _ops(store)
    await kit.start(ops.runtime, "r1")
    await kit.finish(ops.runtime, "r1")
    await ops.continue_run("r1", "r1-next", "a lamp")
    await ops.delete("r1")
    await kit.start(ops.runtime, "r1")
    await kit.finish(ops.runtime, "r1")
    # The old successor claim is gone: "r1" (a new run) may be continued by another run.
    assert (await ops.continue_run("r1", "r1-other", "a chair")).created


async def test_export_and_import_between_stores(tmp_path: Path) -> None:
    source = await _ops(SqliteStore(tmp_path / "a.db"))
    target = await _ops(sr.MemoryStore())
    try:
        await kit.start(source.runtime, "r1")
        doc = await source.export_run("r1")
        imported = await target.import_run(doc)
        assert imported.run_id == "r1" and imported.runs == ["r1", "r1/m1.c1"]
        await expect_same_run(source.store, target.store, "r1")
        with pytest.raises(ConflictError):
            await target.import_run(doc)
        done = await kit.finish(target.runtime, "r1")
        assert done.status == "completed" and done.text == "done: a book"
        with pytest.raises(RunNotFoundError):
            await source.export_run("nobody")
        with pytest.raises(UsageError, match="sub-agent run"):
            await source.export_run("r1/m1.c1")
    finally:
        await source.store.close()


async def test_retention_deletes_finished_runs_past_their_time_only() -> None:
    now = [T0]
    store = sr.MemoryStore()
    runtime = sr.Runtime(store, agents=[kit.agent()], clock=lambda: now[0])
    ops = Operations(runtime, clock=lambda: now[0])
    for run_id in ("old-done", "old-failed", "old-waiting", "new-done"):
        await kit.start(ops.runtime, run_id)
    await kit.finish(ops.runtime, "old-done")
    await ops.cancel("old-failed")
    now[0] = T0 + timedelta(days=40)
    await kit.finish(ops.runtime, "new-done")
    policy = Retention(older_than=timedelta(days=30))
    done = await ops.apply_retention(policy, now=now[0])
    assert done.deleted == ["old-done", "old-failed"]
    assert sorted(store.run_ids()) == sorted(
        ["old-waiting", "old-waiting/m1.c1", "new-done", "new-done/m1.c1"]
    )
    assert (await ops.apply_retention(policy, now=now[0])).deleted == []
    suspended = replace(policy, statuses=("suspended",))
    assert (await ops.apply_retention(suspended, now=now[0])).deleted == ["old-waiting"]


async def test_retention_skips_a_run_another_executor_holds() -> None:
    store = sr.MemoryStore()
    now = [T0]
    ops = Operations(sr.Runtime(store, agents=[kit.agent()], clock=lambda: now[0]))
    for run_id in ("a", "b"):
        await kit.start(ops.runtime, run_id)
        await kit.finish(ops.runtime, run_id)
    assert await store.leases.acquire("a", "elsewhere:1:x", 30) is not None
    policy = Retention(older_than=timedelta(days=1))
    done = await ops.apply_retention(policy, now=T0 + timedelta(days=2))
    assert done.deleted == ["b"] and done.busy == ["a"]


async def test_the_worker_applies_retention_and_sqlite_gives_the_space_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path, synchronous="OFF")
    tasks = SqliteTaskStore(tmp_path / "tasks.db")
    now = [T0]
    runtime = sr.Runtime(store, agents=[kit.agent()], clock=lambda: now[0])
    try:
        big = "x" * 20_000  # each run's input: the file grows by megabytes
        for i in range(60):
            await kit.start(runtime, f"r{i}", item=f"{i} {big}")
            await kit.finish(runtime, f"r{i}")
        await tasks.insert(_task("r0", "m9.c1", status="completed"))
        await store.reclaim()  # only the WAL: what is on disk now
        before = path.stat().st_size
        now[0] = T0 + timedelta(days=31)
        policy = Retention(older_than=timedelta(days=30), every=0.05)
        worker = Worker(runtime, retention=policy, tasks=tasks, poll=0.05)
        running = asyncio.create_task(worker.run())
        # Wait for the whole pass: the runs gone AND the space given back (the worker reclaims
        # after it deletes; stopping it as soon as the list was empty raced that step) AND the
        # pass counted (the file shrinks inside reclaim, a thread hop before the pass ends:
        # stopping the worker in between cancelled the pass before it was counted).
        for _ in range(400):
            if (
                not await store.list_runs(limit=1)
                and path.stat().st_size < before / 4
                and worker.stats.retained >= 60
            ):
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await running
        assert await store.list_runs(limit=1) == []
        assert await tasks.get("r0/m9.c1") is None
        after = path.stat().st_size
        assert after < before / 4, (before, after)
        assert worker.stats.retained >= 60
    finally:
        await store.close()
        await tasks.close()


async def test_the_worker_counts_a_retired_run_when_it_is_deleted_not_when_its_pass_ends(
    tmp_path: Path,
) -> None:
    # The pass reclaims SQLite's space after its deletions: a run already gone read as not
    # retained until then (the Temporal engine's count failed a CI run this way).
    reclaiming, reclaim = asyncio.Event(), asyncio.Event()

    class SlowReclaim(SqliteStore):
        async def reclaim(self) -> Any:
            reclaiming.set()
            await reclaim.wait()
            return await super().reclaim()

    store = SlowReclaim(tmp_path / "runs.db", synchronous="OFF")
    now = [T0]
    runtime = sr.Runtime(store, agents=[kit.agent()], clock=lambda: now[0])
    try:
        await kit.start(runtime, "r1")
        await kit.finish(runtime, "r1")
        now[0] = T0 + timedelta(days=31)
        worker = Worker(runtime, retention=Retention(older_than=timedelta(days=30)), poll=0.05)
        running = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(reclaiming.wait(), 30)
            assert await store.load("r1") is None
            assert worker.stats.retained == 1  # counted while the pass still reclaims
        finally:
            reclaim.set()
            worker.stop()
            await running
        assert worker.stats.retained == 1
    finally:
        await store.close()


pg_dsn = pgkit.database_fixture()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_task_stores_delete_the_tasks_of_a_run_tree_only(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tasks: TaskStore
    if kind == "memory":
        tasks = MemoryTaskStore()
    elif kind == "sqlite":
        tasks = SqliteTaskStore(tmp_path / "tasks.db")
    else:
        tasks = PostgresTaskStore(request.getfixturevalue("pg_dsn"), schema="tasks_delete")
    try:
        # Neighbours a prefix match would take along: "r1x", "r10", "r1-a" ("-" sorts before
        # "/"), "r1_" ("_" matches any character in LIKE).
        for run_id in ("r1", "r1/m1.c1", "r1/m1.c1/k1", "r1x", "r10", "r1-a", "r1_"):
            await tasks.insert(_task(run_id, "c"))
        await tasks.add_update("r1/c", sr.background.Update(event_id="e1", data="hi"))
        await tasks.add_update("r10/c", sr.background.Update(event_id="e1", data="hi"))
        assert await tasks.delete_run_tasks("r1") == 3
        assert await tasks.delete_run_tasks("r1") == 0
        for run_id in ("r1", "r1/m1.c1", "r1/m1.c1/k1"):
            assert await tasks.list_tasks(run_id) == []
        assert await tasks.updates("r1/c") == []
        for run_id in ("r1x", "r10", "r1-a", "r1_"):
            assert [t.id for t in await tasks.list_tasks(run_id)] == [f"{run_id}/c"]
        assert [u.event_id for u in await tasks.updates("r10/c")] == ["e1"]
    finally:
        await tasks.close()
