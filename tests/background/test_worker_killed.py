"""A worker is killed with SIGKILL while its tasks run: another worker takes them over."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import steadyrun as sr
from steadyrun.background import SqliteTaskStore
from steadyrun.testing import ScriptedModel, text

CHILD = Path(__file__).with_name("bg_worker.py")


def spawn(mode: str, folder: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, str(CHILD), mode, str(folder)], env=env)


async def wait_for(check: object, what: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if await check():  # type: ignore[operator]
            return
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode} before: {what}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def test_tasks_of_a_killed_worker_are_recovered_or_settled(tmp_path: Path) -> None:
    first = spawn("start", tmp_path)
    try:

        async def adopted() -> bool:
            return (tmp_path / "adopted").exists()

        await wait_for(adopted, "both calls adopted", first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    (tmp_path / "go").write_text("1")  # the external job may finish now, worker or not

    second = spawn("work", tmp_path)
    tasks = SqliteTaskStore(tmp_path / "tasks.db")
    try:

        async def both_announced() -> bool:
            listed = await tasks.list_tasks("run")
            return len(listed) == 2 and all(t.notified for t in listed)

        await wait_for(both_announced, "the second worker settles both tasks", second)
    finally:
        second.send_signal(signal.SIGKILL)
        second.wait()
    external = await tasks.get("run/m1.c1")
    local = await tasks.get("run/m1.c2")
    await tasks.close()
    assert external is not None and external.status == "completed"
    assert external.output == "job a done" and external.owner is None
    assert local is not None and local.status == "failed" and local.needs_review
    starts = (tmp_path / "starts.log").read_text().splitlines()
    assert starts.count("external run/m1.c1") == 1  # re-attached, never started again
    assert starts.count("local run/m1.c2") == 1
    assert starts.count("recover run/m1.c1") == 1

    # The run hears of both endings at its next turn.
    runs = sr.SqliteStore(tmp_path / "runs.db")
    model = ScriptedModel([text("one done, one to check")])
    agent = sr.Agent(name="ops", model=model)
    result = await sr.Runtime(runs, agents=[agent]).resume("run")
    notes = [m.text for m in model.requests[0].messages if m.role == "system"]
    await runs.close()
    assert result.status == "completed"
    assert len(notes) == 2
    assert any("completed" in n and "job a done" in n for n in notes)
    assert any("failed" in n and "check before" in n for n in notes)
