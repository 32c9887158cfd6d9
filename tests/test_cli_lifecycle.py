"""``steadyrun runs export|import|delete``: move runs between stores from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import lifecyclekit as kit
import pgkit
import steadyrun as sr
from steadyrun._cli import main
from steadyrun.stores import PostgresStore, SqliteStore
from steadyrun.testing.conformance import expect_same_run

pg_dsn = pgkit.database_fixture()


async def _started(path: Path, *run_ids: str) -> None:
    async with SqliteStore(path) as store:
        runtime = sr.Runtime(store, agents=[kit.agent()])
        for run_id in run_ids:
            await kit.start(runtime, run_id)


async def _same_then_finish(path: Path, dsn: str, run_id: str) -> sr.RunResult:
    async with SqliteStore(path) as source, PostgresStore(dsn) as target:
        await expect_same_run(source, target, run_id)
        return await kit.finish(sr.Runtime(target, agents=[kit.agent()]), run_id)


def test_export_to_a_file_import_into_postgres_and_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_dsn: str
) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_started(db, "r1", "r2"))
    src = ["--store", f"sqlite:{db}"]
    pg = ["--store", pg_dsn]
    one = tmp_path / "r1.json"
    assert main(["runs", "export", "r1", *src, "--out", str(one)]) == 0
    assert "exported run r1 (2 runs)" in capsys.readouterr().err
    doc = json.loads(one.read_text())
    assert doc["kind"] == "steadyrun.run" and doc["format"] == 1 and doc["run_id"] == "r1"
    assert main(["runs", "export", "r2", *src]) == 0  # to stdout
    two = tmp_path / "r2.json"
    two.write_text(capsys.readouterr().out)

    assert main(["runs", "import", str(one), str(two), *pg, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"run_id": "r1", "runs": ["r1", "r1/m1.c1"], "woken": False},
        {"run_id": "r2", "runs": ["r2", "r2/m1.c1"], "woken": False},
    ]
    assert main(["runs", "import", str(one), *pg]) == 1
    assert "ConflictError" in capsys.readouterr().err
    done = asyncio.run(_same_then_finish(db, pg_dsn, "r1"))
    assert done.status == "completed" and done.text == "done: a book"

    assert main(["runs", "delete", "r1", *src, "--json"]) == 0
    deleted = json.loads(capsys.readouterr().out)
    assert deleted["runs"] == ["r1", "r1/m1.c1"] and deleted["messages"] == 2
    assert main(["runs", "delete", "r1", *src]) == 1
    assert "no run 'r1'" in capsys.readouterr().err
    assert main(["runs", "export", "r1", *src]) == 1
    assert "RunNotFoundError" in capsys.readouterr().err


def test_import_reads_stdin_and_refuses_unknown_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_started(db, "r1"))
    assert main(["runs", "export", "r1", "--store", f"sqlite:{db}"]) == 0
    text = capsys.readouterr().out
    other = ["--store", f"sqlite:{tmp_path / 'other.db'}", "--create"]  # a new file
    newer = json.loads(text)
    newer["format"] = 2
    bad = tmp_path / "newer.json"
    bad.write_text(json.dumps(newer))
    assert main(["runs", "import", str(bad), *other]) == 1
    assert "FormatVersionError" in capsys.readouterr().err

    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["runs", "import", "-", *other]) == 0
    assert "imported run r1 (2 runs)" in capsys.readouterr().out
