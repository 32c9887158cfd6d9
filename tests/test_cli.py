"""The ``steadyrun`` command: runs, pending, approve/reject/answer, cancel, --json, --app."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun._cli import main
from steadyrun.control import CallView, Confirm
from steadyrun.service._ops import Operations
from steadyrun.stores import SqliteStore
from steadyrun.testing import FunctionModel, text, tool_calls

APP_MODULE = """
import steadyrun as sr
from steadyrun.service._ops import Operations
from steadyrun.stores import SqliteStore
ops = Operations(SqliteStore({path!r}))
"""


def _confirm(call: CallView) -> Confirm:
    return Confirm(prompt="Ship it?")


@sr.tool(side_effects=True, policy=_confirm)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    return f"shipped {item}"


def _respond(request: sr.ModelRequest) -> sr.ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return tool_calls(("ship", {"item": "book"}))
    return text("shipped")


async def _suspended(path: Path, *run_ids: str) -> None:
    agent = sr.Agent(name="shipper", model=FunctionModel(_respond), tools=[ship])
    async with SqliteStore(path) as store:
        ops = Operations(store, agents=[agent])
        for run_id in run_ids:
            await ops.start(run_id, "shipper", "ship a book")
            await ops.drive(run_id)


def _json(capsys: pytest.CaptureFixture[str]) -> object:
    return json.loads(capsys.readouterr().out)


def test_runs_pending_approve_and_cancel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_suspended(db, "r1", "r2"))
    store = ["--store", f"sqlite:{db}"]
    assert main(["runs", "list", *store, "--json"]) == 0
    listed = _json(capsys)
    assert isinstance(listed, list)
    assert sorted((r["run_id"], r["status"]) for r in listed) == [
        ("r1", "suspended"),
        ("r2", "suspended"),
    ]
    assert main(["pending", "r1", *store, "--json"]) == 0
    [item] = _json(capsys)  # type: ignore[misc]
    assert item["kind"] == "decision" and item["prompt"] == "Ship it?"
    assert main(["approve", "r1", item["call_id"], *store, "--json"]) == 0
    assert _json(capsys) == {"call": item["call_id"], "status": "awaiting_decision"}
    assert main(["reject", "r1", item["call_id"], "--reason", "no", *store]) == 1  # final
    assert "ConflictError" in capsys.readouterr().err
    assert main(["runs", "cancel", "r2", *store, "--json"]) == 0
    assert _json(capsys)["runs"] == ["r2"]  # type: ignore[index]
    assert main(["runs", "show", "r2", *store, "--json"]) == 0
    shown = _json(capsys)
    assert isinstance(shown, dict) and shown["status"] == "cancelled"
    assert main(["runs", "tail", "r2", *store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["status"] == "cancelled"
    assert main(["runs", "list", *store]) == 0  # a table
    assert "r1" in capsys.readouterr().out
    assert main(["runs", "show", "nope", *store]) == 1


def test_app_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_suspended(db, "r1"))
    (tmp_path / "cliapp.py").write_text(APP_MODULE.format(path=str(db)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "cliapp", raising=False)
    assert main(["runs", "list", "--app", "cliapp:ops", "--json"]) == 0
    assert [r["run_id"] for r in _json(capsys)] == ["r1"]  # type: ignore[union-attr]
    assert main(["runs", "list", "--app", "cliapp:nothing"]) == 2  # a usage error
    assert main(["runs", "list"]) == 2
    assert "--store" in capsys.readouterr().err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "serve", "worker", "runs", "pending", "approve", "reject", "answer"):
        assert command in out


def test_worker_refuses_an_unknown_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--loop", "bogus"]) == 2
    assert "'bogus' is not one of auto, asyncio, uvloop" in capsys.readouterr().err


def test_worker_asked_for_uvloop_without_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert main(["worker", "--loop", "uvloop"]) == 2
    assert "uvloop is not installed (pip install 'steadyrun[service]')" in capsys.readouterr().err


def test_auto_takes_uvloop_when_installed_and_asyncio_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from steadyrun._cli import _loop_name, _run

    async def which() -> str:
        return _loop_name()

    assert _run(which(), loop="auto") == "uvloop"
    assert _run(which(), loop="asyncio") == "asyncio"
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert _run(which(), loop="auto") == "asyncio"
