"""Several processes opening one new SQLite file at once (chaos: "database is locked").

``PRAGMA journal_mode = WAL`` on a file still in rollback mode needs the file's exclusive lock,
and SQLite does not apply the busy timeout to it: while another connection holds a lock on the
new file (creating it, or switching it to WAL itself) the pragma failed at once with "database
is locked". ``SqliteStore`` now switches only a file not in WAL yet, and retries the switch
until its busy timeout.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import steadyrun as sr
from steadyrun.stores._sqlite_schema import SCHEMA_VERSION

WAL_SWITCH = "PRAGMA journal_mode = WAL"


def _within(seconds: float, check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.005)


def _traced_connect(monkeypatch: pytest.MonkeyPatch, statements: list[str]) -> None:
    """Make every connection opened from now on record the statements it runs."""
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)


async def test_a_file_locked_in_rollback_mode_is_opened_once_the_lock_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    # Another process's connection writing the file still in rollback mode (the default), as
    # one creating it does: switching it to WAL needs that lock to go. (A file with no table
    # yet would make the store wait in ``PRAGMA auto_vacuum`` first, which does wait.)
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE elsewhere (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO elsewhere VALUES (1)")
    statements: list[str] = []
    _traced_connect(monkeypatch, statements)
    async with sr.SqliteStore(db, busy_timeout=30.0) as store:
        opening = asyncio.create_task(store.list_runs())
        # Released only once the store tried the switch under the lock (before the fix that
        # try failed at once, the busy timeout notwithstanding).
        await asyncio.to_thread(
            _within, 30.0, lambda: WAL_SWITCH in statements or opening.done(), "a WAL switch"
        )
        assert not opening.done(), opening.exception() if opening.done() else None
        other.execute("COMMIT")
        assert await opening == []
        await store.save_step("r", _step("r"))
        assert (await store.load("r")) is not None
    other.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


async def test_a_lock_held_past_the_busy_timeout_fails_the_open_clearly(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("CREATE TABLE elsewhere (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO elsewhere VALUES (1)")
    try:
        async with sr.SqliteStore(db, busy_timeout=0.2) as store:
            with pytest.raises(sr.StoreError, match="locked"):
                await store.list_runs()
    finally:
        other.execute("ROLLBACK")
        other.close()


def _step(run_id: str) -> Any:
    from datetime import UTC, datetime

    from steadyrun.records import Checkpoint, RunRecord, Step

    at = datetime(2026, 12, 6, tzinfo=UTC)
    run = RunRecord(run_id=run_id, agent="a", status="running", created_at=at, updated_at=at)
    return Step(run=run, checkpoint=Checkpoint())


# -- several processes, one new file each round ------------------------------------------------

PROCESSES = 4
ROUNDS = 120  # before the fix about 1 round in 70 failed here


def _open_rounds(folder: str, me: int, barrier: Any, errors: Any) -> None:
    """One opener process: each round, open that round's new file when all are ready."""

    async def one(path: Path) -> None:
        async with sr.SqliteStore(path) as store:
            await store.save_step(f"r{me}", _step(f"r{me}"))

    for i in range(ROUNDS):
        barrier.wait(timeout=120)
        try:
            asyncio.run(one(Path(folder) / f"round-{i}.db"))
        except Exception as exc:
            errors.put(f"round {i}, process {me}: {type(exc).__name__}: {exc}")


def test_several_processes_open_one_new_file_at_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    errors = ctx.Queue()
    procs = [
        ctx.Process(target=_open_rounds, args=(str(tmp_path), i, barrier, errors))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    found: list[str] = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, "\n".join(found[:10])
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    for i in range(ROUNDS):
        with sqlite3.connect(tmp_path / f"round-{i}.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            assert runs == PROCESSES, (i, runs)
