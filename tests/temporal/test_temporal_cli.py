"""``steadyrun runs start|resume`` on Temporal, as a user runs them: ``--wait`` waits there too.

The commands load ``temporal_cli_app:app`` (an ``App`` on a ``TemporalEngine``, no worker);
the test process runs the Temporal worker on the same SQLite file and task queue. The output
and exit codes are those of the built-in engine (tests/test_cli_drive.py): the run as it came
to rest, what it waits for, and 3 when it ended ``failed``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")
pytest.importorskip("fastapi", reason="the service extra is not installed")

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_cli_app import MENDED_ENV, cli_agents  # noqa: E402
from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions  # noqa: E402

HERE = Path(__file__).parent


@dataclass
class Cli:
    env: dict[str, str]
    mended: Path

    async def __call__(self, *args: str) -> tuple[int, Any]:
        """``steadyrun ARGS --app temporal_cli_app:app``: its exit code and its output."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyrun", *args, "--app", "temporal_cli_app:app",
            env=self.env, cwd=HERE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode is not None
        text = out.decode()
        if "--json" in args and proc.returncode in (0, 3):
            return proc.returncode, json.loads(text)
        return proc.returncode, text + err.decode()


def _unique(prefix: str) -> str:
    # Workflow ids are the session's dev server's: another test's run may have this id.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _paths() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _absolute(path: str) -> str:
    return str(Path(path).resolve())


@pytest.fixture
async def cli(temporal_server: Any, tmp_path: Path) -> AsyncIterator[Cli]:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    db, mended = tmp_path / "runs.db", tmp_path / "mended"
    env = {
        **os.environ,
        "CLI_DB": str(db),
        MENDED_ENV: str(mended),
        "STEADYRUN_TEMPORAL_ADDRESS": temporal_server.target,
        "STEADYRUN_TASK_QUEUE": queue,
        "PYTHONPATH": os.pathsep.join(
            # Absolute: the commands run in this folder.
            [str(HERE), str(HERE.parent), *map(_absolute, _paths())]
        ),
    }
    store = sr.SqliteStore(db)
    app = TemporalApp(
        agents=cli_agents(db.with_name("cli-effects"), mended),
        store=store,
        options=TemporalOptions(task_queue=queue),
    )
    try:
        async with app.worker(client):
            yield Cli(env, mended)
    finally:
        await store.close()


async def test_start_waits_until_the_run_suspends_or_ends(cli: Cli) -> None:
    w1 = _unique("w")
    code, started = await cli("runs", "start", "wire", "Wire 20.", "--run-id", w1, "--json")
    assert code == 0, started
    assert started["run_id"] == w1 and started["created"] is True
    assert started["status"] == "suspended", started
    [item] = started["pending"]
    assert (item["kind"], item["name"]) == ("decision", "wire")
    # The same request again is the same run, reported as it stands.
    code, again = await cli("runs", "start", "wire", "Wire 20.", "--run-id", w1, "--json")
    assert code == 0, again
    assert again["created"] is False and again["status"] == "suspended"
    assert [p["call_id"] for p in again["pending"]] == [item["call_id"]]

    code, chat = await cli("runs", "start", "chat", "Hello.", "--json")
    assert code == 0, chat
    assert chat["run_id"] and chat["status"] == "completed", chat
    assert chat["text"] == "turn 1: Hello." and chat["pending"] == []

    # A waiting run resumed goes on waiting (as on the built-in engine, which drives it to
    # the same wait); a completed one with no input waiting has nothing to resume.
    code, resumed = await cli("runs", "resume", w1, "--json")
    assert code == 0, resumed
    assert resumed["status"] == "suspended", resumed
    assert [p["call_id"] for p in resumed["pending"]] == [item["call_id"]]
    code, out = await cli("runs", "resume", chat["run_id"])
    assert code == 1 and "NotPendingError" in out, out


async def test_a_failed_run_exits_3_and_resume_waits_for_it_to_go_on(cli: Cli) -> None:
    m1 = _unique("m")
    code, failed = await cli("runs", "start", "moody", "Hello?", "--run-id", m1, "--json")
    assert code == 3, failed
    assert failed["status"] == "failed" and failed["error_kind"] == "ModelCallFailed", failed
    code, out = await cli("runs", "start", "moody", "Hello?", "--run-id", m1)
    assert code == 3, out  # the same request again: the same failed run

    code, again = await cli("runs", "resume", m1, "--json")  # still down: fails again
    assert code == 3, again
    assert again["status"] == "failed" and again["error_kind"] == "ModelCallFailed"

    cli.mended.touch()
    code, resumed = await cli("runs", "resume", m1, "--json")
    assert code == 0, resumed
    assert resumed["status"] == "completed" and resumed["text"] == "up again", resumed


async def test_no_wait_reports_at_once_as_on_the_builtin_engine(cli: Cli) -> None:
    m2 = _unique("m")
    args = ("runs", "start", "moody", "Hi.", "--run-id", m2, "--no-wait", "--json")
    code, started = await cli(*args)
    assert code == 0, started
    assert started["run_id"] == m2 and started["created"] is True
    assert set(started) == {"run_id", "created", "status"}
    code, failed = await cli("runs", "start", "moody", "Hi.", "--run-id", m2, "--json")
    assert code == 3 and failed["status"] == "failed", failed
    cli.mended.touch()
    code, woken = await cli("runs", "resume", m2, "--no-wait", "--json")
    assert code == 0, woken
    assert woken == {"run_id": m2, "status": "woken"}
