"""Lease-only write groups of SQLite commit without an fsync of their own; the rest stay synced.

``SqliteThread.write(fn, durable=False)`` (the claims, renewals and releases of
``SqliteLeases``): a group of only such jobs commits at ``synchronous = NORMAL`` in WAL, and any
group holding a durable job at the connection's own level. A job can see the level its group
commits at (``PRAGMA synchronous`` inside the transaction), so the rule is checked per job.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_sqlite_group_commit import _held, _queued, _step

import countkit
import steadyrun as sr
from steadyrun._sqlite_thread import SqliteThread
from steadyrun._sqlite_wal import group_level


@given(
    full=st.integers(0, 3),
    relax=st.booleans(),
    durable=st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_a_group_is_synced_as_its_most_durable_job(
    full: int, relax: bool, durable: list[bool]
) -> None:
    level = group_level(full, relax, iter(durable))
    if any(durable) or not relax:
        assert level == full
    else:
        assert level == min(full, 1)
    assert level <= full  # never more than the store asked for


def _thread(path: Path, synchronous: str) -> SqliteThread:
    def open_() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE IF NOT EXISTS t (a INTEGER)")
        return conn

    return SqliteThread(open_, "test", "steadyrun-test")


async def _levels(path: Path, synchronous: str, batches: list[list[bool]]) -> list[list[int]]:
    """Each batch written at once (so its jobs share groups); the level each job ran at."""
    db = _thread(path, synchronous)
    try:

        def job(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t VALUES (1)")
            return int(conn.execute("PRAGMA synchronous").fetchone()[0])

        out = []
        for batch in batches:
            out.append(list(await asyncio.gather(*(db.write(job, durable=d) for d in batch))))
        return out
    finally:
        await db.close()


@settings(max_examples=25, deadline=None)
@given(
    synchronous=st.sampled_from(["FULL", "EXTRA", "NORMAL", "OFF"]),
    batches=st.lists(st.lists(st.booleans(), min_size=1, max_size=5), min_size=1, max_size=5),
)
def test_every_durable_write_commits_at_the_stores_level(
    synchronous: str, batches: list[list[bool]]
) -> None:
    full = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}[synchronous]
    with tempfile.TemporaryDirectory() as tmp:
        levels = asyncio.run(_levels(Path(tmp) / "x.db", synchronous, batches))
    for batch, got in zip(batches, levels, strict=True):
        for durable, level in zip(batch, got, strict=True):
            if durable:
                assert level == full
            else:
                assert level in (full, min(full, 1))  # NORMAL alone, or with a durable job
        if not any(batch):
            assert got == [min(full, 1)] * len(batch)  # a group of lease jobs only: unsynced


async def test_a_group_of_a_step_and_a_claim_is_synced(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            release, held = await _held(store)
            before = store._db.commits
            counter.start()
            # The step waits for the lock on the writer's thread; the claim joins its group.
            save = asyncio.ensure_future(store.save_step("r", _step("r")))
            await asyncio.sleep(0)
            claim = asyncio.ensure_future(store.leases.acquire("other", "me", 30))
            await _queued(store, 1)
            release.set()
            await asyncio.gather(held, save, claim)
            counter.stop()
            assert store._db.commits == before + 1 and store._db.max_group == 2
    assert (counter.counts.commits, counter.counts.synced_commits) == (1, 1)


async def test_a_step_queued_behind_a_lone_claim_is_still_synced(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            release, held = await _held(store)
            counter.start()
            # The claim's group commits unsynced: the step cannot join it, and commits next.
            claim = asyncio.ensure_future(store.leases.acquire("r", "me", 30))
            await asyncio.sleep(0)
            save = asyncio.ensure_future(store.save_step("r", _step("r")))
            await _queued(store, 1)
            release.set()
            await asyncio.gather(held, save, claim)
            counter.stop()
            assert await store.load("r") is not None
    assert (counter.counts.commits, counter.counts.synced_commits) == (2, 1)


async def test_claims_renewals_and_releases_alone_are_not_synced(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            await store.save_step("r", _step("r"))
            counter.start()
            lease = await store.leases.acquire("r", "me", 30, wake=True)
            assert lease is not None
            assert await store.leases.renew(lease, 30)
            await store.leases.release(lease)
            counter.stop()
            # A forced take and a wake-up counted on its own stay durable.
            counter.start()
            forced = await store.leases.revoke("r", "canceller", 30)
            await store.leases.wake("r")
            counter.stop()
            assert forced.token == lease.token + 1
    assert (counter.counts.commits, counter.counts.synced_commits) == (5, 2)
