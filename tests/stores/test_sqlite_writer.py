"""SqliteStore's writer: a write group's statements on the loop, only its COMMIT on a thread.

Issue 20: no thread hop per statement. The statements of a write run on the event loop on the
writer's own connection; its ``COMMIT`` (the fsync) runs on the writer's thread. When another
process holds the file's write lock, the whole write waits for it on that thread instead, and
the loop goes on meanwhile. Reads between writes use the idle writer's connection on the loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import Message, TextPart
from steadyrun.records import CallRecord, Checkpoint, ContextChange, RunRecord, Step


def _step(run_id: str) -> Step:
    run = RunRecord(run_id=run_id, agent="a", steps=1)
    hello = Message(role="user", parts=[TextPart(text=f"hello {run_id}")])
    return Step(
        run=run,
        checkpoint=Checkpoint(context_length=1),
        context=ContextChange(append=[hello], start=0),
    )


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def _traced(store: sr.SqliteStore, seen: list[tuple[str, str]]) -> None:
    """Record each statement of the writer's connection with the thread that ran it."""

    def trace(sql: str) -> None:
        seen.append((sql.split(None, 1)[0].upper(), threading.current_thread().name))

    await store._db.write(lambda conn: conn.set_trace_callback(trace))


async def test_a_write_runs_its_statements_on_the_loop_and_its_commit_on_the_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await store.save_step("r", _step("r"))  # opens the writer's connection
        seen: list[tuple[str, str]] = []
        await _traced(store, seen)
        seen.clear()
        await store.save_call("r", CallRecord(id="c1", rev=1, name="t", status="running"))
        one_write = list(seen)
        await store._db.write(lambda conn: conn.set_trace_callback(None))
    here = threading.current_thread().name
    verbs = [verb for verb, _ in one_write]
    assert verbs[0] == "BEGIN" and verbs[-1] == "COMMIT" and "INSERT" in verbs, verbs
    assert {thread for _, thread in one_write[:-1]} == {here}  # every statement on the loop
    commit_thread = one_write[-1][1]
    assert commit_thread != here and commit_thread.startswith("steadyrun-sqlite-writer")
    assert _rows(path, "SELECT status FROM calls") == [("running",)]


async def test_reads_between_writes_and_a_failed_write_need_no_thread(tmp_path: Path) -> None:
    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        await store.save_step("r", _step("r"))
        before = store._db.hand_offs
        assert (await store.load("r")) is not None
        assert await store.pending("r", 0) == 0
        assert [s.run_id for s in await store.list_runs()] == ["r"]
        with pytest.raises(sr.StoreError, match="unknown run"):
            # alone in its group: rolled back on the loop, nothing to commit
            await store.save_call("nobody", CallRecord(id="c1", rev=1, name="t"))
        assert store._db.hand_offs == before
        await store.save_call("r", CallRecord(id="c1", rev=1, name="t", status="running"))
        assert store._db.hand_offs == before + 1  # the commit


_HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("INSERT INTO runs (run_id, agent, status, steps, record, checkpoint)"
             " VALUES ('other', 'a', 'running', 0, x'', x'')")
conn.execute("COMMIT")
print("released", flush=True)
"""


async def test_a_write_waits_for_another_process_lock_on_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await store.save_step("r", _step("r"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _HOLD,
            str(path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert await proc.stdout.readline() == b"locked\n"
            threads: list[str] = []

            def write(conn: sqlite3.Connection) -> None:
                threads.append(threading.current_thread().name)
                conn.execute("UPDATE runs SET status = 'suspended' WHERE run_id = 'r'")

            waiting = asyncio.ensure_future(store._db.write(write))
            queued = asyncio.ensure_future(store.save_step("s", _step("s")))
            for _ in range(5):  # the loop goes on while the write waits for the lock
                await asyncio.sleep(0.01)
            assert not waiting.done() and not queued.done()
            # A read does not wait for the lock either (WAL: readers never wait for a writer).
            assert await store.pending("r", 0) == 0
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            await asyncio.gather(waiting, queued)
            assert await proc.stdout.readline() == b"released\n"
        finally:
            if proc.returncode is None:
                proc.stdin.close()
                await proc.wait()
        assert threads and threads[0].startswith("steadyrun-sqlite-writer")
        runs = dict(_rows(path, "SELECT run_id, status FROM runs"))  # type: ignore[arg-type]
        assert runs == {"r": "suspended", "s": "running", "other": "running"}
        # The lock is free again: the next write's statements run on the loop once more.
        seen: list[tuple[str, str]] = []
        await _traced(store, seen)
        seen.clear()
        await store.save_step("t", _step("t"))
        await store._db.write(lambda conn: conn.set_trace_callback(None))
        assert seen[0] == ("BEGIN", threading.current_thread().name)


async def test_without_wal_every_write_group_stays_on_the_writer_thread(tmp_path: Path) -> None:
    # Without WAL a COMMIT may have to wait for readers: no transaction is left open on the
    # loop, and the writer's thread waits with the connection's own busy timeout.
    from steadyrun._sqlite_thread import SqliteThread

    path = tmp_path / "plain.db"

    def open_plain() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("CREATE TABLE IF NOT EXISTS t (a INTEGER)")
        return conn

    db = SqliteThread(open_plain, "test", "steadyrun-sqlite")
    try:
        threads: list[str] = []

        def insert(conn: sqlite3.Connection) -> None:
            threads.append(threading.current_thread().name)
            conn.execute("INSERT INTO t VALUES (1)")

        for _ in range(3):
            await db.write(insert)
        assert all(t.startswith("steadyrun-sqlite-writer") for t in threads), threads
        assert await db.read(lambda conn: conn.execute("SELECT count(*) FROM t").fetchone()[0]) == 3
    finally:
        await db.close()
