"""Group commit of SqliteStore: the writes of concurrent runs share one transaction and fsync.

The file's write lock is held by another connection while the writes queue up: the first
finds the file locked and waits for it on the writer's thread, and the others join its group,
so they form one group for sure; then one failing job must leave the others committed, and
every caller must find its data in the file (read through a second connection) once its
await returns.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import Message, TextPart
from steadyrun.records import CallRecord, Checkpoint, ContextChange, RunRecord, Step


def _step(run_id: str, *, start: int = 0, calls: list[CallRecord] | None = None) -> Step:
    run = RunRecord(run_id=run_id, agent="a", steps=1)
    hello = Message(role="user", parts=[TextPart(text=f"hello {run_id}")])
    return Step(
        run=run,
        checkpoint=Checkpoint(context_length=start + 1),
        context=ContextChange(append=[hello], start=start),
        calls=calls or [],
    )


async def _held(store: sr.SqliteStore) -> tuple[threading.Event, asyncio.Future[None]]:
    """Hold the file's write lock until the event is set (writes queue up meanwhile)."""
    await store.save_step("opened", _step("opened"))  # the writer's connection is open
    release = threading.Event()
    locked = threading.Event()

    def hold() -> None:
        with sqlite3.connect(store.path, isolation_level=None) as conn:
            conn.execute("BEGIN IMMEDIATE")
            locked.set()
            release.wait(10)
            conn.execute("ROLLBACK")

    held = asyncio.ensure_future(asyncio.to_thread(hold))
    await asyncio.to_thread(locked.wait, 10)
    return release, held


async def _queued(store: sr.SqliteStore, count: int) -> None:
    """Until ``count`` writes wait behind the one waiting for the lock (none is answered)."""
    for _ in range(1000):
        if len(store._db._queued) >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{len(store._db._queued)} writes queued, not {count}")


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """What another connection sees in the file: what was committed."""
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def test_queued_writes_of_many_runs_share_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        release, held = await _held(store)
        before = store._db.commits
        saves = [asyncio.ensure_future(store.save_step(f"r{i}", _step(f"r{i}"))) for i in range(8)]
        await _queued(store, 7)
        assert not any(s.done() for s in saves)  # nobody is answered before the commit
        release.set()
        await asyncio.gather(held, *saves)
        assert store._db.commits == before + 1
        assert store._db.max_group == 8
        assert len(_rows(path, "SELECT run_id FROM runs WHERE run_id != 'opened'")) == 8


async def test_a_failing_job_does_not_take_the_others_down(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        release, held = await _held(store)
        good = [asyncio.ensure_future(store.save_step(f"r{i}", _step(f"r{i}"))) for i in range(3)]
        # A context append with a gap is refused inside its transaction, after it wrote the
        # run row and its call: its savepoint must take those back, and only those.
        bad_call = CallRecord(id="c1", rev=1, name="t")
        bad = asyncio.ensure_future(store.save_step("bad", _step("bad", start=5, calls=[bad_call])))
        more = [asyncio.ensure_future(store.save_step(f"s{i}", _step(f"s{i}"))) for i in range(3)]
        orphan = asyncio.ensure_future(store.save_call("nobody", bad_call))  # unknown run
        await _queued(store, 7)
        release.set()
        await asyncio.gather(held, *good, *more)
        with pytest.raises(sr.StoreError, match="gap"):
            await bad
        with pytest.raises(sr.StoreError, match="unknown run"):
            await orphan
        assert store._db.max_group == 8
        runs = sorted(r[0] for r in _rows(path, "SELECT run_id FROM runs WHERE run_id != 'opened'"))
        assert runs == ["r0", "r1", "r2", "s0", "s1", "s2"]
        assert _rows(path, "SELECT call_id FROM calls") == []
        assert await store.load("bad") is None


async def test_each_write_is_in_the_file_when_its_await_returns(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:

        async def one(i: int) -> None:
            run_id = f"r{i}"
            await store.save_step(run_id, _step(run_id))
            assert _rows(path, f"SELECT run_id FROM runs WHERE run_id = '{run_id}'") != []
            call = CallRecord(id="c1", rev=1, name="t", status="running")
            await store.save_call(run_id, call)
            found = _rows(path, f"SELECT status FROM calls WHERE run_id = '{run_id}'")
            assert found == [("running",)]

        await asyncio.gather(*(one(i) for i in range(20)))
        assert store.synchronous == "FULL"
        # Concurrent runs did share commits (20 runs, 40 writes).
        assert store._db.commits < 40


async def test_a_write_whose_caller_stopped_waiting_still_commits(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        release, held = await _held(store)
        save = asyncio.ensure_future(store.save_step("r", _step("r")))
        await asyncio.sleep(0)
        save.cancel()
        release.set()
        await held
        # Reads do not queue behind writes: wait for the writer first (a write queues behind).
        await store._db.write(lambda conn: None)
        assert await store.load("r") is not None  # like a thread call: the write went on


async def test_a_read_that_finds_the_file_locked_waits_on_the_thread(tmp_path: Path) -> None:
    # Reads run on the loop with a busy timeout of 0; one that finds the file locked (another
    # process mid-checkpoint, say) is done again on the thread, which may wait for the lock.
    import sqlite3
    import threading

    from steadyrun._sqlite_thread import SqliteThread

    path = tmp_path / "runs.db"
    db = SqliteThread(
        lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False),
        "test",
        "steadyrun-sqlite",
        open_reader=lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False),
    )
    try:
        where: list[str] = []

        def read(conn: sqlite3.Connection) -> str:
            where.append(threading.current_thread().name)
            if len(where) == 1:
                busy = sqlite3.OperationalError("database is locked")
                busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
                raise busy
            return str(conn.execute("SELECT 'read'").fetchone()[0])

        assert await db.read(read) == "read"
        assert where[0] == threading.current_thread().name  # first on the loop
        assert where[1].startswith("steadyrun-sqlite")  # then on the store's thread
    finally:
        await db.close()
