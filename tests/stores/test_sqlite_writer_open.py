"""The SQLite writer's housekeeping, off its writes' path: its connection opens with the
store's first read, and it checkpoints the WAL while it has nothing to write.

Issue 20's 10,000 suspended runs: of the two resumes over 10 ms, one was the first on a new
store object, whose decision opened the writer's connection and prepared it (2.12 ms against
0.91), and the other the one whose commit took SQLite's WAL auto-checkpoint (the same sample
in every run). In the peer harness's resume the decision is inside the timed resume, while the
store's opening is timed apart.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stepkit import first_step

import steadyrun as sr
from steadyrun._sqlite_thread import SqliteThread
from steadyrun._sqlite_wal import AUTO_PAGES, CheckpointPace
from steadyrun.records import Step


def _step(run_id: str) -> Step:
    return first_step(run_id, f"hello {run_id}")


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


def _open_table(path: Path) -> Any:
    def open_() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
        return conn

    return open_


_BLOB = bytes(range(256)) * 160  # ten pages a row


async def test_an_idle_writer_checkpoints_the_wal_so_no_commit_has_to(tmp_path: Path) -> None:
    # SQLite checkpoints inside the commit that takes the log past 1,000 pages: that commit's
    # caller waits while pages are copied into the file and synced. The writer does it when it
    # has nothing to write instead, before the log gets there: pages reach the file (only a
    # checkpoint writes them there) while the log is still under 1,000 pages.
    path = tmp_path / "t.db"
    db = SqliteThread(_open_table(path), "test t.db", "steadyrun-sqlite")
    try:
        # About 770 pages of log (under SQLite's 1,000: before, no page reached the file),
        # each write awaited, so the writer idles between them.
        for k in range(70):
            await db.write(
                lambda conn, k=k: conn.execute("INSERT INTO t VALUES (?, ?)", (k, _BLOB))
            )
        await db.wait_idle()
        assert db.checkpoints >= 1
        assert _size(path) > 100 * 4096  # checkpointed pages are in the file
        auto = await db.read(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone())
        assert auto == (AUTO_PAGES,)  # SQLite's own, for a writer that is never idle
        # Writes that come while a checkpoint runs wait for it and commit.
        await asyncio.gather(
            *(
                db.write(lambda conn, k=k: conn.execute("INSERT INTO t VALUES (?, ?)", (k, _BLOB)))
                for k in range(70, 400)
            )
        )
        count = await db.read(lambda conn: conn.execute("SELECT count(*) FROM t").fetchone())
        assert count == (400,)
    finally:
        await db.close()
    assert _size(Path(f"{path}-wal")) == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _size(path: Path) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def test_the_checkpoint_pace_aims_at_its_pages_from_what_the_last_one_found() -> None:
    pace = CheckpointPace(pages=800)
    for _ in range(63):
        pace.committed()
    assert not pace.due()
    pace.committed()
    assert pace.due()  # the first after 64 commits
    pace.checkpointed(640)  # ten pages a commit: 80 commits make 800
    for _ in range(79):
        pace.committed()
    assert not pace.due()
    pace.committed()
    assert pace.due()
    pace.checkpointed(0)  # a failed checkpoint: the next is far, SQLite's own comes first
    assert not pace.due()


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 100_000)), max_size=30))
def test_the_checkpoint_pace_stays_between_one_commit_and_a_thousand(
    rounds: list[tuple[int, int]],
) -> None:
    pace = CheckpointPace()
    for commits, pages in rounds:
        for _ in range(commits):
            pace.committed()
        pace.checkpointed(pages)
        assert 1 <= pace._every <= 1000
