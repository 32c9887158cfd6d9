"""The engine fixture: every scenario here runs once per engine, ``builtin`` and ``temporal``.

``cluster`` (per test module and engine) starts the worker processes and what they need: a
fresh PostgreSQL database for the built-in engine (a SQLite file with
``STEADYRUN_ENGINES_BUILTIN=sqlite``), a task queue on the session's dev server for Temporal.
``engine`` (per test) is the driver a scenario talks to. The Temporal params carry the
``temporal`` marker and are skipped, with the reason, where Temporal is missing.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from engine_agents import builtin_store
from engine_drivers import BuiltinDriver, TemporalDriver
from enginekit import Driver, Workers

import pgkit
import steadyrun as sr
from devserverkit import temporal_missing

_MISSING = temporal_missing()

ENGINES = [
    pytest.param("builtin", id="builtin"),
    pytest.param(
        "temporal",
        id="temporal",
        marks=[pytest.mark.temporal, pytest.mark.skipif(bool(_MISSING), reason=str(_MISSING))],
    ),
]


@dataclass
class Cluster:
    """One engine's worker processes and where a driver finds their runs."""

    name: str
    workers: Workers
    ledger: Path
    store_spec: str = ""  # builtin: the PostgreSQL DSN, or sqlite:<path>
    target: str = ""  # temporal: the dev server
    queue: str = ""
    store: Path | None = None  # temporal: the records' SQLite file


async def _migrate(spec: str) -> None:
    async with builtin_store(spec, pool=1) as store:
        await store.leases.runnable(limit=1)


@contextmanager
def _builtin_store(tmp: Path) -> Iterator[str]:
    if os.environ.get("STEADYRUN_ENGINES_BUILTIN") == "sqlite":
        yield f"sqlite:{tmp / 'runs.db'}"
        return
    with pgkit.fresh_database_sync(prefix="steadyrun_engines") as dsn:
        yield dsn


@pytest.fixture(scope="module", params=ENGINES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp(f"engine-{request.param}")
    ledger = tmp / "ledger"
    ledger.touch()
    if request.param == "builtin":
        with _builtin_store(tmp) as spec:
            asyncio.run(_migrate(spec))  # once, before two workers race to create the tables
            procs = Workers(["builtin", spec, str(ledger)], tmp)
            try:
                yield Cluster("builtin", procs, ledger, store_spec=spec)
            finally:
                procs.close()
        return
    server = request.getfixturevalue("temporal_server")
    queue = f"engines-{uuid.uuid4().hex}"
    store = tmp / "runs.db"
    asyncio.run(_create_sqlite(store))
    procs = Workers(["temporal", server.target, queue, str(store), str(ledger)], tmp)
    try:
        yield Cluster("temporal", procs, ledger, target=server.target, queue=queue, store=store)
    finally:
        procs.close()


async def _create_sqlite(path: Path) -> None:
    store = sr.SqliteStore(path)
    await store.load("none")  # creates the file and its tables
    await store.close()


@pytest.fixture
async def engine(cluster: Cluster) -> AsyncIterator[Driver]:
    """The driver of this test's engine (its clients live on the test's event loop)."""
    await asyncio.to_thread(cluster.workers.ready)  # the replacements of an earlier test's kills
    driver: Any
    if cluster.name == "builtin":
        driver = BuiltinDriver(cluster.store_spec, cluster.ledger, cluster.workers)
    else:
        from temporalio.client import Client

        from steadyrun.temporal import TemporalRuns

        client = await Client.connect(cluster.target)
        runs = TemporalRuns(client, task_queue=cluster.queue)
        assert cluster.store is not None
        driver = TemporalDriver(runs, cluster.store, cluster.ledger, cluster.workers)
    try:
        yield driver
    finally:
        await driver.close()
