"""The App executes runs only through a worker on the claims; reads follow the store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from servicekit import AUTH, TOKEN, asking_agent, make_app, support_agent

import steadyrun as sr
from steadyrun.service import App, Worker, create_app
from steadyrun.service._worker import AGENT_META
from steadyrun.stores import SqliteStore
from steadyrun.stream import snapshot_from_json


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "runs.db") as s:
        yield s


async def _status(client: httpx.AsyncClient, run_id: str) -> str:
    r = await client.get(f"/runs/{run_id}", headers=AUTH)
    assert r.status_code == 200
    return snapshot_from_json(r.content).status


async def test_a_run_started_through_the_api_is_executed_by_another_worker(
    store: SqliteStore,
) -> None:
    app = App(store, agents=[support_agent(), asking_agent()], worker=False)
    api = create_app(app, tokens=[TOKEN])
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        body = {"run_id": "w-1", "agent": "support", "input": "I was charged twice."}
        assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
        assert await _status(client, "w-1") == "running"  # started, not executed yet
        assert not app.executing("w-1")
        # Another executor (a separate worker) on the same store does the work.
        other = Worker(sr.Runtime(store, agents=[support_agent()]), poll=0.1)
        await other.run_until_idle()
        snap = await store.load("w-1")
        assert snap is not None and snap.run.agent == "support"
        assert snap.run.status == "suspended"
        first = next(m for m in snap.context if m.id == "w-1:input")
        assert (first.meta or {})[AGENT_META] == "support"
        # No stale read: the API shows what the other executor stored.
        assert await _status(client, "w-1") == "suspended"
        (item,) = (await client.get("/runs/w-1/pending", headers=AUTH)).json()["items"]
        url = f"/runs/w-1/calls/{item['call_id']}/decision"
        assert (await client.post(url, json={"approve": True}, headers=AUTH)).is_success
        await other.run_until_idle()  # the decision woke the run up in the store
        assert await _status(client, "w-1") == "completed"
    await app.close()


async def test_the_app_executes_in_its_worker_and_cancel_stops_it(store: SqliteStore) -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    @sr.tool
    async def slow(x: str) -> str:
        """Wait.

        Args:
            x: Anything.
        """
        started.set()
        await gate.wait()
        return "done"

    model = sr.testing.FunctionModel(
        lambda r: (
            sr.testing.tool_calls(("slow", {"x": "1"}))
            if not any(m.role == "tool" for m in r.messages)
            else sr.testing.text("ok")
        )
    )
    app = App(store, agents=[sr.Agent(name="slowpoke", model=model, tools=[slow])])
    await app.open()
    try:
        await app.start("c-1", "slowpoke", "go")
        # The tool's body runs under the worker's claim (the worker's task exists before it
        # claims the run: executing() alone says nothing of the claim yet).
        await asyncio.wait_for(started.wait(), 10)
        assert app.executing("c-1")
        holder = await store.leases.holder("c-1")
        assert holder is not None and holder.owner == app.worker.owner  # type: ignore[union-attr]
        done = await app.cancel("c-1")
        assert done.runs == ["c-1"]
        await asyncio.wait_for(app.wait("c-1"), 5)
        assert not app.executing("c-1")
        gate.set()
        await asyncio.sleep(0.3)
        snap = await store.load("c-1")
        assert snap is not None and snap.run.status == "cancelled"
        assert (await app.publisher.snapshot("c-1")).status == "cancelled"
    finally:
        await app.close()


async def test_resume_wakes_the_run_for_the_worker(store: SqliteStore) -> None:
    app = make_app(store)
    await app.open()
    try:
        await app.start("r-1", "support", "I was charged twice.")
        await asyncio.wait_for(app.wait("r-1"), 10)
        assert (await app.publisher.snapshot("r-1")).status == "suspended"
        assert await app.resume("r-1") is True
        await asyncio.wait_for(app.wait("r-1"), 10)
        assert (await app.publisher.snapshot("r-1")).status == "suspended"
    finally:
        await app.close()
    assert app.worker is None or not app.worker.executing()
