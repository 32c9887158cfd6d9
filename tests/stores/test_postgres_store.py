"""PostgresStore: the runtime on PostgreSQL, schema versions, several processes at once.

Two ``PostgresStore`` instances on one database stand for two processes: each has its own
connection pool and its own listener, so nothing is shared between them but the server.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import pgkit
import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import Message
from steadyrun.records import (
    Block,
    CallRecord,
    CallUpdate,
    Checkpoint,
    ContextChange,
    RunRecord,
    Step,
)
from steadyrun.stores import FeedMessage, PostgresStore, Store
from steadyrun.stores._postgres_schema import SCHEMA_VERSION
from steadyrun.testing import ScriptedModel, text, tool_calls

T0 = datetime(2026, 11, 29, tzinfo=UTC)

pg_dsn = pgkit.database_fixture()


def step(run_id: str, status: str = "running", agent: str = "a", minutes: int = 0) -> Step:
    at = T0 + timedelta(minutes=minutes)
    run = RunRecord(run_id=run_id, agent=agent, status=status, created_at=T0, updated_at=at)  # type: ignore[arg-type]
    return Step(run=run, checkpoint=Checkpoint())


def call(rev: int, status: str = "running", call_id: str = "c1", **kw: object) -> CallRecord:
    return CallRecord(id=call_id, name="tool", rev=rev, status=status, **kw)  # type: ignore[arg-type]


def msg(mid: str, revision: str = "1") -> FeedMessage:
    return FeedMessage(id=mid, revision=revision, content=f"text of {mid}")


async def versions(dsn: str, schema: str = "steadyrun") -> list[int]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(f'SELECT version FROM "{schema}".steadyrun_schema ORDER BY 1')
        return [r[0] for r in await cur.fetchall()]


# -- the runtime on PostgreSQL -----------------------------------------------------------------


def build(crash: asyncio.Event | None, ledger: list[str], model: ScriptedModel) -> sr.Agent:
    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order_id"])
    async def refund(order_id: str) -> str:
        """Refund (side effects, not replayable)."""
        ledger.append(f"refund {order_id}")
        if crash is not None:
            crash.set()
            await hang()
        return f"refunded {order_id}"

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order_id: str) -> str:
        """Read only."""
        ledger.append(f"lookup {order_id}")
        return f"order {order_id}: paid twice"

    return sr.Agent(
        name="support",
        model=model,
        tools=[refund, lookup],
        limits=sr.Limits(max_concurrent_tool_calls=4),
    )


async def test_the_store_satisfies_the_ports(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        assert isinstance(store, Store)
        assert sr.PostgresStore is PostgresStore


async def test_a_run_with_tools_completes_and_reloads(pg_dsn: str) -> None:
    ledger: list[str] = []
    model = ScriptedModel(
        [
            tool_calls(("lookup", {"order_id": "A"})),
            tool_calls(("refund", {"order_id": "A"})),
            text("Refunded."),
        ]
    )
    async with PostgresStore(pg_dsn) as store:
        result = await sr.Runtime(store).run(build(None, ledger, model), run_id="t", input="x")
        assert result.status == "completed" and result.text == "Refunded."
        assert ledger == ["lookup A", "refund A"]
    async with PostgresStore(pg_dsn) as again:  # another process reads it back
        snap = await again.load("t")
        assert snap is not None
        assert snap.run.status == "completed" and snap.run.text == "Refunded."
        assert [(c.name, c.status) for c in snap.calls] == [
            ("lookup", "succeeded"),
            ("refund", "succeeded"),
        ]
        assert [b.position for b in snap.blocks] == sorted(b.position for b in snap.blocks)
        assert snap.context[0].text == "x"
        [summary] = await again.list_runs()
        assert (summary.run_id, summary.agent, summary.status) == ("t", "support", "completed")


async def test_crash_mid_batch_resumes_with_the_side_effect_needing_review(pg_dsn: str) -> None:
    ledger: list[str] = []
    crash = asyncio.Event()
    batch = tool_calls(("refund", {"order_id": "A"}), ("lookup", {"order_id": "A"}))
    async with PostgresStore(pg_dsn) as store:
        runtime = sr.Runtime(store)
        await crash_when(
            runtime.run(build(crash, ledger, ScriptedModel([batch])), run_id="t", input="x"), crash
        )
        snap = await store.load("t")
        assert snap is not None and snap.run.status == "running"
        assert {c.name: c.status for c in snap.calls}["refund"] == "running"

    second = ScriptedModel([text("Checked.")])
    async with PostgresStore(pg_dsn) as store:  # a new process: new runtime, agent and store
        resumed = await sr.Runtime(store).resume("t", agent=build(None, ledger, second))
        assert resumed.status == "completed"
        by_name = {c.name: c for c in resumed.calls}
        assert by_name["refund"].status == "needs_review"
        assert by_name["lookup"].status in ("succeeded", "interrupted")
        assert ledger.count("refund A") == 1  # the side effect ran exactly once
        snap = await store.load("t")
        assert snap is not None and {c.name: c.status for c in snap.calls} == {
            n: c.status for n, c in by_name.items()
        }


async def test_await_external_settled_by_another_process(pg_dsn: str) -> None:
    from steadyrun.control import await_external

    @sr.tool(side_effects=True)
    async def wire(amount: int) -> str:
        """Wire money; the bank answers later."""
        await_external({"amount": amount})

    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("Wired.")])
    agent = sr.Agent(name="pay", model=model, tools=[wire])
    async with PostgresStore(pg_dsn) as a, PostgresStore(pg_dsn) as b:
        first = await sr.Runtime(a).run(agent, run_id="p", input="pay")
        assert first.status == "suspended"
        await sr.Runtime(b, agents=[agent]).settle("p", "m1.c1", result="wire #1")
        done = await sr.Runtime(a).resume("p", agent=agent)
        assert done.status == "completed" and done.text == "Wired."
        assert done.call("m1.c1").result == "wire #1"


# -- journal details ------------------------------------------------------------------------


async def test_steps_round_trip_and_account_bytes_like_sqlite(pg_dsn: str, tmp_path: Path) -> None:
    steps = [
        Step(
            run=RunRecord(run_id="r", agent="a", created_at=T0, updated_at=T0),
            checkpoint=Checkpoint(turn=1),
            context=ContextChange(append=[Message.user("hi"), Message.user("there")]),
            blocks=[
                Block(id="b2", kind="content", position=2, text="two"),
                Block(id="b1", kind="content", position=1, text="one"),
            ],
            calls=[call(1, call_id="c2"), call(1, call_id="c1"), call(1, call_id="gone")],
        ),
        Step(
            run=RunRecord(run_id="r", agent="a", created_at=T0, updated_at=T0, steps=1),
            checkpoint=Checkpoint(turn=2),
            context=ContextChange(base=[Message.user("summary")], append=[Message.user("more")]),
            calls=[call(2, "succeeded", call_id="c1", result="ok"), call(1, call_id="c2")],
            removed_blocks=["b2"],
            removed_calls=["gone"],
        ),
    ]
    async with PostgresStore(pg_dsn) as pg, sr.SqliteStore(tmp_path / "runs.db") as lite:
        for s in steps:
            await pg.save_step("r", s)
            await lite.save_step("r", s)
        assert pg.step_bytes == lite.step_bytes and pg.bytes_written == lite.bytes_written
        assert await pg.load("r") == await lite.load("r")
        snap = await pg.load("r")
        assert snap is not None
        assert [c.id for c in snap.calls] == ["c2", "c1"]  # first-write order
        assert [m.text for m in snap.context] == ["summary", "more"]
        assert [b.id for b in snap.blocks] == ["b1"]
        assert await pg.load("nope") is None


async def test_call_errors_match_the_other_stores(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        with pytest.raises(sr.StoreError, match="unknown run"):
            await store.save_call("r", call(1))
        with pytest.raises(sr.StoreError, match="saved under"):
            await store.save_step("other", step("r"))
        await store.save_step("r", step("r"))
        with pytest.raises(KeyError):
            await store.update_call("r", "c1", CallUpdate(status="succeeded"))
        await store.save_call("r", call(1))
        updated = await store.update_call("r", "c1", CallUpdate(status="succeeded", result="ok"))
        assert (updated.status, updated.result, updated.rev) == ("succeeded", "ok", 1)
        await store.save_call("r", call(5, "failed", error="late"))  # settled stays
        snap = await store.load("r")
        assert snap is not None
        assert (snap.calls[0].status, snap.calls[0].result, snap.calls[0].rev) == (
            "succeeded",
            "ok",
            5,
        )


async def test_concurrent_save_calls_of_two_processes_obey_the_merge_rules(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn, max_size=8) as a, PostgresStore(pg_dsn, max_size=8) as b:
        await a.save_step("r", step("r"))
        # 40 snapshots of one call, written in random order by two processes at once.
        revs = list(range(1, 41))
        random.Random(7).shuffle(revs)
        await asyncio.gather(
            *[
                (a if i % 2 else b).save_call("r", call(rev, notes={"rev": str(rev)}))
                for i, rev in enumerate(revs)
            ]
        )
        snap = await b.load("r")
        assert snap is not None
        [stored] = snap.calls
        assert (stored.rev, stored.notes) == (40, {"rev": "40"})  # the highest rev wins

        # A settled outcome stays, whichever newer running snapshots race with it.
        await a.save_call("r", call(41, "succeeded", call_id="c2", result="done"))
        later = [call(rev, "running", call_id="c2") for rev in range(42, 62)]
        random.Random(3).shuffle(later)
        await asyncio.gather(*[(a if i % 2 else b).save_call("r", c) for i, c in enumerate(later)])
        snap = await a.load("r")
        assert snap is not None
        c2 = next(c for c in snap.calls if c.id == "c2")
        assert (c2.status, c2.result, c2.rev) == ("succeeded", "done", 61)

        # A step carrying an older snapshot does not undo a newer save_call.
        await a.save_step("r", replace(step("r"), calls=[call(3, call_id="c1")]))
        snap = await a.load("r")
        assert snap is not None and snap.calls[0].rev == 40


async def test_first_writes_of_a_call_from_two_processes_merge(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as a, PostgresStore(pg_dsn) as b:
        await a.save_step("r", step("r"))
        for n in range(10):  # both insert the same new call at once
            cid = f"n{n}"
            await asyncio.gather(
                a.save_call("r", call(1, call_id=cid)),
                b.save_call("r", call(2, "succeeded", call_id=cid, result="ok")),
            )
        snap = await a.load("r")
        assert snap is not None
        assert [(c.rev, c.status) for c in snap.calls] == [(2, "succeeded")] * 10


# -- schema -------------------------------------------------------------------------------------


async def test_schema_is_created_once_and_kept(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", step("r"))
    async with PostgresStore(pg_dsn) as store:  # a second start migrates nothing, keeps data
        assert await store.load("r") is not None
    assert await versions(pg_dsn) == list(range(1, SCHEMA_VERSION + 1))


async def test_several_processes_create_the_schema_at_once(pg_dsn: str) -> None:
    stores = [PostgresStore(pg_dsn, min_size=0) for _ in range(5)]
    try:
        assert await asyncio.gather(*[s.load("r") for s in stores]) == [None] * 5
        await asyncio.gather(*[s.save_step(f"r{i}", step(f"r{i}")) for i, s in enumerate(stores)])
        assert len(await stores[0].list_runs()) == 5
    finally:
        for s in stores:
            await s.close()
    assert await versions(pg_dsn) == list(range(1, SCHEMA_VERSION + 1))


async def test_a_newer_database_is_refused(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", step("r"))
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO steadyrun.steadyrun_schema VALUES (%s, 0)", (SCHEMA_VERSION + 1,)
        )
    async with PostgresStore(pg_dsn) as store:
        for _ in range(2):  # refused on every use, not only the first
            with pytest.raises(sr.FormatVersionError, match="upgrade") as exc:
                await store.load("r")
            assert exc.value.found == SCHEMA_VERSION + 1


async def test_a_version_2_feed_is_migrated_to_dedup_on_the_id_revision_pair(
    pg_dsn: str,
) -> None:
    from steadyrun._codec import encode
    from steadyrun.stores._postgres_schema import MIGRATIONS, VERSION_TABLE
    from steadyrun.stores._sql_values import statements as _statements

    old = [
        FeedMessage(seq=1, id="a@b", revision="1", content="first"),
        FeedMessage(seq=2, id="u1", content="second"),
    ]
    s = '"v2"'
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        # A database as version 2 wrote it: feed keys were "id@revision".
        await conn.execute(f"CREATE SCHEMA {s}")
        await conn.execute(VERSION_TABLE.format(s=s))
        for number, script in enumerate(MIGRATIONS[:2], 1):
            for statement in _statements(script.format(s=s)):
                await conn.execute(statement)
            await conn.execute(f"INSERT INTO {s}.steadyrun_schema VALUES (%s, 0)", (number,))
        for m in old:
            await conn.execute(
                f"INSERT INTO {s}.feed (run_id, seq, key, message) VALUES ('r', %s, %s, %s)",
                (m.seq, f"{m.id}@{m.revision}", encode(m)),
            )
    async with PostgresStore(pg_dsn, schema="v2") as store:
        again = [await store.append("r", replace(m, seq=0, content="x")) for m in old]
        assert again == old  # the migrated rows still deduplicate
        other = await store.append("r", FeedMessage(id="a", revision="b@1", content="third"))
        assert other.seq == 3  # its old text key was "a@b@1" too
        claimed = (await store.claim("r", 3)).messages
        assert [m.content for m in claimed] == ["first", "second", "third"]
    assert await versions(pg_dsn, "v2") == list(range(1, SCHEMA_VERSION + 1))


async def test_schemas_keep_stores_apart(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as one, PostgresStore(pg_dsn, schema="other") as two:
        await one.save_step("r", step("r"))
        await one.append("r", msg("m1"))
        assert await two.load("r") is None
        assert await two.pending("r", 0) == 0
        assert (await two.append("r", msg("m9"))).seq == 1
    assert await versions(pg_dsn, "other") == list(range(1, SCHEMA_VERSION + 1))
    with pytest.raises(sr.UsageError, match="schema"):
        PostgresStore(pg_dsn, schema='x"; DROP TABLE runs; --')


# -- failures ---------------------------------------------------------------------------------


async def test_a_server_that_does_not_answer_is_a_store_error() -> None:
    dsn = f"host={pgkit.HOST} port=1 user=postgres password=s3cret dbname=x"
    async with PostgresStore(dsn, timeout=3) as store:
        with pytest.raises(sr.StoreError, match="cannot connect to PostgreSQL store") as exc:
            await store.load("r")
    assert "port=1" in str(exc.value) and "s3cret" not in str(exc.value)
    assert isinstance(exc.value.__cause__, psycopg.OperationalError)
    with pytest.raises(sr.UsageError, match="connection string"):
        PostgresStore("host=x bogus")


async def test_database_errors_are_store_errors(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", step("r"))
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("DROP TABLE steadyrun.context")
        with pytest.raises(sr.StoreError, match="PostgreSQL store.*context") as exc:
            await store.load("r")
        assert isinstance(exc.value.__cause__, psycopg.Error)
        assert await store.pending("r", 0) == 0  # the pool survived the failure


# -- feed ---------------------------------------------------------------------------------


async def test_appends_of_two_processes_number_consecutively(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn, max_size=8) as a, PostgresStore(pg_dsn, max_size=8) as b:
        stored = await asyncio.gather(
            *[(a if i % 2 else b).append("r", msg(f"m{i}")) for i in range(40)]
        )
        assert sorted(m.seq for m in stored) == list(range(1, 41))
        # The same message from both at once is stored once; both get the same copy back.
        twice = await asyncio.gather(
            *[s.append("r", msg(f"d{i}")) for i in range(10) for s in (a, b)]
        )
        for i in range(10):
            assert twice[2 * i] == twice[2 * i + 1]
        assert sorted({m.seq for m in twice}) == list(range(41, 51))
        claim = await b.claim("r", 50)
        assert [m.seq for m in claim.messages] == list(range(1, 51))
        assert {m.key for m in claim.messages} == {f"m{i}@1" for i in range(40)} | {
            f"d{i}@1" for i in range(10)
        }


async def test_claim_and_consume(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        for i in range(1, 4):
            await store.append("r", msg(f"m{i}"))
        assert await store.pending("r", 0) == 3
        assert [m.id for m in (await store.claim("r", 2)).messages] == ["m1", "m2"]
        await store.consume("r", 2)
        await store.consume("r", 1)  # never backwards
        assert [m.id for m in (await store.claim("r", 3)).messages] == ["m3"]
        with pytest.raises(sr.StoreError, match="at or below consumed"):
            await store.claim("r", 2)
        with pytest.raises(sr.StoreError, match="beyond input"):
            await store.claim("r", 4)
        await store.consume("r", 99)  # capped at the last message
        assert await store.pending("r", 0) == 0
        assert (await store.append("r", msg("m4"))).seq == 4
        assert await store.pending("r", 0) == 4


async def test_wait_pending_wakes_on_an_append_of_another_process(pg_dsn: str) -> None:
    # Polling backs off without bound here: only the notification can wake the waiter soon.
    async with PostgresStore(pg_dsn, poll_max=60) as a, PostgresStore(pg_dsn) as b:
        waiting = asyncio.create_task(a.wait_pending("r", 0, 30))
        await asyncio.sleep(1.4)  # the waiter's next poll is now about a second away
        assert not waiting.done()
        started = time.monotonic()
        await b.append("r", msg("m1"))
        assert await asyncio.wait_for(waiting, 5) == 1
        assert time.monotonic() - started < 0.4


async def test_wait_pending_polls_when_a_notification_is_lost(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn, poll_max=0.1) as store:
        await store.append("r", msg("m1"))
        waiting = asyncio.create_task(store.wait_pending("r", 1, 10))
        await asyncio.sleep(0.2)
        # Input written behind the store's back: no notification is sent.
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO steadyrun.feed (run_id, seq, message_id, revision, message)"
                " SELECT run_id, 2, 'm2', '1', message FROM steadyrun.feed"
            )
        started = time.monotonic()
        assert await asyncio.wait_for(waiting, 5) == 2
        assert time.monotonic() - started < 1


async def test_wait_pending_returns_at_once_or_times_out(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        started = time.monotonic()
        assert await store.wait_pending("r", 0, 0.3) == 0
        assert 0.3 <= time.monotonic() - started < 2
        await store.append("r", msg("m1"))
        assert await store.wait_pending("r", 0, 30) == 1
        assert await store.wait_pending("r", 1, 0) == 0
        # The same process wakes its own waiter too.
        waiting = asyncio.create_task(store.wait_pending("other", 0, 30))
        await asyncio.sleep(0.05)
        await store.append("other", msg("x"))
        assert await asyncio.wait_for(waiting, 1) == 1


async def test_wait_pending_survives_a_broken_listener(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn, poll_max=60) as a, PostgresStore(pg_dsn) as b:
        assert await a.wait_pending("r", 0, 0.05) == 0
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
            )
        await asyncio.sleep(0.2)
        waiting = asyncio.create_task(a.wait_pending("r", 0, 30))  # listens again
        await asyncio.sleep(0.7)  # the waiter's next poll is about half a second away
        started = time.monotonic()
        await b.append("r", msg("m1"))
        assert await asyncio.wait_for(waiting, 5) == 1
        assert time.monotonic() - started < 0.4


# -- run index ----------------------------------------------------------------------------


async def test_list_runs_orders_filters_and_pages(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        for i in range(10):
            status = "completed" if i % 2 else "suspended"
            await store.save_step(f"r{i}", step(f"r{i}", status, agent=f"a{i % 3}", minutes=i))
        runs = await store.list_runs()
        assert [r.run_id for r in runs] == [f"r{i}" for i in range(9, -1, -1)]
        assert runs[0].updated_at == T0 + timedelta(minutes=9) and runs[0].created_at == T0
        done = await store.list_runs(status="completed", limit=2)
        assert [r.run_id for r in done] == ["r9", "r7"]
        more = await store.list_runs(status="completed", updated_before=done[-1].updated_at)
        assert [r.run_id for r in more] == ["r5", "r3", "r1"]
        assert [r.run_id for r in await store.list_runs(agent="a0")] == ["r9", "r6", "r3", "r0"]
        assert await store.list_runs(agent="a0", status="running") == []


@pytest.mark.parametrize(
    ("where", "index"),
    [
        ("", "runs_by_update"),
        ("WHERE status = 'completed'", "runs_by_status"),
        ("WHERE agent = 'a'", "runs_by_agent"),
    ],
)
async def test_listing_queries_use_an_index(pg_dsn: str, where: str, index: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", step("r"))
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        # A tiny table would be scanned: leave the planner only index scans to choose from.
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET enable_bitmapscan = off")
        cur = await conn.execute(
            f"EXPLAIN SELECT run_id FROM steadyrun.runs {where}"
            " ORDER BY updated_us DESC NULLS LAST, run_id DESC LIMIT 100"
        )
        plan = " ".join(r[0] for r in await cur.fetchall())
    assert index in plan, plan
    assert "Sort" not in plan, plan  # the index gives the order


async def test_pgkit_fails_with_how_to_start_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgkit, "ADMIN_DSN", f"host={pgkit.HOST} port=1 user=postgres")
    with pytest.raises(pytest.fail.Exception, match="pg_ctlcluster --skip-systemctl-redirect"):
        async with pgkit.fresh_database():
            pass
    with pytest.raises(pytest.fail.Exception, match="does not answer"), pgkit.fresh_database_sync():
        pass
