"""The SQLite writer's connection opens with the store's first read, not on its first write.

Issue 20's 10,000 suspended runs: of the two resumes over 10 ms, one was the first on a new
store object, whose decision opened the writer's connection and prepared it (2.12 ms against
0.91). In the peer harness's resume the same decision is inside the timed resume, while the
store's opening is timed apart. The store's first read (a ``list_runs``, a ``load``) opens both
connections now.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import steadyrun as sr
from steadyrun._sqlite_thread import SqliteThread
from steadyrun.chat import Message, TextPart
from steadyrun.records import Checkpoint, ContextChange, RunRecord, Step


def _step(run_id: str) -> Step:
    hello = Message(role="user", parts=[TextPart(text=f"hello {run_id}")])
    return Step(
        run=RunRecord(run_id=run_id, agent="a", steps=1),
        checkpoint=Checkpoint(context_length=1),
        context=ContextChange(append=[hello], start=0),
    )


async def test_the_store_s_first_read_opens_the_writer_so_no_write_opens_a_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        assert await store.list_runs(limit=1) == []
        opened: list[Any] = []
        connect = sqlite3.connect

        def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            opened.append(args)
            return connect(*args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", counted)
        await store.save_step("r", _step("r"))
        await store.save_step("s", _step("s"))
        assert (await store.load("r")) is not None
    assert opened == []  # the writer was opened by the read, before the first write


async def test_a_writer_that_cannot_open_fails_the_first_read_with_a_store_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    calls = 0

    def open_once() -> sqlite3.Connection:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise sqlite3.OperationalError("unable to open database file")
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    db = SqliteThread(open_once, "test t.db", "steadyrun-sqlite")
    try:
        with pytest.raises(sr.StoreError, match="unable to open"):
            await db.read(lambda conn: conn.execute("SELECT 1").fetchone())
    finally:
        await db.close()
