"""Crash tests with real processes on ``SqliteStore``: SIGKILL at many points, then resume.

A child process runs the chaos workload (``chaoskit``) and kills itself at a counted SQL
statement (before or after a commit, or mid-transaction) or right after a tool's side effect;
fresh children resume the run to completion; this process checks the invariants
(``chaosverify.verify``) against an uninterrupted run. ``STEADYRUN_CHAOS=all`` kills at every
statement instead of a spread of at least 50. Children are forked from a server process that
has imported everything (``crash_child.serve``), so each costs its work, not its start-up.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from chaoskit import RUN_ID  # noqa: E402
from chaosverify import Observed, crash_test  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun._codec import decode  # noqa: E402
from steadyrun.records import RunSnapshot  # noqa: E402
from steadyrun.stores import FeedMessage  # noqa: E402


def observe(spec: str) -> Observed:
    """Read the run, its feed and how far the feed was consumed, as a new process would."""
    path = spec.removeprefix("sqlite:")

    async def load() -> RunSnapshot | None:
        async with sr.SqliteStore(path) as store:
            return await store.load(RUN_ID)

    snapshot = asyncio.run(load())
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT message FROM feed WHERE run_id = ? ORDER BY seq", (RUN_ID,))
        feed = [decode(row[0], FeedMessage) for row in rows]
        row = conn.execute("SELECT consumed FROM feed_state WHERE run_id = ?", (RUN_ID,)).fetchone()
    finally:
        conn.close()
    return Observed(snapshot=snapshot, feed=feed, consumed=row[0] if row else 0)


def test_sigkill_at_many_points_then_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def fresh(name: str) -> tuple[str, Path]:
        folder = tmp_path / name
        folder.mkdir()
        return f"sqlite:{folder / 'runs.db'}", folder / "effects.txt"

    def show(line: str) -> None:
        with capsys.disabled():
            print(f"\n{line}")

    crash_test("sqlite", fresh, observe, show)
