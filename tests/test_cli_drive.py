"""``steadyrun runs start|send|settle|resume`` and ``steadyrun inbox``, against a SQLite file."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import clikit
from steadyrun._cli import main
from steadyrun.stores import SqliteStore


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``--app`` of a shop app on a SQLite file of ``tmp_path``; commands run in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "shopapp", raising=False)
    return ["--app", clikit.write_app(tmp_path, tmp_path / "runs.db")]


def _out(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_start_waits_for_the_run_and_is_idempotent(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "shipper", "ship a book", "--run-id", "r1", *shop, "--json"]) == 0
    started = _out(capsys)
    assert started["run_id"] == "r1" and started["created"] is True
    assert started["status"] == "suspended"
    assert [(p["kind"], p["name"]) for p in started["pending"]] == [
        ("decision", "ship"),
        ("result", "quote"),
        ("input", "wrap"),
    ]
    # The same request again is the same run; another request for the id is a conflict.
    assert main(["runs", "start", "shipper", "ship a book", "--run-id", "r1", *shop, "--json"]) == 0
    assert _out(capsys)["created"] is False
    assert main(["runs", "start", "shipper", "ship a pen", "--run-id", "r1", *shop]) == 1
    assert "ConflictError" in capsys.readouterr().err
    # Without --run-id the run gets an id, printed.
    assert main(["runs", "start", "charger", "charge me", *shop, "--json"]) == 0
    other = _out(capsys)
    assert other["run_id"] and other["run_id"] != "r1" and other["status"] == "completed"


def test_start_without_wait_leaves_the_run_to_a_worker(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    no_wait = ["runs", "start", "shipper", "hi", "--run-id", "r2", "--no-wait", *shop]
    assert main([*no_wait, "--json"]) == 0
    assert _out(capsys) == {"run_id": "r2", "created": True, "status": "started"}
    assert main(no_wait) == 0
    assert "r2" in capsys.readouterr().out
    assert main(["runs", "show", "r2", *shop]) == 1
    assert "started but nothing executed it yet" in capsys.readouterr().err
    # Nothing executed it: resume --wait does, here.
    assert main(["runs", "resume", "r2", *shop, "--json"]) == 0
    assert _out(capsys)["status"] == "suspended"


def test_inbox_lists_what_waits_for_a_person_across_runs(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "shipper", "ship a book", "--run-id", "r1", *shop]) == 0
    assert main(["runs", "start", "charger", "charge me", "--run-id", "c1", *shop]) == 0
    capsys.readouterr()
    assert main(["inbox", *shop, "--json"]) == 0
    items = _out(capsys)
    assert sorted((i["run_id"], i["kind"], i["name"]) for i in items) == [
        ("c1", "review", "charge"),
        ("r1", "decision", "ship"),
        ("r1", "input", "wrap"),
        ("r1", "result", "quote"),
    ]
    review = next(i for i in items if i["kind"] == "review")
    assert review["run_status"] == "completed" and review["agent"] == "charger"
    wrap = next(i for i in items if i["kind"] == "input")
    assert wrap["prompt"] == "Which paper?" and wrap["wait_id"]
    assert wrap["response_schema"] == {"type": "string"}
    assert main(["inbox", *shop, "--kind", "review", "--json"]) == 0
    assert [i["run_id"] for i in _out(capsys)] == ["c1"]
    assert main(["inbox", *shop, "--kind", "decision", "--kind", "input", "--json"]) == 0
    assert sorted(i["kind"] for i in _out(capsys)) == ["decision", "input"]
    assert main(["inbox", *shop, "--agent", "charger", "--json"]) == 0
    assert [i["call_id"] for i in _out(capsys)] == [review["call_id"]]
    assert main(["inbox", *shop, "--run", "r1", "--json"]) == 0
    assert len(_out(capsys)) == 3
    assert main(["inbox", *shop, "--kind", "nonsense"]) == 2
    assert main(["inbox", *shop]) == 0  # a table
    assert "Which paper?" in capsys.readouterr().out


def test_settle_send_resume_and_the_full_show(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "shipper", "ship a book", "--run-id", "r1", *shop, "--json"]) == 0
    pending = {p["kind"]: p for p in _out(capsys)["pending"]}
    ship, quote, wrap = pending["decision"], pending["result"], pending["input"]
    assert main(["approve", "r1", ship["call_id"], "--by", "ana", *shop]) == 0
    assert main(["answer", "r1", wrap["wait_id"], '"red paper"', *shop]) == 0
    capsys.readouterr()
    assert main(["runs", "settle", "r1", quote["call_id"], '{"price": 12}', *shop, "--json"]) == 0
    assert _out(capsys) == {"call": quote["call_id"], "status": "succeeded"}
    # The same result again changes nothing; another one is a conflict.
    assert main(["runs", "settle", "r1", quote["call_id"], '{"price": 12}', *shop]) == 0
    assert main(["runs", "settle", "r1", quote["call_id"], "--error", "gone", *shop]) == 1
    assert "ConflictError" in capsys.readouterr().err

    assert main(["runs", "resume", "r1", *shop, "--json"]) == 0
    resumed = _out(capsys)
    assert resumed["status"] == "completed" and resumed["text"] == "shipped, quoted and wrapped"
    # Nothing to resume now: it completed and no message waits.
    assert main(["runs", "resume", "r1", *shop]) == 1
    assert "runs send" in capsys.readouterr().err
    assert main(["runs", "send", "r1", "and a pen", "--id", "m2", *shop, "--json"]) == 0
    sent = _out(capsys)
    assert sent["status"] == "completed" and sent["text"] == "noted: and a pen"

    assert main(["runs", "show", "r1", *shop, "--json"]) == 0
    shown = _out(capsys)
    assert shown["status"] == "completed" and shown["created_at"] and shown["updated_at"]
    calls = {c["name"]: c for c in shown["calls"]}
    assert calls["ship"]["result"] == "shipped book"
    assert calls["ship"]["decision"]["approve"] is True
    assert calls["ship"]["decision"]["decided_by"] == "ana"
    assert calls["ship"]["decision"]["decided_at"]
    assert calls["quote"]["result"] == '{"price": 12}' and calls["quote"]["status"] == "succeeded"
    assert calls["wrap"]["input_request"]["prompt"] == "Which paper?"
    assert calls["wrap"]["input_request"]["response"] == "red paper"
    assert calls["wrap"]["result"] == "wrapped book in red paper"
    users = [m for m in shown["messages"] if m["role"] == "user"]
    assert [m["text"] for m in users] == ["ship a book", "and a pen"]
    assert users[1]["id"] == "m2"
    assert shown["pending"] == []
    assert shown["usage"]["requests"] == 3


def test_settle_keeps_its_top_level_spelling_and_acknowledges_a_review(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "charger", "charge me", "--run-id", "c1", *shop, "--json"]) == 0
    [review] = _out(capsys)["pending"]
    assert review["kind"] == "review"
    args = ["settle", "c1", review["call_id"], "--result", "charged once", *shop, "--json"]
    assert main(args) == 0
    assert _out(capsys) == {"call": review["call_id"], "status": "succeeded"}
    assert main(["inbox", *shop, "--json"]) == 0
    assert _out(capsys) == []


def test_a_failed_run_exits_3_with_wait(
    shop: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "broken", "hello", "--run-id", "b1", *shop, "--json"]) == 3
    assert _out(capsys)["status"] == "failed"
    assert main(["runs", "start", "broken", "hello", "--run-id", "b2", "--no-wait", *shop]) == 0


async def _hold(db: Path, run_id: str) -> None:
    async with SqliteStore(db) as store:
        assert await store.leases.acquire(run_id, "a-worker-elsewhere", 600.0) is not None


def test_a_run_another_executor_holds_goes_on_there(
    shop: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "start", "shipper", "ship", "--run-id", "r1", "--no-wait", *shop]) == 0
    asyncio.run(_hold(tmp_path / "runs.db", "r1"))
    capsys.readouterr()
    assert main(["runs", "resume", "r1", *shop]) == 0  # it goes on where it executes
    err = capsys.readouterr().err
    assert "executing in 'a-worker-elsewhere'" in err and "runs tail r1" in err
    assert "resume(run_id" not in err
    assert main(["runs", "delete", "r1", *shop]) == 1
    err = capsys.readouterr().err
    assert "RunBusyError" in err and "runs tail r1" in err and "resume(run_id" not in err
