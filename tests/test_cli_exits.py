"""The exit codes of docs/cli.md, one test each, and errors worded for the command line.

0 done; 1 the operation cannot apply to the run as it is (a typed error, named on stderr);
2 the command line is wrong (an option, an argument, ``--app``/``--store``, a missing SQLite
file, an agent the app does not have); 3 a run the command waited for failed; 130 Ctrl-C.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import clikit
from steadyrun import _cli_runs
from steadyrun._cli import main


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "shopapp", raising=False)
    return ["--app", clikit.write_app(tmp_path, tmp_path / "runs.db")]


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


def test_0_done(shop: list[str]) -> None:
    assert main(["runs", "list", *shop]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["runs", "list", "--bogus"],
        ["runs", "show"],
        ["no-such-command"],
        ["runs", "list", "--limit", "many"],
    ],
    ids=["nothing", "unknown option", "missing argument", "unknown command", "not a number"],
)
def test_2_click_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert _err(capsys)


def test_2_where_the_runs_are_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STEADYRUN_STORE", raising=False)
    monkeypatch.delenv("STEADYRUN_APP", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "list"]) == 2
    assert "--store" in _err(capsys)
    assert main(["runs", "list", "--store", "mysql://x"]) == 2
    assert "sqlite:PATH" in _err(capsys)
    assert main(["runs", "list", "--app", "no_such_module:app"]) == 2
    assert "cannot import" in _err(capsys)
    assert main(["runs", "list", "--app", "json:nothing"]) == 2
    assert "no 'nothing'" in _err(capsys)


def test_2_a_missing_sqlite_file_is_not_created(
    shop: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runz.db"
    for argv in (
        ["runs", "list", "--store", f"sqlite:{db}"],
        ["runs", "list", "--store", str(db)],
        ["pending", "r1", "--store", f"sqlite:{db}"],
        ["runs", "import", "-", "--store", f"sqlite:{db}"],
    ):
        assert main(argv) == 2, argv
        err = _err(capsys)
        assert f"no SQLite file {db}" in err and "--create" in err
        assert not db.exists()
    # Asked to, import makes it.
    assert main(["runs", "start", "charger", "charge", "--run-id", "c1", *shop]) == 0
    exported = tmp_path / "c1.json"
    assert main(["runs", "export", "c1", *shop, "--out", str(exported)]) == 0
    assert main(["runs", "import", str(exported), "--store", f"sqlite:{db}", "--create"]) == 0
    assert db.exists()


def test_2_options_that_do_not_fit(shop: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "start", "shipper", "ship a book", "--run-id", "r1", *shop]) == 0
    capsys.readouterr()
    assert main(["settle", "r1", "m1.c2", *shop]) == 2
    assert "--error" in _err(capsys)
    assert main(["runs", "settle", "r1", "m1.c2", "ok", "--error", "no", *shop]) == 2
    assert main(["answer", "r1", "m1.c3.w1", "not json", *shop]) == 2
    assert "JSON" in _err(capsys)
    assert main(["approve", "r1", "m1.c1", "--arguments", "{nope", *shop]) == 2
    assert main(["runs", "list", "--status", "sleeping", *shop]) == 2
    assert (
        main(["runs", "fork", "r1", "--at", "1", "--as", "f1", "--edit-calls", "[1]", *shop]) == 2
    )


def test_2_an_agent_the_app_does_not_have_is_named_in_cli_terms(
    shop: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "nobody", "hi", *shop]) == 2
    err = _err(capsys)
    assert "agent 'nobody' is not in --app shopapp:app" in err
    assert "broken, charger, shipper" in err
    assert "Runtime" not in err
    # A run of an agent the app has, reached with --store only: the agent is needed to resume
    # it or to check edited arguments.
    assert main(["runs", "start", "shipper", "ship", "--run-id", "r1", *shop, "--json"]) == 0
    capsys.readouterr()
    store = ["--store", f"sqlite:{tmp_path / 'runs.db'}"]
    assert main(["runs", "resume", "r1", *store]) == 2
    err = _err(capsys)
    assert "agent 'shipper'" in err and "--app" in err and "Runtime" not in err
    assert main(["approve", "r1", "m1.c1", "--arguments", '{"item": "pen"}', *store]) == 2
    err = _err(capsys)
    assert "--app" in err and "Runtime" not in err
    # --no-wait needs no agent here: a worker with the app resumes it.
    assert main(["runs", "resume", "r1", "--no-wait", *store]) == 0


def test_1_the_run_is_not_as_the_command_needs(
    shop: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "shipper", "ship", "--run-id", "r1", *shop]) == 0
    capsys.readouterr()
    for argv in (
        ["runs", "show", "nope"],
        ["pending", "nope"],
        ["runs", "resume", "nope"],
        ["runs", "send", "nope", "hello"],
        ["runs", "settle", "nope", "m1.c2", "x"],
        ["approve", "nope", "m1.c1"],
    ):
        assert main([*argv, *shop]) == 1, argv
        err = _err(capsys)
        assert "no run 'nope' in" in err and "steadyrun runs start" in err, err
        assert "Runtime" not in err
    assert main(["approve", "r1", "m9.c9", *shop]) == 1
    assert "UnknownCallError" in _err(capsys)
    assert main(["runs", "settle", "r1", "m1.c1", "done", *shop]) == 1  # awaits a decision
    assert "NotPendingError" in _err(capsys)
    assert main(["runs", "cancel", "r1", *shop]) == 0
    assert main(["runs", "resume", "r1", *shop]) == 1
    assert "RunCancelledError" in _err(capsys)
    assert main(["runs", "send", "r1", "hello", "--no-wait", *shop]) == 1  # nothing takes it
    assert "RunCancelledError" in _err(capsys)


def test_3_a_run_waited_for_failed(shop: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "start", "broken", "hi", "--run-id", "b1", *shop]) == 3
    assert "failed" in capsys.readouterr().out
    assert main(["runs", "resume", "b1", *shop]) == 3


def test_130_interrupted(shop: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(coro: object) -> None:
        coro.close()  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(_cli_runs.asyncio, "run", interrupted)
    assert main(["runs", "list", *shop]) == 130


def test_every_documented_exit_code_has_a_test_here() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    table = doc.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = re.findall(r"^\| (\d+) \|", table, flags=re.M)
    assert codes == ["0", "1", "2", "3", "130"]
    tested = {name.split("_")[1] for name in globals() if re.match(r"test_\d+_", name)}
    assert tested == set(codes)
