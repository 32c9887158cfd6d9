"""A lazily loaded snapshot stays the run as loaded while another process changes the run.

A SQL store's load keeps the context, the call rows and the blocks as the bytes it read, and
decodes each when read (``test_lazy_context.py``). So a snapshot read after a second process
resumed the run to its end, or after that process was killed in the middle of a call's body,
must still show the run as it was at the load: the bytes were read in one transaction, and
nothing is read again when they are decoded. A load after the other process shows what it
wrote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from lazykit import RUN, lazy_agent

import pgkit
import steadyrun as sr
from steadyrun.stores import PostgresStore

pg_dsn = pgkit.database_fixture()
CHILD = Path(__file__).with_name("lazychild.py")
TESTS = Path(__file__).parents[1]


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, where): a SQLite file or a PostgreSQL database for both processes."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "runs.db")
    return "postgres", request.getfixturevalue("pg_dsn")


def _open(kind: str, where: str) -> Any:
    return sr.SqliteStore(where) if kind == "sqlite" else PostgresStore(where)


def _child(kind: str, where: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(CHILD.parent)])}
    return subprocess.Popen(
        [sys.executable, str(CHILD), kind, where, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def _suspended(kind: str, where: str) -> tuple[list[Any], list[Any]]:
    """The run suspended on its approval; its context and open batch, read eagerly."""
    async with _open(kind, where) as store:
        result = await sr.Runtime(store).run(lazy_agent(4), run_id=RUN, input="start")
        assert result.status == "suspended"
        eager = await store.load(RUN)
        assert eager is not None
        return list(eager.context), eager.batch_calls()


@asynccontextmanager
async def _loaded(kind: str, where: str) -> AsyncIterator[tuple[Any, Any, list[Any], list[Any]]]:
    """(store, the run loaded lazily, its context and open batch as loaded eagerly before)."""
    context, batch = await _suspended(kind, where)
    async with _open(kind, where) as store:
        snap = await store.load(RUN)  # nothing of the context decoded yet
        assert snap is not None
        yield store, snap, context, batch


async def test_a_snapshot_read_after_another_process_resumed_the_run_is_as_loaded(
    target: tuple[str, str],
) -> None:
    kind, where = target
    async with _loaded(kind, where) as (store, snap, context, batch):
        child = _child(kind, where)
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert out.split() == ["completed"]
        assert snap.context == context
        assert snap.batch_calls() == batch
        assert [c.status for c in batch].count("awaiting_decision") == 1
        now = await store.load(RUN)
        assert now is not None and now.run.status == "completed"
        assert now.context[: len(context)] == context and len(now.context) > len(context)


async def test_a_snapshot_read_after_the_other_process_was_killed_mid_body_is_as_loaded(
    target: tuple[str, str],
) -> None:
    kind, where = target
    async with _loaded(kind, where) as (store, snap, context, batch):
        child = _child(kind, where, "hold")
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "body"  # the approved call's body began
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        assert snap.context == context
        assert snap.batch_calls() == batch
        now = await store.load(RUN)  # what the killed process committed: its call's start
        assert now is not None and now.context == context
        statuses = {c.id: c.status for c in now.batch_calls()}
        assert sorted(statuses.values()) == ["running", "succeeded"]
        (approved,) = [c for c in batch if c.status == "awaiting_decision"]
        assert statuses[approved.id] == "running"
