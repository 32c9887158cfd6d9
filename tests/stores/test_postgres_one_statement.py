"""PostgresStore: a loop step as one statement (``save_loop_step``), and its way back.

The loop's steps go out as one call of a server function: one round trip and one commit. The
function checks what the store assumed (the lease, the log segment, where the log ends, the
call rows this store wrote last) and refuses the step otherwise; the store then writes it by
its general path. These tests pin both halves: what one statement stores is byte for byte what
the general path stores, and every refusal ends with the general path's result (or error) and
a pool whose connections are idle.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import psycopg
import pytest
from pgpaths import as_left_by, general_path_only, half_written, loop_step_functions

import pgkit
import steadyrun as sr
from loopsteps import ARGS, answered, asked, loop_steps, run_record, settled_call, start_call
from steadyrun.chat import Message
from steadyrun.records import (
    CallUpdate,
    Checkpoint,
    ContextChange,
    Step,
)
from steadyrun.stores import FeedMessage, Fence, LeaseLostError, PostgresStore, _postgres
from steadyrun.stores._leases import fenced
from steadyrun.stores._postgres_schema import SCHEMA_VERSION

pg_dsn = pgkit.database_fixture()


class Spy:
    """Records whether ``PostgresStore._save_fast`` wrote each step (its answer not ``None``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: list[bool] = []
        original = PostgresStore._save_fast

        async def spied(store: PostgresStore, *args: Any) -> int | None:
            answer = await original(store, *args)
            self.answers.append(answer is not None)
            return answer

        monkeypatch.setattr(PostgresStore, "_save_fast", spied)


TABLES = {
    "runs": "run_id, agent, status, created_us, updated_us, steps, record, checkpoint",
    "context": "run_id, idx, message",
    "calls": "run_id, call_id, rev, status, record",
    "blocks": "run_id, block_id, position, block",
    "step_history": "run_id, step, segment, entry",
    "context_segments": "run_id, segment, idx, message",
    "work_log": "root, run_id, steps, owner, token",
}
ORDER = {"calls": "row_id", "work_log": "row_id"}


async def rows(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of the schema's run tables, in a fixed order."""
    out = {}
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        for table, columns in TABLES.items():
            order = ORDER.get(table, "1, 2, 3")
            cur = await conn.execute(f'SELECT {columns} FROM "{schema}".{table} ORDER BY {order}')
            out[table] = await cur.fetchall()
    return out


async def idle_connections(dsn: str) -> list[str]:
    """The states of the other connections to the database (the store's pool)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT state FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return sorted(r[0] for r in await cur.fetchall())


# -- one statement stores what the general path stores -------------------------------------------


async def test_loop_steps_are_one_statement_each_and_store_the_same_rows(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(3)
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn, schema="fast") as fast:
        for s in steps:
            await fast.save_step("r", s)
        fast_bytes = list(fast.step_bytes)
        fast_snap = await fast.load("r")
        fast_history = await fast.history("r")
    # The first step has no segment hint yet; every later one is one statement.
    assert spy.answers == [False] + [True] * (len(steps) - 1)
    spy.answers.clear()
    with general_path_only():
        async with PostgresStore(pg_dsn, schema="general") as general:
            for s in steps:
                await general.save_step("r", s)
            assert general.step_bytes == fast_bytes
            assert await general.load("r") == fast_snap
            assert await general.history("r") == fast_history
    assert await rows(pg_dsn, "fast") == await rows(pg_dsn, "general")
    # The call rows refer to the log for their arguments and results, as the general path's do.
    stored = await rows(pg_dsn, "fast")
    assert all(b"x" * 1018 not in r[4] for r in stored["calls"])
    assert fast_snap is not None and fast_snap.calls[1].arguments == ARGS


def test_a_loop_step_sends_its_parameters_in_binary() -> None:
    # Text format hex-escaped every document (twice its size) and each array through a regex
    # (benchmarks/pg_params.py); the server reads the binary the same (the test above). Each
    # parameter is typed: sent in binary, the server could not guess one.
    sql = _postgres.fast_sql('"s"').sql.decode()
    assert sql.count("::") == 30 and "%" not in sql
    assert [int(n) for n in re.findall(r"\$(\d+)::", sql)] == list(range(1, 31))


async def test_fenced_loop_steps_check_the_lease_and_log_their_writer(pg_dsn: str) -> None:
    steps = loop_steps(1)
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", steps[0])
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
            await admin.execute(
                "INSERT INTO steadyrun.work (run_id, owner, token) VALUES ('r', 'w1', 7)"
            )
            with fenced(Fence(run_id="r", owner="w1", token=7)):
                await store.save_step("r", steps[1])
            await admin.execute("UPDATE steadyrun.work SET owner = 'w2', token = 8")  # taken over
            lost = pytest.raises(LeaseLostError, match="'w2' with token 8")
            with fenced(Fence(run_id="r", owner="w1", token=7)), lost:
                await store.save_step("r", steps[2])
            cur = await admin.execute("SELECT run_id, steps, owner, token FROM steadyrun.work_log")
            assert await cur.fetchall() == [("r", 1, "w1", 7)]
        snap = await store.load("r")
        assert snap is not None and snap.run.steps == 1  # the refused step wrote nothing
        assert [c.status for c in snap.calls] == ["running"]
        assert len(snap.context) == 2
    assert await idle_connections(pg_dsn) == []


# -- refusals: the general path writes the step -------------------------------------------------


async def test_a_call_another_process_changed_is_merged_by_the_general_path(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(1)
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn) as a, PostgresStore(pg_dsn) as b:
        for s in steps[:2]:
            await a.save_step("r", s)
        # The host settles the call in another process, after a started it.
        await b.update_call("r", "m0.c1", CallUpdate(status="succeeded", result="by the host"))
        await a.save_step("r", steps[2])  # a's settle: its row is not the one a wrote
        assert spy.answers == [False, True, False]
        snap = await b.load("r")
        assert snap is not None
        [c] = snap.calls
        assert (c.status, c.result, c.rev) == ("succeeded", "by the host", 2)  # settled stays


async def test_a_step_saved_again_replaces_its_messages(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(1)
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn) as store:
        for s in steps[:3]:
            await store.save_step("r", s)
        await store.save_step("r", steps[2])  # a retry: the same messages, the same call
        assert spy.answers == [False, True, True, False]
        again = await rows(pg_dsn, "steadyrun")
        for s in steps[3:]:
            await store.save_step("r", s)
        snap = await store.load("r")
    with general_path_only():
        async with PostgresStore(pg_dsn, schema="general") as general:
            for s in steps[:3]:
                await general.save_step("r", s)
            assert await rows(pg_dsn, "general") == again
            for s in steps[3:]:
                await general.save_step("r", s)
            assert await general.load("r") == snap


async def test_a_gap_in_the_log_is_refused(pg_dsn: str) -> None:
    steps = loop_steps(1)
    async with PostgresStore(pg_dsn) as store:
        await store.save_step("r", steps[0])
        await store.save_step("r", steps[1])
        with pytest.raises(sr.StoreError, match="leaves a gap"):
            await store.save_step("r", steps[3])  # step 2's message is missing
        snap = await store.load("r")
        assert snap is not None and snap.run.steps == 1
    assert await idle_connections(pg_dsn) == []


async def test_a_context_another_process_rewrote_puts_the_refs_in_its_segment(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(2)
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn) as a, PostgresStore(pg_dsn) as b:
        for s in steps[:3]:
            await a.save_step("r", s)
        # b compacts the context: a new base, a new segment a does not know of.
        compacted = Step(
            run=run_record(3),
            checkpoint=Checkpoint(turn=1, model_calls=1),
            context=ContextChange(base=[Message.user("summary")], append=[]),
        )
        await b.save_step("r", compacted)
        k = 1
        later = [
            Step(
                run=run_record(4),
                checkpoint=Checkpoint(turn=1, model_calls=2),
                context=ContextChange(start=1, append=[asked(k)]),
                calls=[start_call(k)],
            ),
            Step(
                run=run_record(5),
                checkpoint=Checkpoint(turn=1, model_calls=2),
                context=ContextChange(start=2, append=[answered(k)]),
                calls=[settled_call(k)],
            ),
        ]
        for s in later:
            await a.save_step("r", s)
        assert spy.answers == [False, True, True, False, True]
        snap = await b.load("r")
        assert snap is not None
        assert [m.text for m in snap.context[:1]] == ["summary"]
        assert [(c.id, c.arguments, c.result) for c in snap.calls] == [
            ("m0.c1", ARGS, "result 0"),
            ("m1.c1", ARGS, "result 1"),
        ]
        assert [e.segment for e in await b.history("r")] == [0, 0, 0, 1, 1, 1]


# -- the pool after refusals, failures and cancellations ------------------------------------------


async def test_a_cancelled_step_leaves_no_transaction_and_nothing_written(pg_dsn: str) -> None:
    steps = loop_steps(1)
    async with PostgresStore(pg_dsn, max_size=2) as store:
        for s in steps[:2]:
            await store.save_step("r", s)
        async with await psycopg.AsyncConnection.connect(pg_dsn) as blocker:
            # Another transaction holds the run row: the step waits for it inside the server.
            await blocker.execute("SELECT 1 FROM steadyrun.runs WHERE run_id = 'r' FOR UPDATE")
            saving = asyncio.create_task(store.save_step("r", steps[2]))
            for _ in range(500):
                if "active" in await idle_connections(pg_dsn):
                    break
                await asyncio.sleep(0.01)
            else:
                pytest.fail("the step never reached the server")
            saving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await saving
            await blocker.rollback()
        assert "idle in transaction" not in await idle_connections(pg_dsn)
        snap = await store.load("r")
        assert snap is not None and snap.run.steps == 1  # the cancelled step wrote nothing
        for s in steps[2:]:  # and the store goes on as if it had never been sent
            await store.save_step("r", s)
        snap = await store.load("r")
        assert snap is not None and snap.run.status == "completed"
        assert [c.status for c in snap.calls] == ["succeeded"]
    assert await idle_connections(pg_dsn) == []


async def test_a_version_5_database_gets_the_function_and_keeps_its_runs(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = await half_written(pg_dsn)
    # What a release before version 6 left: the same tables, no function.
    await as_left_by(
        pg_dsn, 5, f"DROP FUNCTION {LOOP_STEP_V7}", "DROP FUNCTION steadyrun.save_loop_step"
    )
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn) as store:
        for s in steps[3:]:
            await store.save_step("r", s)
        snap = await store.load("r")
    assert spy.answers == [False, True, True]  # the first step of a new store learns its segment
    assert snap is not None and snap.run.status == "completed"
    assert [(c.status, c.result) for c in snap.calls] == [
        ("succeeded", "result 0"),
        ("succeeded", "result 1"),
    ]
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT max(version) FROM steadyrun.steadyrun_schema")
        assert await cur.fetchone() == (SCHEMA_VERSION,)


LOOP_STEP_V7 = (
    "steadyrun.save_loop_step(text, text, text, bigint, bigint, bigint, bytea, bytea, text,"
    " text, bigint, text[], text[], bigint, bigint, bytea[], text[], bigint[], text[], bytea[],"
    " text[], bigint[], text[], bytea[], bytea[], text[], bigint[], bytea[], bytea, bigint)"
)
"""Version 7's overload of the function (version 6's takes all but the last argument)."""


async def test_a_version_6_database_gets_the_step_that_tells_the_feed(pg_dsn: str) -> None:
    steps = await half_written(pg_dsn)
    # What version 6 left: the function without the feed, which version 7 calls.
    await as_left_by(pg_dsn, 6, f"DROP FUNCTION {LOOP_STEP_V7}")
    assert len(await loop_step_functions(pg_dsn)) == 1
    async with PostgresStore(pg_dsn) as store:
        await store.append("r", FeedMessage(id="late", content="one more thing"))
        answers = [await store.save_step("r", s) for s in steps[3:]]
        snap = await store.load("r")
    # Not claimed by these steps (claimed_through 0): it waits, as message 1.
    assert answers == [1] * len(steps[3:])
    assert snap is not None and snap.run.status == "completed"
    assert [c.status for c in snap.calls] == ["succeeded", "succeeded"]
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT max(version) FROM steadyrun.steadyrun_schema")
        assert await cur.fetchone() == (SCHEMA_VERSION,)
    # Version 6's function stays beside the overload: a process of the older release, still
    # connected, writes its steps with it.
    assert len(await loop_step_functions(pg_dsn)) == 2


async def test_a_store_that_loaded_the_run_writes_its_next_step_in_one_statement(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(2)
    async with PostgresStore(pg_dsn) as store:
        for s in steps[:3]:
            await store.save_step("r", s)
    spy = Spy(monkeypatch)
    async with PostgresStore(pg_dsn) as resumed:  # a new process resumes the run
        assert await resumed.load("r") is not None
        for s in steps[3:]:
            await resumed.save_step("r", s)
        snap = await resumed.load("r")
    assert spy.answers == [True, True, True]  # the load told it the run's log segment
    assert snap is not None and [c.status for c in snap.calls] == ["succeeded", "succeeded"]
