"""The ``steadyrun`` command, its demo, and the quickstart example."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import steadyrun
from steadyrun import SqliteStore
from steadyrun._cli import main
from steadyrun._demo import _story
from steadyrun._demo._worker import FAULT_ENV

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def test_demo_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # --no-color prints no escape codes
    assert "No model configured: using a scripted model (steadyrun.testing.ScriptedModel)" in out
    assert "CRASH" in out
    assert "refund  running" in out  # what the store held after the crash
    assert "send_email  queued" in out
    assert "needs_review" in out
    assert "Do not repeat it before checking" in out  # what the model was told
    assert "refund body for A-1001 executed 1 time" in out
    assert "demo failed" not in out
    assert len(out.splitlines()) <= 60
    assert max(len(line) for line in out.splitlines()) <= 100


def test_demo_is_repeatable_in_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    assert main(["demo", "--no-color"]) == 0
    assert capsys.readouterr().out.count("executed 1 time") == 2


def test_demo_console_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "steadyrun", "demo"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "executed 1 time" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100


def test_installed_console_script() -> None:
    script = Path(sys.executable).parent / "steadyrun"
    if not script.exists():
        pytest.skip("the steadyrun console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "demo", "--no-color"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nope:model", "unknown model provider 'nope'"),
        ("gpt-4.1", "is not 'provider:model'"),
        ("openai:gpt-4.1", "needs an API key: set OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "set ANTHROPIC_API_KEY"),
        ("google:gemini-2.5-flash", "set GOOGLE_API_KEY or GEMINI_API_KEY"),
    ],
)
def test_demo_with_an_unusable_model_exits_2(
    spec: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found before any worker starts and without any request: no network is needed.
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert main(["demo", "--model", spec]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"steadyrun demo: --model {spec}: ")
    assert says in captured.err
    assert captured.out == ""


def test_demo_with_a_missing_local_model_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = f"local:{tmp_path / 'missing.gguf'}"
    assert main(["demo", "--model", spec]) == 2
    err = capsys.readouterr().err
    # With the local extra: the file is missing; without it: how to install the extra.
    assert "does not exist" in err or "pip install 'steadyrun[local]'" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"steadyrun {steadyrun.__version__}"


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err


def test_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--nope"]) == 2
    assert "--nope" in capsys.readouterr().err


def test_quickstart_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run(  # in tmp_path: it keeps its runs in ./runs.db
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: completed" in proc.stdout
    assert "refund" in proc.stdout


def _store_dir(out: str) -> Path:
    match = re.search(r"Store: a SQLite file, (\S+) \(", out)
    assert match is not None, out
    return Path(match.group(1)).parent


def test_demo_kills_worker_1_with_sigkill(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    killed = re.search(r"worker 1 \(pid (\d+)\) killed with SIGKILL \(returncode -9\)", out)
    assert killed is not None, out
    first = int(killed.group(1))
    second = re.search(r"process 2 \(pid (\d+)\)", out)
    assert second is not None, out
    assert f"process 1 (pid {first})" in out
    assert len({first, int(second.group(1)), os.getpid()}) == 3  # three distinct processes
    assert "checks  ✓ crash mid-batch" in out


def test_demo_removes_its_temporary_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "(temporary; --keep keeps it)" in out
    assert not _store_dir(out).exists()


def test_demo_keep_keeps_the_temporary_directory(capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    assert main(["demo", "--no-color", "--keep"]) == 0
    where = _store_dir(capsys.readouterr().out)
    try:
        assert (where / "demo.db").is_file()
        assert (where / "demo-bank.jsonl").is_file()
    finally:
        shutil.rmtree(where)


def test_demo_keeps_its_run_in_the_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    assert main(["demo", "--no-color", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"Store: a SQLite file, {db} (--db: kept after the demo)" in " ".join(out.split())
    assert db.is_file()

    async def load() -> steadyrun.records.RunSnapshot | None:
        async with SqliteStore(db) as store:
            return await store.load("ticket-4711")

    snap = asyncio.run(load())
    assert snap is not None
    assert snap.run.status == "completed"
    assert snap.run.text is not None and "re_1" in snap.run.text
    statuses = {c.id: (c.name, c.status) for c in snap.calls}
    assert statuses["m2.c1"] == ("refund", "needs_review")
    assert statuses["m2.c2"] == ("send_email", "succeeded")

    # The bank's ledger beside it: one refund, made by worker 1; one email, sent by worker 2.
    ledger = [json.loads(line) for line in (tmp_path / "runs-bank.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in ledger] == ["refund", "email"]
    pids = re.findall(r"process \d \(pid (\d+)\)", out)
    assert [e["pid"] for e in ledger] == [int(p) for p in pids]


def test_demo_refuses_an_existing_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.db"
    db.write_text("mine")
    assert main(["demo", "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{db} exists already" in captured.err
    assert db.read_text() == "mine"


def test_demo_refuses_a_db_in_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--db", str(tmp_path / "nope" / "runs.db")]) == 2
    assert "there is no directory" in capsys.readouterr().err


def test_demo_reports_a_broken_invariant(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A model that refunds again after the restart: the demo's own checks must catch it.
    monkeypatch.setenv(FAULT_ENV, "refund-twice")
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "executed 2 times" in out
    assert "demo failed: refund ran once" in out


def test_demo_reports_a_run_that_never_crashed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FAULT_ENV, "no-crash")
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "demo failed: crash mid-batch" in out
    assert "SIGKILL" not in out


def test_demo_reports_errors_of_the_timeline_printer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Once in each worker: worker 1 reports it before it is killed, worker 2 when it is done.
    monkeypatch.setenv(FAULT_ENV, "printer-error")
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "killed with SIGKILL" in out
    assert "demo failed: the timeline printer raised 2 time(s)" in out


def test_demo_kills_a_hung_worker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    monkeypatch.setattr(_story, "_TIMEOUT", 3.0)
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert re.search(
        r"demo failed: worker 1 \(pid \d+\) did not reach the refund within 3 s; it was killed",
        out,
    ), out


def test_demo_shows_the_stderr_of_a_failed_worker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FAULT_ENV, "error")
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "the worker's stderr (last lines):" in out
    assert "RuntimeError: STEADYRUN_DEMO_FAULT=error: the worker fails on start" in out
    assert re.search(r"demo failed: worker 1 \(pid \d+\) exited with code 1 before the refund", out)


def test_worker_starts_without_warnings() -> None:
    # The package must not import the worker module itself, or runpy warns at every start.
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-m", "steadyrun._demo._worker", "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
