"""A run driven end to end by the ``steadyrun`` command alone, each step a new process.

Start a run that needs an approval, an answer and an awaited result; find them in the inbox;
approve, answer and settle them; send a message; resume; and read the whole trail back with
``runs show --json``. Nothing but the command touches the SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import clikit

SRC = Path(__file__).resolve().parents[1] / "src"


def test_a_run_end_to_end_by_the_command_alone(tmp_path: Path) -> None:
    app = ["--app", clikit.write_app(tmp_path, tmp_path / "runs.db")]
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}

    def steadyrun(*argv: str, code: int = 0) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "steadyrun", *argv, *app, "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (argv, done.stdout, done.stderr)
        return json.loads(done.stdout) if done.stdout.strip() else None

    started = steadyrun("runs", "start", "shipper", "ship a book", "--run-id", "t-1")
    assert started["status"] == "suspended"
    inbox = steadyrun("inbox")
    assert sorted(i["kind"] for i in inbox) == ["decision", "input", "result"]
    waiting = {i["kind"]: i for i in inbox}
    assert all(i["run_id"] == "t-1" for i in inbox)

    steadyrun("approve", "t-1", waiting["decision"]["call_id"], "--by", "ana")
    steadyrun("answer", "t-1", waiting["input"]["wait_id"], '"red paper"')
    steadyrun("runs", "settle", "t-1", waiting["result"]["call_id"], '{"price": 12}')
    assert steadyrun("inbox") == []
    # Sent without waiting: it waits in the run's feed until the run is resumed.
    sent = steadyrun("runs", "send", "t-1", "and a pen, please", "--id", "m2", "--no-wait")
    assert sent["run_id"] == "t-1" and sent["message_id"] == "m2"
    resumed = steadyrun("runs", "resume", "t-1")
    assert resumed["status"] == "completed"
    steadyrun("runs", "resume", "t-1", code=1)  # nothing left to do

    shown = steadyrun("runs", "show", "t-1")
    calls = {c["name"]: c for c in shown["calls"]}
    assert calls["ship"]["status"] == "succeeded" and calls["ship"]["result"] == "shipped book"
    assert calls["ship"]["decision"]["decided_by"] == "ana"
    assert calls["wrap"]["input_request"]["response"] == "red paper"
    assert calls["quote"]["result"] == '{"price": 12}'
    said = [(m["role"], m["text"]) for m in shown["messages"] if m["role"] in ("user", "assistant")]
    assert ("user", "ship a book") in said
    assert ("user", "and a pen, please") in said
    assert said[-1] == ("assistant", "noted: and a pen, please")
    assert shown["text"] == "noted: and a pen, please"
