"""A sub-agent's process is killed with SIGKILL inside a side effect; the parent's recovery
ends the child run, settles its calls and copies them under the delegation call."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from subagent_kill_child import build

import steadyrun as sr
from steadyrun.extensions import child_run_id

CHILD = Path(__file__).with_name("subagent_kill_child.py")


def spawn(folder: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, str(CHILD), str(folder)], env=env)


async def test_a_sub_agent_killed_inside_a_side_effect_is_ended_by_the_parents_recovery(
    tmp_path: Path,
) -> None:
    proc = spawn(tmp_path)
    try:
        for _ in range(600):
            if (tmp_path / "inside").exists() or proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        assert proc.poll() is None, f"the run ended before the kill ({proc.returncode})"
        assert (tmp_path / "inside").exists(), "the sub-agent never reached charge"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    store = sr.SqliteStore(tmp_path / "runs.db")
    child_id = child_run_id("r", "m1.c1")
    before = await store.load(child_id)
    assert before is not None and before.run.status == "running"  # what the kill left
    assert {c.name: c.status for c in before.calls} == {"charge": "running", "lookup": "queued"}

    result = await sr.Runtime(store, agents=[build(tmp_path)]).resume("r")
    assert result.status == "completed"
    assert (tmp_path / "ledger").read_text().splitlines() == ["charge A"]  # nothing repeated
    delegation = result.call("m1.c1")
    assert delegation.status == "needs_review" and "charge" in (delegation.result or "")

    child = await store.load(child_id)
    assert child is not None
    assert (child.run.status, child.run.error_kind) == ("failed", "SubAgentInterrupted")
    assert {c.name: c.status for c in child.calls} == {
        "charge": "needs_review",
        "lookup": "cancelled",
    }
    copies = {c.id: (c.name, c.status) for c in result.calls if c.parent_id == "m1.c1"}
    assert copies == {
        "m1.c1/m1.c1": ("charge", "needs_review"),
        "m1.c1/m1.c2": ("lookup", "cancelled"),
    }
    # A new process sees the same: the host can tell what the child did before the kill.
    again = await sr.SqliteStore(tmp_path / "runs.db").load("r")
    assert again is not None
    assert {c.id: c.status for c in again.calls if c.parent_id == "m1.c1"} == {
        "m1.c1/m1.c1": "needs_review",
        "m1.c1/m1.c2": "cancelled",
    }
    await store.close()
