"""``steadyrun runs history RUN`` and ``steadyrun runs fork RUN --at K --as NEW``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun._cli import main
from steadyrun.chat import ToolResultPart
from steadyrun.stores import SqliteStore
from steadyrun.testing import FunctionModel, text, tool_calls

ledger: list[str] = []


@sr.tool(side_effects=True)
def ship(item: str, ctx: sr.ToolContext) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    ledger.append(f"{ctx.run_id}:{item}")
    return f"shipped {item}"


def _respond(request: sr.ModelRequest) -> sr.ModelResponse:
    last = request.messages[-1]
    if last.role == "user" and "hello" in last.text:
        return text("hello yourself")
    results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
    if not any(r.content.startswith("shipped") for r in results):
        return tool_calls(("ship", {"item": "book"}))
    return text("shipped")


AGENT = sr.Agent(name="shipper", model=FunctionModel(_respond), tools=[ship])


async def _finished(path: Path) -> None:
    async with SqliteStore(path) as store:
        result = await sr.Runtime(store, agents=[AGENT]).run(AGENT, run_id="r1", input="ship")
        assert result.text == "shipped"


async def _resume(path: Path, run_id: str) -> sr.RunResult:
    async with SqliteStore(path) as store:
        return await sr.Runtime(store, agents=[AGENT]).resume(run_id)


def test_history_and_fork(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_finished(db))
    store = ["--store", f"sqlite:{db}"]
    assert main(["runs", "history", "r1", *store, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert [(s["step"], s["phase"]) for s in steps] == [
        (1, "model"),
        (2, "batch"),
        (3, "model"),
        (4, "done"),
    ]
    assert steps[1]["messages"][0]["tool_calls"][0]["name"] == "ship"
    assert steps[1]["calls"] == [{"id": "m1.c1", "name": "ship", "status": "running"}]
    assert main(["runs", "history", "r1", *store]) == 0  # a table
    table = capsys.readouterr().out
    assert "ship" in table and "done" in table

    assert main(["runs", "fork", "r1", "--at", "2", "--as", "r2", *store, "--json"]) == 0
    forked = json.loads(capsys.readouterr().out)
    assert forked == {
        "run_id": "r2",
        "forked_from": "r1",
        "step": 2,
        "created": True,
        "status": "suspended",
    }
    ledger.clear()
    assert asyncio.run(_resume(db, "r2")).text == "shipped"
    assert ledger == ["r2:book"]  # the fork's model asked again; r1's shipment did not re-run

    assert main(["runs", "fork", "r1", "--at", "1", "--as", "r3", "--edit", "hello", *store]) == 0
    assert "r3" in capsys.readouterr().out
    assert asyncio.run(_resume(db, "r3")).text == "hello yourself"

    assert main(["runs", "fork", "r1", "--at", "9", "--as", "r4", *store]) == 1
    assert "StepNotFoundError" in capsys.readouterr().err
    assert main(["runs", "fork", "r1", "--at", "2", "--as", "r1", *store]) == 1
    assert "ConflictError" in capsys.readouterr().err
    assert main(["runs", "fork", "r1", "--at", "2", "--as", "r5", "--edit-calls", "[", *store]) == 2
    assert "--edit-calls" in capsys.readouterr().err
    assert main(["runs", "history", "nope", *store]) == 1
