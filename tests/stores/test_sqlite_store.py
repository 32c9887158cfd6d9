"""SqliteStore specifics: schema versions, files shared between processes, listing indexes."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import PIPE

import pytest

import steadyrun as sr
from steadyrun.records import Checkpoint, RunRecord, Step
from steadyrun.stores._sqlite_schema import SCHEMA_VERSION
from steadyrun.testing import ScriptedModel, text

T0 = datetime(2026, 11, 29, tzinfo=UTC)


def step(run_id: str, status: str = "running", agent: str = "a", minutes: int = 0) -> Step:
    at = T0 + timedelta(minutes=minutes)
    run = RunRecord(run_id=run_id, agent=agent, status=status, created_at=T0, updated_at=at)  # type: ignore[arg-type]
    return Step(run=run, checkpoint=Checkpoint())


async def test_schema_is_created_once_and_a_newer_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        await store.save_step("r", step("r"))
    async with sr.SqliteStore(db) as store:  # reopening migrates nothing and keeps data
        assert await store.load("r") is not None
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    async with sr.SqliteStore(db) as store:
        with pytest.raises(sr.FormatVersionError, match="newer|upgrade"):
            await store.load("r")


async def test_a_file_that_is_not_a_database_fails_clearly(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db.write_bytes(b"this is not sqlite" * 100)
    async with sr.SqliteStore(db) as store:
        with pytest.raises(sr.StoreError, match="SQLite store"):
            await store.load("r")


async def test_many_runs_of_one_process_at_once(tmp_path: Path) -> None:
    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        runtime = sr.Runtime(store)
        agents = [sr.Agent(name=f"a{i}", model=ScriptedModel([text(f"hi {i}")])) for i in range(30)]
        results = await asyncio.gather(
            *[runtime.run(a, run_id=f"r{i}", input="x") for i, a in enumerate(agents)]
        )
        assert [r.text for r in results] == [f"hi {i}" for i in range(30)]
        assert len(await store.list_runs(limit=1000)) == 30


READER = """
import asyncio, sys
import steadyrun as sr
async def main():
    async with sr.SqliteStore(sys.argv[1]) as store:
        snap = await store.load("r")
        print(snap.run.status, snap.run.text)
asyncio.run(main())
"""


async def test_a_second_process_reads_the_same_file(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        await sr.Runtime(store).run(
            sr.Agent(name="a", model=ScriptedModel([text("hello")])), run_id="r", input="x"
        )
        # The writer is still open (WAL): another process reads the committed run.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", READER, str(db), stdout=PIPE, stderr=PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "completed hello"


async def test_list_runs_orders_filters_and_pages(tmp_path: Path) -> None:
    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        for i in range(10):
            status = "completed" if i % 2 else "suspended"
            await store.save_step(f"r{i}", step(f"r{i}", status, agent=f"a{i % 3}", minutes=i))
        runs = await store.list_runs()
        assert [r.run_id for r in runs] == [f"r{i}" for i in range(9, -1, -1)]
        assert runs[0].updated_at == T0 + timedelta(minutes=9)
        done = await store.list_runs(status="completed", limit=2)
        assert [r.run_id for r in done] == ["r9", "r7"]
        more = await store.list_runs(status="completed", updated_before=done[-1].updated_at)
        assert [r.run_id for r in more] == ["r5", "r3", "r1"]
        assert [r.run_id for r in await store.list_runs(agent="a0")] == ["r9", "r6", "r3", "r0"]


@pytest.mark.parametrize(
    ("where", "index"),
    [
        ("", "runs_by_update"),
        ("WHERE status = 'completed'", "runs_by_status"),
        ("WHERE agent = 'a'", "runs_by_agent"),
    ],
)
async def test_listing_queries_use_an_index(tmp_path: Path, where: str, index: str) -> None:
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        await store.save_step("r", step("r"))
    with sqlite3.connect(db) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs "
            f"{where} ORDER BY updated_us DESC, run_id DESC LIMIT 100"
        ).fetchall()
    detail = " ".join(str(row[-1]) for row in plan)
    assert index in detail, detail
    assert "TEMP B-TREE" not in detail, detail  # no sort of the whole table


async def test_a_version_2_feed_is_migrated_to_dedup_on_the_id_revision_pair(
    tmp_path: Path,
) -> None:
    from steadyrun._codec import encode
    from steadyrun.stores import FeedMessage
    from steadyrun.stores._sql_values import statements as _statements
    from steadyrun.stores._sqlite_schema import MIGRATIONS

    db = tmp_path / "runs.db"
    old = [
        FeedMessage(seq=1, id="a@b", revision="1", content="first"),
        FeedMessage(seq=2, id="u1", content="second"),
    ]
    with sqlite3.connect(db) as conn:  # a file as version 2 wrote it: keys were "id@revision"
        for script in MIGRATIONS[:2]:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 2")
        conn.executemany(
            "INSERT INTO feed (run_id, seq, key, message) VALUES ('r', ?, ?, ?)",
            [(m.seq, f"{m.id}@{m.revision}", encode(m)) for m in old],
        )
    async with sr.SqliteStore(db) as store:
        again = [
            await store.append("r", FeedMessage(id=m.id, revision=m.revision, content="x"))
            for m in old
        ]
        assert again == old  # the migrated rows still deduplicate
        other = await store.append("r", FeedMessage(id="a", revision="b@1", content="third"))
        assert other.seq == 3  # its old text key was "a@b@1" too
        assert [m.content for m in (await store.claim("r", 3)).messages] == [
            "first",
            "second",
            "third",
        ]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


async def test_a_version_5_work_log_is_migrated_to_one_btree_keeping_the_write_order(
    tmp_path: Path,
) -> None:
    from steadyrun.stores._leases import Fence
    from steadyrun.stores._leases_sqlite import fence_check
    from steadyrun.stores._sql_values import statements as _statements
    from steadyrun.stores._sqlite_schema import MIGRATIONS

    db = tmp_path / "runs.db"
    lines = [  # two roots' lines interleaved, as concurrent executors wrote them
        ("a", "a", 1, "w1", 1),
        ("b", "b", 1, "w2", 1),
        ("a", "a/c1", 1, "w1", 1),
        ("a", "a", 2, "w3", 2),
        ("b", "b", 2, "w2", 1),
    ]
    with sqlite3.connect(db) as conn:  # a file as version 5 wrote it
        for script in MIGRATIONS[:5]:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 5")
        conn.executemany(
            "INSERT INTO work_log (root, run_id, steps, owner, token) VALUES (?, ?, ?, ?, ?)",
            lines,
        )
        conn.execute("INSERT INTO work (run_id, owner, token) VALUES ('a', 'w3', 2)")
    async with sr.SqliteStore(db) as store:
        writers = await store.leases.writers("a")
        assert [(w.run_id, w.steps, w.owner, w.token) for w in writers] == [
            (r, s, o, t) for root, r, s, o, t in lines if root == "a"
        ]
        fence = Fence(run_id="a", owner="w3", token=2)
        await store._db.write(lambda conn: fence_check(conn, fence, "a", 3))
        after = await store.leases.writers("a")
        assert [(w.steps, w.owner) for w in after] == [(1, "w1"), (1, "w1"), (2, "w3"), (3, "w3")]
        assert len(await store.leases.writers("b")) == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'work_log'").fetchone()[0]
        assert "WITHOUT ROWID" in sql
        assert conn.execute(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'work_log_by_root'"
        ).fetchone() == (0,)


async def test_a_new_store_reads_the_file_through_a_memory_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new store's first load reads every page of the run from the file: through read() calls
    # into a page cache of its own, 0.25 ms of system time at N=400 (the harness's resume); a
    # reader connection maps the file instead. Writes still go through the writer's connection.
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        await store.save_step("r", step("r"))
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def kept(*args: object, **kw: object) -> sqlite3.Connection:
        conn = connect(*args, **kw)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", kept)
    async with sr.SqliteStore(db) as store:
        assert (await store.load("r")) is not None
        maps = {
            bool(c.execute("PRAGMA query_only").fetchone()[0]): c.execute(
                "PRAGMA mmap_size"
            ).fetchone()[0]
            for c in opened
        }
    assert maps[True] >= 64 << 20  # the reader: a map covering files of 64 MB at least
