"""Two worker processes share a PostgresStore through leases; one is killed with SIGKILL.

200 runs, each: look an order up, ship it (a side effect needing approval, given by this
process through the host operations), answer. Halfway, while the first worker holds leases,
it is killed; its runs are taken over once their leases expire. Checked: every run completes
once with its answer; no ship body ran twice; the step log shows each run's writers in lease
order (an older token never wrote after a newer one, one owner per token).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pgkit
import steadyrun as sr
from steadyrun.service._ops import Operations
from steadyrun.stores import PostgresStore
from steadyrun.stores._leases_postgres import PostgresLeases

sys.path.insert(0, str(Path(__file__).parent))

from worker_child import AGENT, final_text, make_agent  # noqa: E402

pg_dsn = pgkit.database_fixture()

RUNS = 200
CHILD = Path(__file__).with_name("worker_child.py")
ROUNDS = 3000  # the test's own loop bound (each round waits up to 0.1 s for progress)


def _spawn(dsn: str, effects: Path, owner: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "--dsn", dsn, "--effects", str(effects), "--owner", owner],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


async def _approve(ops: Operations) -> None:
    for summary in await ops.store.list_runs(status="suspended", limit=RUNS):
        for item in await ops.runtime.pending(summary.run_id):
            if item.kind == "decision":
                with contextlib.suppress(sr.UsageError):  # decided meanwhile
                    await ops.runtime.decide(summary.run_id, item.call_id, approve=True)


async def _held_by(store: PostgresStore, owner: str) -> int:
    async with store._connection() as conn:
        cur = await conn.execute(f"SELECT count(*) FROM {store._s}.work WHERE owner = %s", (owner,))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_two_workers_one_killed(pg_dsn: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.log"
    effects.touch()
    async with PostgresStore(pg_dsn) as store:
        leases = PostgresLeases(store)
        ops = Operations(store, agents=[make_agent(effects)], leases=leases)
        for i in range(RUNS):
            await ops.start(f"r{i:03d}", AGENT, f"please ship r{i:03d}")
        alive = _spawn(pg_dsn, effects, "worker-a")
        other = _spawn(pg_dsn, effects, "worker-b")
        killed_holding = 0
        try:
            for _ in range(ROUNDS):
                await _approve(ops)
                done = len(await store.list_runs(status="completed", limit=RUNS))
                if done == RUNS:
                    break
                if alive.poll() is None and done >= RUNS // 4:
                    # Looked at ten times a round: a run holds its lease for a few
                    # milliseconds only, and once per round missed them all at times.
                    for _ in range(10):
                        held = await _held_by(store, "worker-a")
                        if held:
                            alive.send_signal(signal.SIGKILL)
                            alive.wait()
                            killed_holding = held
                            break
                        await asyncio.sleep(0.01)
                    continue
                await asyncio.sleep(0.1)
            assert alive.returncode == -signal.SIGKILL, "worker-a was never killed"
            other.send_signal(signal.SIGTERM)
            out, _ = other.communicate(timeout=60)
            assert other.returncode == 0, out
        finally:
            for proc in (alive, other):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

        # Every run completed, once, with its answer.
        summaries = await store.list_runs(limit=RUNS + 10)
        assert Counter(s.status for s in summaries) == {"completed": RUNS}
        assert killed_holding > 0
        taken_over = 0
        for s in summaries:
            snap = await store.load(s.run_id)
            assert snap is not None
            answers = [m.text for m in snap.context if m.role == "assistant" and m.text]
            assert answers == [final_text(s.run_id)], (s.run_id, answers)
            ships = [c for c in snap.calls if c.name == "ship"]
            assert len(ships) == 1 and ships[0].status in ("succeeded", "needs_review")
            # The step log: tokens never go back; each token has one owner.
            writers = await leases.writers(s.run_id)
            assert writers, s.run_id
            tokens = [w.token for w in writers]
            assert tokens == sorted(tokens), (s.run_id, writers)
            owners = {(w.token, w.owner) for w in writers}
            assert len(owners) == len(set(tokens)), (s.run_id, writers)
            steps = [w.steps for w in writers if w.run_id == s.run_id]
            assert steps == sorted(steps), (s.run_id, writers)
            if {w.owner for w in writers} == {"worker-a", "worker-b"}:
                taken_over += 1
        assert taken_over > 0  # some runs were executed by both workers, one after the other

        # No side-effecting body ran twice.
        lines = effects.read_text().splitlines()
        bodies = Counter(tuple(line.split()[1:3]) for line in lines)
        assert bodies and max(bodies.values()) == 1
        assert len(bodies) >= RUNS - killed_holding  # at most the killed ones may not have run
        pids = {line.split()[3] for line in lines}
        assert len(pids) == 2 and str(os.getpid()) not in pids
        await leases.close()
