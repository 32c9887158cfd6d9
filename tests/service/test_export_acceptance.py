"""Acceptance of issue 23 item 5: export 1,000 runs from SQLite, import them into PostgreSQL,
and resume any of them there.

Every run is a tree (a sub-agent run under its delegation) suspended on a decision. Each is
exported as one JSON document (through its text, as a file holds it) and imported into a
PostgreSQL store; every imported tree is identical to its source by the conformance suite's
comparison; then runs picked at random are approved and resumed on PostgreSQL, and complete
there.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

import lifecyclekit as kit
import pgkit
import steadyrun as sr
from steadyrun.service import Operations
from steadyrun.stores import PostgresStore, SqliteStore
from steadyrun.testing.conformance import expect_same_run

RUNS = 1000
RESUMED = 25

pg_dsn = pgkit.database_fixture()


async def test_export_1000_runs_from_sqlite_import_into_postgres_and_resume_there(
    tmp_path: Path, pg_dsn: str
) -> None:
    source = SqliteStore(tmp_path / "runs.db", synchronous="OFF")
    target = PostgresStore(pg_dsn, max_size=4)
    here = Operations(sr.Runtime(source, agents=[kit.agent()]))
    there = Operations(sr.Runtime(target, agents=[kit.agent()]))
    ids = [f"ticket-{i:04d}" for i in range(RUNS)]
    try:
        started = time.perf_counter()
        gate = asyncio.Semaphore(16)

        async def start(run_id: str) -> None:
            async with gate:
                await kit.start(here.runtime, run_id, item=f"order {run_id}")

        await asyncio.gather(*(start(run_id) for run_id in ids))
        made = time.perf_counter()

        files = [json.dumps(await here.export_run(run_id)) for run_id in ids]
        exported = time.perf_counter()
        for text in files:
            imported = await there.import_run(text)
            assert len(imported.runs) == 2  # the run and its sub-agent run
        done_import = time.perf_counter()

        for run_id in ids:
            await expect_same_run(source, target, run_id)
        compared = time.perf_counter()
        listed = await target.list_runs(status="suspended", limit=2 * RUNS)
        assert sorted(s.run_id for s in listed) == ids

        for run_id in random.Random(23).sample(ids, RESUMED):
            result = await kit.finish(there.runtime, run_id)
            assert result.status == "completed", (run_id, result)
            assert result.text == f"done: order {run_id}"
            assert [c.status for c in result.calls] == ["succeeded", "succeeded"]
        resumed = time.perf_counter()
        print(
            f"\n{RUNS} runs: made {made - started:.1f} s, exported {exported - made:.1f} s, "
            f"imported {done_import - exported:.1f} s, compared {compared - done_import:.1f} s, "
            f"{RESUMED} resumed {resumed - compared:.1f} s"
        )
    finally:
        await source.close()
        await target.close()
