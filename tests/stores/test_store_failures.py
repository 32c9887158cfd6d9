"""A store that fails mid-write: the run raises a typed error, the last saved step stays intact,
and the next resume continues from it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgkit
import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.stores import Store
from steadyrun.testing import FunctionModel, text, tool_calls

N = 6
WRITES = ("save_step", "save_call", "update_call", "append", "claim", "consume")


def loop_model() -> FunctionModel:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        done = sum(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts)
        if done >= N:
            return text(f"charged {done} times")
        return tool_calls(("charge", {"n": done}))

    return FunctionModel(respond)


def agent(effects: list[int]) -> sr.Agent:
    @sr.tool(side_effects=True)
    def charge(n: int) -> str:
        """Charge once."""
        effects.append(n)
        return f"charge {n} done"

    return sr.Agent(name="billing", model=loop_model(), tools=[charge])


class FailingStore:
    """Wraps a store; the ``fail_at``-th write raises ``StoreError`` as a full disk would."""

    def __init__(self, inner: Store, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.writes += 1
            if self.writes == self.fail_at:
                raise sr.StoreError("disk full (injected)")
            return await attr(*args, **kwargs)

        return write


async def count_writes() -> int:
    store = FailingStore(sr.MemoryStore(), fail_at=0)
    result = await sr.Runtime(store).run(agent([]), run_id="r", input="bill")  # type: ignore[arg-type]
    assert result.text == f"charged {N} times"
    return store.writes


async def test_a_failing_write_at_any_point_leaves_a_resumable_run() -> None:
    total = await count_writes()
    assert total > 2 * N  # two per iteration: the response with the start, the result
    for fail_at in range(1, total + 1):
        inner = sr.MemoryStore()
        effects: list[int] = []
        failing = FailingStore(inner, fail_at)
        with pytest.raises(sr.StoreError, match="disk full"):
            await sr.Runtime(failing).run(agent(effects), run_id="r", input="bill")  # type: ignore[arg-type]
        snap = await inner.load("r")
        if snap is None:  # failed before the first step: the run never started
            result = await sr.Runtime(inner).run(agent(effects), run_id="r", input="bill")
        else:
            assert len(snap.context) == snap.checkpoint.context_length  # the last step is whole
            result = await sr.Runtime(inner).resume("r", agent=agent(effects))
        assert result.status == "completed", (fail_at, result.error)
        assert result.text == f"charged {N} times"
        # Nothing with side effects ran twice; a charge whose settlement was lost is flagged.
        assert len(effects) == len(set(effects))
        statuses = [c.status for c in result.calls]
        assert set(statuses) <= {"succeeded", "needs_review"}
        assert statuses.count("needs_review") <= 1


async def test_sqlite_disk_full_mid_run_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = sr.SqliteStore(db)
    effects: list[int] = []
    filled = False

    @sr.tool(side_effects=True)
    async def charge(n: int) -> str:
        """Charge once; the third charge fills the disk."""
        nonlocal filled
        effects.append(n)
        if n == 2 and not filled:
            filled = True

            def fill(conn: sqlite3.Connection) -> None:
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                conn.execute(f"PRAGMA max_page_count = {pages}")

            await store._db.write(fill)  # the limit of the connection that writes
        return f"charge {n} done " + "x" * 20_000  # needs new pages

    billing = sr.Agent(name="billing", model=loop_model(), tools=[charge])
    with pytest.raises(sr.StoreError, match="full"):
        await sr.Runtime(store).run(billing, run_id="r", input="bill")
    await store.close()

    reopened = sr.SqliteStore(db)  # a new process: the limit was the old connection's
    snap = await reopened.load("r")
    assert snap is not None and snap.run.status == "running"
    assert len(snap.context) == snap.checkpoint.context_length
    result = await sr.Runtime(reopened).resume("r", agent=billing)
    assert result.status == "completed" and result.text == f"charged {N} times"
    assert sorted(effects) == list(range(N))  # charge 2 ran once; its lost result: needs_review
    assert [c.status for c in result.calls].count("needs_review") == 1
    await reopened.close()


pg_dsn = pgkit.database_fixture()


async def test_postgres_connections_dropped_mid_run_then_resume(pg_dsn: str) -> None:
    store = sr.PostgresStore(pg_dsn)
    effects: list[int] = []
    dropped = False

    @sr.tool(side_effects=True)
    async def charge(n: int) -> str:
        """Charge once; during the third charge the server drops every connection."""
        nonlocal dropped
        effects.append(n)
        if n == 2 and not dropped:
            dropped = True
            async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        return f"charge {n} done"

    billing = sr.Agent(name="billing", model=loop_model(), tools=[charge])
    try:
        with pytest.raises(sr.StoreError):
            await sr.Runtime(store).run(billing, run_id="r", input="bill")
    finally:
        await store.close()

    async with sr.PostgresStore(pg_dsn) as reopened:  # a new process
        snap = await reopened.load("r")
        assert snap is not None and snap.run.status == "running"
        assert len(snap.context) == snap.checkpoint.context_length
        result = await sr.Runtime(reopened).resume("r", agent=billing)
        assert result.status == "completed" and result.text == f"charged {N} times"
    assert sorted(effects) == list(range(N))
    assert [c.status for c in result.calls].count("needs_review") == 1
