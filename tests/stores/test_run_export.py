"""The run export document: one versioned JSON document per run tree, read back exactly.

SQLite to PostgreSQL and back, compared with the conformance suite's comparison
(``expect_same_run``); unknown versions are refused with ``FormatVersionError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lifecyclekit as kit
import pgkit
import steadyrun as sr
from steadyrun import FormatVersionError, StoreError
from steadyrun.stores import (
    EXPORT_FORMAT,
    PostgresStore,
    SqliteStore,
    export_document,
    read_document,
)
from steadyrun.testing.conformance import expect_same_run

pg_dsn = pgkit.database_fixture()


async def _document(store: sr.MemoryStore | SqliteStore | PostgresStore, run_id: str) -> Any:
    dump = await store.dump_run(run_id)
    assert dump is not None
    # Through JSON text: what a file holds.
    return json.loads(json.dumps(export_document(dump)))


async def test_the_document_names_its_kind_and_format_and_holds_the_tree() -> None:
    store = sr.MemoryStore()
    await kit.start(sr.Runtime(store, agents=[kit.agent()]), "r1")
    doc = await _document(store, "r1")
    assert doc["kind"] == "steadyrun.run" and doc["format"] == EXPORT_FORMAT == 1
    assert doc["run_id"] == "r1" and doc["exported_at"] and doc["steadyrun"] == sr.__version__
    assert [r["run"]["run_id"] for r in doc["runs"]] == ["r1", "r1/m1.c1"]
    assert [c["name"] for c in doc["runs"][0]["calls"]] == ["delegate", "ship"]
    assert doc["runs"][0]["calls"][1]["status"] == "awaiting_decision"
    assert [f["run_id"] for f in doc["feeds"]] == ["r1", "r1/m1.c1"]
    assert [f["consumed"] for f in doc["feeds"]] == [0, 1]  # consumed once answered
    assert doc["woken"] is False


async def test_sqlite_to_postgres_and_back_is_the_same_run(tmp_path: Path, pg_dsn: str) -> None:
    source = SqliteStore(tmp_path / "a.db")
    target = PostgresStore(pg_dsn, schema="imported")
    back = SqliteStore(tmp_path / "b.db")
    try:
        runtime = sr.Runtime(source, agents=[kit.agent()])
        await kit.start(runtime, "r1")
        await runtime.send("r1", "also a lamp")  # input not taken yet: woken, unconsumed
        await target.restore_run(read_document(await _document(source, "r1")))
        await expect_same_run(source, target, "r1")
        await back.restore_run(read_document(await _document(target, "r1")))
        await expect_same_run(source, back, "r1")
        assert "r1" in await target.leases.runnable() and "r1" in await back.leases.runnable()
        # The imported run goes on there as it would have here.
        there = sr.Runtime(target, agents=[kit.agent()])
        done = await kit.finish(there, "r1")
        assert done.status == "completed" and done.text == "done: also a lamp"
    finally:
        for store in (source, target, back):
            await store.close()


@pytest.mark.parametrize("version", [2, 0, "1", 1.0, True, None])
async def test_an_unknown_version_is_refused(version: Any) -> None:
    store = sr.MemoryStore()
    await kit.start(sr.Runtime(store, agents=[kit.agent()]), "r1")
    doc = await _document(store, "r1")
    doc["format"] = version
    with pytest.raises(FormatVersionError, match="run export"):
        read_document(doc)


async def test_a_checkpoint_of_an_unknown_version_is_refused() -> None:
    store = sr.MemoryStore()
    await kit.start(sr.Runtime(store, agents=[kit.agent()]), "r1")
    doc = await _document(store, "r1")
    doc["runs"][1]["checkpoint"]["format"] = 99
    with pytest.raises(FormatVersionError, match="checkpoint"):
        read_document(doc)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"format": 1},
        {"kind": "something.else", "format": 1, "run_id": "r1", "runs": [], "feeds": []},
        {"kind": "steadyrun.run", "format": 1, "run_id": "r1", "runs": [{"run": 3}]},
    ],
)
def test_what_is_no_run_export_is_refused(doc: Any) -> None:
    with pytest.raises(StoreError) as raised:
        read_document(doc)
    assert not isinstance(raised.value, FormatVersionError)


async def test_text_and_bytes_are_read_too() -> None:
    store = sr.MemoryStore()
    await kit.start(sr.Runtime(store, agents=[kit.agent()]), "r1")
    doc = await _document(store, "r1")
    text = json.dumps(doc)
    assert read_document(text) == read_document(text.encode()) == read_document(doc)
    with pytest.raises(StoreError, match="not JSON"):
        read_document("{nope")
