"""Two processes write one SQLite store while their idle writers checkpoint its WAL; one is
SIGKILLed mid-stream. Nothing either process was told is saved goes missing, and the file stays
whole: a checkpoint of one process never stands in the way of the other's commits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import textwrap
from pathlib import Path

from stepkit import first_step

import steadyrun as sr
from steadyrun.records import Step

_BIG = "x" * 16_000  # about four pages a step: the writers checkpoint within the test

CHILD = textwrap.dedent(
    f"""
    import asyncio, sys
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    import steadyrun as sr
    from stepkit import first_step

    async def main() -> None:
        async with sr.SqliteStore(sys.argv[1]) as store:
            for i in range(100_000):
                step = first_step(f"c{{i}}", f"c{{i}} " + "x" * 16_000)
                await store.save_step(f"c{{i}}", step)
                print(i, flush=True)  # saved: it must be there after a kill

    asyncio.run(main())
    """
)


def _step(run_id: str) -> Step:
    return first_step(run_id, f"{run_id} {_BIG}")


def _check(path: Path) -> tuple[str, set[str]]:
    with sqlite3.connect(path) as conn:
        whole = conn.execute("PRAGMA integrity_check").fetchone()[0]
        runs = {row[0] for row in conn.execute("SELECT run_id FROM runs")}
    return whole, runs


async def test_a_writer_killed_beside_another_loses_nothing_saved(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await store.list_runs(limit=1)  # the file exists before the child opens it
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, str(path), stdout=asyncio.subprocess.PIPE
        )
        assert child.stdout is not None
        saved: list[int] = []
        try:
            mine = 0
            while len(saved) < 200:  # both write, each awaiting its own commits
                await store.save_step(f"p{mine}", _step(f"p{mine}"))
                mine += 1
                line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
                assert line, "the child ended before it was killed"
                saved.append(int(line))
            os.kill(child.pid, signal.SIGKILL)
        finally:
            if child.returncode is None:
                child.kill()
            await child.wait()
        for i in range(mine, mine + 100):  # the survivor goes on, its checkpoints too
            await store.save_step(f"p{i}", _step(f"p{i}"))
        assert store._db.commits >= 300
        assert store._db.checkpoints >= 1  # this side's idle writer checkpointed meanwhile
    whole, runs = _check(path)
    assert whole == "ok"
    assert {f"p{i}" for i in range(mine + 100)} <= runs
    assert {f"c{i}" for i in saved} <= runs
