"""SqliteStore.reclaim: the pages of deleted runs go back to the file system."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import lifecyclekit as kit
import steadyrun as sr
from steadyrun.stores import SqliteStore


async def _fill(store: SqliteStore, runs: int) -> None:
    runtime = sr.Runtime(store, agents=[kit.agent()])
    for i in range(runs):
        await kit.start(runtime, f"r{i}", item=f"{i} " + "x" * 20_000)


def _mode(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])


async def test_a_new_file_gives_deleted_pages_back_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with SqliteStore(path, synchronous="OFF") as store:
        await _fill(store, 20)
        full = (await store.reclaim()).after
        for i in range(20):
            await store.delete_run(f"r{i}")
        done = await store.reclaim()
    assert _mode(path) == 2  # incremental
    assert done.mode == "incremental" and done.after < full / 10 and done.freed > 0


async def test_an_older_file_needs_one_full_vacuum_then_is_incremental(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a file made before: a table first, no auto-vacuum
        conn.execute("CREATE TABLE unrelated (x INTEGER)")
    async with SqliteStore(path, synchronous="OFF") as store:
        await _fill(store, 10)
        for i in range(10):
            await store.delete_run(f"r{i}")
        assert _mode(path) == 0
        kept = await store.reclaim()
        assert kept.mode == "none" and kept.after > 1_000_000
        full = await store.reclaim(full=True)
        assert full.mode == "full" and full.after < kept.after / 10
        await _fill(store, 5)
        for i in range(5):
            await store.delete_run(f"r{i}")
        assert (await store.reclaim()).mode == "incremental"
    assert _mode(path) == 2
