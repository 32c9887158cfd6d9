"""A file written by the release of schema version 4 reads back the same after the migration.

``data/format1.db`` was written, and ``data/format1.json`` recorded from it, by that release
(``data/make_format1.py``): whole call records, context rewrites, calls in every status.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import steadyrun as sr
from scriptkit import load_script
from steadyrun.stores._sqlite_schema import SCHEMA_VERSION

DATA = Path(__file__).parent / "data"


make = load_script(DATA / "make_format1.py", "make_format1")


def _copy(tmp_path: Path) -> Path:
    db = tmp_path / "format1.db"
    shutil.copyfile(DATA / "format1.db", db)
    return db


def _expected() -> dict[str, Any]:
    return json.loads((DATA / "format1.json").read_text())  # type: ignore[no-any-return]


async def test_the_file_migrates_and_reads_back_as_the_release_that_wrote_it_read_it(
    tmp_path: Path,
) -> None:
    db = _copy(tmp_path)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    async with sr.SqliteStore(db) as store:
        got = await make.record(store)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    expected = _expected()
    for run_id in make.RUNS:
        # Compared part by part: a difference names the run and what differs.
        for part in ("snapshot", "history", "contexts", "calls"):
            assert got["runs"][run_id][part] == expected["runs"][run_id][part], (run_id, part)
    assert got["listing"] == expected["listing"]


async def test_a_migrated_run_goes_on_and_its_old_and_new_calls_read_back(tmp_path: Path) -> None:
    db = _copy(tmp_path)
    async with sr.SqliteStore(db) as store:
        runtime = sr.Runtime(store, agents=[make.looping("confirm", 3, 1, start=2)])
        snap = await store.load("approve")
        assert snap is not None
        waiting = [c for c in snap.calls if c.status == "awaiting_decision"]
        assert len(waiting) == 1
        await runtime.decide("approve", waiting[0].id, approve=True)
        result = await runtime.resume("approve")
        assert result.status == "completed"
        after = await store.load("approve")
        assert after is not None
    before = {c["id"]: c for c in _expected()["runs"]["approve"]["snapshot"]["calls"]}
    async with sr.SqliteStore(db) as store:  # a new store object reads the same from the file
        again = await store.load("approve")
        assert again is not None
        assert again == after
        by_id = {c.id: c for c in again.calls}
        for call_id, old in before.items():
            if old["status"] not in ("awaiting_decision",):
                assert by_id[call_id].arguments == old["arguments"]
                assert by_id[call_id].result == old["result"]
        assert by_id[waiting[0].id].status == "succeeded"
        assert [await store.load_call("approve", c.id) for c in again.calls] == again.calls
