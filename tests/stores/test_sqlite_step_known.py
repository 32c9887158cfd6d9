"""SqliteStore: a loop step written without reading first, and its way back to the reads.

A loop step's write transaction reads nothing the store can know: the fence check is folded
into the ``work_log`` insert, the previous history segment is the one this store wrote last
under the same lease token, and a settled call's row is updated only while it still holds the
bytes this store wrote (its start). Each guess falls back to today's read when it is not
proven current: another store (another process) writing the same run between two steps, a
takeover, a retry, a transaction rolled back. These tests run both stores on real files and
compare every row with the general path's (a fresh store per step knows nothing).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from loopsteps import ARGS, answered, asked, loop_steps, run_record, settled_call, start_call
from steadyrun.chat import Message
from steadyrun.records import (
    CallUpdate,
    Checkpoint,
    ContextChange,
    Step,
)
from steadyrun.stores import Fence, LeaseLostError
from steadyrun.stores._history import next_segment
from steadyrun.stores._leases import fenced
from steadyrun.stores._sqlite_step import Known


def compacted(steps: int) -> Step:
    """A step that rewrites the context: a new log segment."""
    return Step(
        run=run_record(steps),
        checkpoint=Checkpoint(turn=1, model_calls=1),
        context=ContextChange(base=[Message.user("summary")], append=[]),
    )


TABLES = {
    "runs": "run_id, agent, status, created_us, updated_us, steps, record, checkpoint",
    "context": "run_id, idx, message",
    "calls": "run_id, call_id, rev, status, record",
    "blocks": "run_id, block_id, position, block",
    "step_history": "run_id, step, segment, entry",
    "context_segments": "run_id, segment, idx, message",
    "work_log": "root, row_id, run_id, steps, owner, token",
}


def rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as conn:
        return {
            t: conn.execute(f"SELECT {c} FROM {t} ORDER BY 1, 2, 3").fetchall()
            for t, c in TABLES.items()
        }


async def general(db: Path, steps: list[Step], fence: Fence | None = None) -> None:
    """Each step by a fresh store: it knows nothing, so every step reads as before."""
    for s in steps:
        async with sr.SqliteStore(db) as store:
            with fenced(fence):
                await store.save_step("r", s)


def claim(db: Path, owner: str, token: int) -> Fence:
    """Set the run's claim in the file directly (what a takeover by another process leaves)."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO work (run_id, owner, token) VALUES ('r', ?, ?) ON CONFLICT (run_id)"
            " DO UPDATE SET owner = excluded.owner, token = excluded.token",
            (owner, token),
        )
    return Fence(run_id="r", owner=owner, token=token)


async def make(db: Path) -> None:
    async with sr.SqliteStore(db) as store:
        await store.list_runs()  # opens the file: the schema


class Trace:
    """The statements of every connection the stores open from now on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sql: list[str] = []
        connect = sqlite3.connect

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(self.sql.append)
            return conn

        monkeypatch.setattr(sqlite3, "connect", traced)

    def reads(self) -> list[str]:
        """The SELECT statements since the last call, but the feed's bounds and pragmas."""
        out = [
            s
            for s in self.sql
            if s.startswith("SELECT") and "FROM feed" not in s and "sqlite_" not in s
        ]
        self.sql.clear()
        return out


# -- what the store writes without reading is what it wrote with the reads ----------------------


async def test_fenced_loop_steps_read_nothing_and_store_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(3)
    known, fresh = tmp_path / "known.db", tmp_path / "fresh.db"
    for db in (known, fresh):
        await make(db)
        fence = claim(db, "w1", 3)
    trace = Trace(monkeypatch)
    async with sr.SqliteStore(known) as store:
        trace.reads()
        with fenced(fence):
            await store.save_step("r", steps[0])
            first = trace.reads()  # the store knows nothing of the run yet
            for s in steps[1:]:
                await store.save_step("r", s)
            assert trace.reads() == []
    assert any("step_history" in s for s in first)
    await general(fresh, steps, fence)
    assert rows(known) == rows(fresh)
    async with sr.SqliteStore(fresh) as a, sr.SqliteStore(known) as b:
        assert await a.load("r") == await b.load("r")
        assert await a.history("r") == await b.history("r")


async def test_a_takeover_between_two_steps_is_refused_atomically(tmp_path: Path) -> None:
    steps = loop_steps(1)
    db = tmp_path / "r.db"
    await make(db)
    fence = claim(db, "w1", 7)
    async with sr.SqliteStore(db) as store:
        with fenced(fence):
            await store.save_step("r", steps[0])
            await store.save_step("r", steps[1])
        claim(db, "w2", 8)  # another process took the run over
        lost = pytest.raises(LeaseLostError, match="'w2' with token 8")
        with fenced(fence), lost:
            await store.save_step("r", steps[2])
        with sqlite3.connect(db) as conn:
            conn.execute("DELETE FROM work")
        with fenced(fence), pytest.raises(LeaseLostError, match="the claim is now nobody"):
            await store.save_step("r", steps[2])
        snap = await store.load("r")
        assert snap is not None and snap.run.steps == 1  # the refused steps wrote nothing
        assert [c.status for c in snap.calls] == ["running"]
        assert len(snap.context) == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT run_id, steps, owner, token FROM work_log").fetchall() == [
            ("r", 0, "w1", 7),
            ("r", 1, "w1", 7),
        ]


async def test_a_settle_after_a_host_changed_the_call_merges_with_the_stored_row(
    tmp_path: Path,
) -> None:
    steps = loop_steps(1)
    db = tmp_path / "r.db"
    async with sr.SqliteStore(db) as a, sr.SqliteStore(db) as b:
        for s in steps[:2]:
            await a.save_step("r", s)
        # The host settles the call in another process, after a started it: a's row is stale.
        await b.update_call("r", "m0.c1", CallUpdate(status="succeeded", result="by the host"))
        await a.save_step("r", steps[2])
        snap = await b.load("r")
        assert snap is not None
        [c] = snap.calls
        assert (c.status, c.result, c.rev) == ("succeeded", "by the host", 2)  # settled stays
        assert c.arguments == ARGS


async def test_a_takeover_that_rewrote_the_context_puts_the_next_step_in_its_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = loop_steps(2)
    known, fresh = tmp_path / "known.db", tmp_path / "fresh.db"
    later = [
        Step(
            run=run_record(4),
            checkpoint=Checkpoint(turn=1, model_calls=2),
            context=ContextChange(start=1, append=[asked(1)]),
            calls=[start_call(1)],
        ),
        Step(
            run=run_record(5),
            checkpoint=Checkpoint(turn=1, model_calls=2),
            context=ContextChange(start=2, append=[answered(1)]),
            calls=[settled_call(1)],
        ),
    ]
    for db in (known, fresh):
        await make(db)
    await general(fresh, steps[:3], claim(fresh, "w1", 1))
    await general(fresh, [compacted(3)], claim(fresh, "w2", 2))
    await general(fresh, later, claim(fresh, "w1", 3))
    trace = Trace(monkeypatch)
    async with sr.SqliteStore(known) as a, sr.SqliteStore(known) as b:
        with fenced(claim(known, "w1", 1)):
            for s in steps[:3]:
                await a.save_step("r", s)
        with fenced(claim(known, "w2", 2)):  # b takes over and compacts the context
            await b.save_step("r", compacted(3))
        trace.reads()
        with fenced(claim(known, "w1", 3)):  # a takes the run back: a new token
            await a.save_step("r", later[0])
            assert any("step_history" in s for s in trace.reads())  # read: not known
            await a.save_step("r", later[1])
            assert trace.reads() == []
    assert rows(known) == rows(fresh)
    with sqlite3.connect(known) as conn:
        assert conn.execute("SELECT step, segment FROM step_history ORDER BY step").fetchall()[
            -3:
        ] == [(3, 1), (4, 1), (5, 1)]


async def test_a_step_saved_again_and_a_rolled_back_step_read_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steadyrun.stores import _sqlite_step

    steps = loop_steps(2)
    known, fresh = tmp_path / "known.db", tmp_path / "fresh.db"
    for db in (known, fresh):
        await make(db)
    await general(fresh, [*steps[:3], steps[2], *steps[3:]])
    entry = _sqlite_step.sqlite_entry
    failing = [True]

    def flaky(*args: Any) -> int:
        if failing.pop() if failing else False:
            raise sqlite3.OperationalError("disk I/O error (injected)")
        return entry(*args)

    async with sr.SqliteStore(known) as store:
        for s in steps[:2]:
            await store.save_step("r", s)
        monkeypatch.setattr(_sqlite_step, "sqlite_entry", flaky)
        with pytest.raises(Exception, match="injected"):
            await store.save_step("r", steps[2])  # rolled back after its call's update
        await store.save_step("r", steps[2])
        await store.save_step("r", steps[2])  # a retry: the same step again
        for s in steps[3:]:
            await store.save_step("r", s)
    assert rows(known) == rows(fresh)


async def test_a_rewrite_saved_again_takes_the_segment_after_its_previous_step(
    tmp_path: Path,
) -> None:
    steps = loop_steps(1)
    known, fresh = tmp_path / "known.db", tmp_path / "fresh.db"
    for db in (known, fresh):
        await make(db)
    again = [*steps[:3], compacted(3), compacted(3)]  # the rewrite retried: still segment 1
    await general(fresh, again, claim(fresh, "w1", 1))
    async with sr.SqliteStore(known) as store:
        with fenced(claim(known, "w1", 1)):
            for s in again:
                await store.save_step("r", s)
    assert rows(known) == rows(fresh)
    with sqlite3.connect(known) as conn:
        assert conn.execute("SELECT max(segment) FROM step_history").fetchone() == (1,)


# -- the rule: a known segment is the one the history holds -------------------------------------

Op = tuple[str, int, bool]
ops = st.lists(
    st.tuples(
        st.sampled_from(["ours", "ours", "ours", "other", "reclaim", "failed"]),
        st.integers(0, 8),
        st.booleans(),
    ),
    max_size=40,
)


@given(ops)
def test_a_known_segment_is_the_previous_steps_segment(script: list[Op]) -> None:
    # One run's history as steps of this store (under its claim) and of another executor (a
    # takeover, which moves the token on) write it; ``Known`` answers only what it proves.
    history: dict[int, int] = {}
    known = Known()
    token = mine = 1
    for op, steps, rewrite in script:
        earlier = [s for s in history if s < steps]
        truth = history[max(earlier)] if earlier else None
        if op == "ours" and mine == token:
            fence = Fence(run_id="r", owner="w1", token=mine)
            guess = known.segment("r", fence, steps)
            assert guess is None or guess == truth
            latest = guess is not None or max(history, default=steps) <= steps  # as read
            history[steps] = next_segment(truth, rewrite)[0]
            known.wrote_step("r", fence, steps, history[steps] if latest else None)
        elif op == "other":
            token += 1
            history[steps] = next_segment(truth, rewrite)[0]
        elif op == "reclaim":
            token += 1
            mine = token
        elif op == "failed":  # a write that raised: it may have committed
            if mine == token:
                history[steps] = next_segment(truth, rewrite)[0]
            known.forget_step("r")
