"""What following a run over ``GET /runs/{id}/stream`` costs the store: whole-run loads, counted.

A run nobody follows is loaded twice (``test_service_counts``). A followed one is reloaded for
its display: each reload reads and decodes the whole run, and in ``benchmarks/service.py`` about
half of them found nothing new (the stream's look before it starts, a follower's first look and
its feed subscription's, the end's and the new subscription's after it). The counts here are
upper bounds on one followed run of the service's workload, its follower joining before the
run executes (the benchmark's case) or while its first model call is under way; each load is
also checked to have been needed: every reload that found nothing new is counted too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servicekit import AUTH, TOKEN

import steadyrun as sr
from steadyrun.service import App, create_app
from steadyrun.service._worker import Worker
from steadyrun.stream import _publisher
from steadyrun.testing import FunctionModel, call, text, tool_calls
from streamkit import until

NEVER = 20.0  # seconds a test gives what should happen at once

# Loads of a followed run from its start to its stream's end (the start's, the worker's, the
# follower's first look, the response's with its call's start, the end's), and the reloads
# among them that found nothing new. Before 2026-12-07 (nineteenth session): 10 and 5 with
# the follower joining first, 6 to 7 and 1 to 2 joining during the first model call.
LOADS = 5
IDLE_RELOADS = 1


class _Gate:
    """A model that waits for the test before its first answer (so a follower can join)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    def agent(self) -> sr.Agent:
        async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
            if any(m.role == "tool" for m in request.messages):
                return text("done")
            await self.go.wait()
            return tool_calls(call("work", {"job": "j"}, id="call_work"))

        async def work(job: str) -> str:
            """Do a small job.

            Args:
                job: The job.
            """
            return f"did {job}"

        model = FunctionModel(respond, name="gated")
        return sr.Agent(name="bench", model=model, tools=[sr.tool(work)])


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[App, httpx.AsyncClient, _Gate, dict]]:  # type: ignore[type-arg]
    gate = _Gate()
    store = sr.SqliteStore(tmp_path / "runs.db")
    counts = {"loads": 0, "idle": 0}
    load = store.load

    async def counted_load(run_id: str) -> Any:
        counts["loads"] += 1
        return await load(run_id)

    store.load = counted_load  # type: ignore[method-assign]
    app = App(store, agents=[gate.agent()])
    # The reload a response is due is the call's start's here, never the fallback timer's (a
    # slow fsync on a busy machine must not add one).
    app.publisher.max_wake_interval = 3600.0
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=3600.0)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield app, client, gate, counts
    await app.close()
    await store.close()


@pytest.fixture
def idle_reloads(monkeypatch: pytest.MonkeyPatch, served: tuple) -> None:  # type: ignore[type-arg]
    """Count the publisher's reloads that published nothing (found the run as it was)."""
    counts = served[3]
    refresh, publish = _publisher.Publisher._refresh, _publisher.Publisher._publish
    changed: list[bool] = []

    def counted_publish(self: Any, channel: Any, target: Any) -> None:
        before = channel.snapshot.seq
        publish(self, channel, target)
        changed.append(channel.snapshot.seq != before)

    async def counted_refresh(self: Any, channel: Any, run_id: str) -> None:
        changed.clear()
        await refresh(self, channel, run_id)
        if not any(changed):
            counts["idle"] += 1

    monkeypatch.setattr(_publisher.Publisher, "_publish", counted_publish)
    monkeypatch.setattr(_publisher.Publisher, "_refresh", counted_refresh)


async def _follow_one(
    app: App,
    client: httpx.AsyncClient,
    gate: _Gate,
    counts: dict,  # type: ignore[type-arg]
    *,
    taken: asyncio.Event | None = None,
) -> None:
    # The file, the worker and the first imports: not the followed run's.
    gate.go.set()
    warm = {"run_id": "warm", "agent": "bench", "input": "go"}
    r = await client.post("/runs", json=warm, headers=AUTH)
    assert r.status_code == 202, r.text
    await app.wait("warm")
    await app.publisher.wait_idle()
    gate.go.clear()
    if taken is not None:
        taken.clear()  # the worker takes the next run but waits to execute it
    counts.update(loads=0, idle=0)

    body = {"run_id": "r", "agent": "bench", "input": "go"}
    assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
    if taken is None:
        await until(lambda: app.executing("r"))
    followed = asyncio.create_task(client.get("/runs/r/stream?until=done", headers=AUTH))
    channel = await _channel(app, "r")
    await until(lambda: channel.followers == 1)
    if taken is not None:
        taken.set()  # the worker may execute it now
    gate.go.set()
    response = await asyncio.wait_for(followed, NEVER)
    assert response.status_code == 200
    assert '"text":"done"' in response.text.replace(" ", "")
    await app.wait("r")
    await app.publisher.wait_idle()


async def _channel(app: App, run_id: str) -> Any:
    await until(lambda: run_id in app.publisher._channels)
    return app.publisher._channels[run_id]


@pytest.mark.usefixtures("idle_reloads")
async def test_following_a_run_during_its_first_model_call_loads_it_few_times(
    served: tuple,  # type: ignore[type-arg]
) -> None:
    app, client, gate, counts = served
    await _follow_one(app, client, gate, counts)
    assert counts["loads"] <= LOADS, counts
    assert counts["idle"] <= IDLE_RELOADS, counts


@pytest.mark.usefixtures("idle_reloads")
async def test_following_a_run_from_before_it_executes_loads_it_few_times(
    served: tuple,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, client, gate, counts = served
    taken = asyncio.Event()
    taken.set()  # the warm-up run goes at once
    execute = Worker._execute

    async def held(self: Worker, lease: Any) -> None:
        await taken.wait()  # the follower joins while the worker holds the claim, unstarted
        await execute(self, lease)

    monkeypatch.setattr(Worker, "_execute", held)
    await _follow_one(app, client, gate, counts, taken=taken)
    assert counts["loads"] <= LOADS, counts
    assert counts["idle"] <= IDLE_RELOADS, counts
