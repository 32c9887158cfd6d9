"""``GET /runs/{id}/stream?until=done`` ends when the run's execution ends, not at a poll.

The stream checks for its end at each event. The last delta of a completing run comes while
the embedded worker still executes it (the run's end is published from inside the
execution), so the check used to wait for the next keep-alive, a whole poll interval (1 s by
default) after the run completed: every follower of a run waited that long for its stream to
close (``benchmarks/service.py`` lost a quarter of its runs/s to it, a tenth of its slots
following). With a poll interval of an hour these streams close only if the run's end
closes them; the bound on each is a test's timeout, not a figure. In-process through ASGI,
and through a real uvicorn server on the loop and parser `steadyrun serve` would pick.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import httpx
import pytest
from servicekit import AUTH, TOKEN, make_app

import steadyrun as sr
from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text

HOUR = 3600.0
NEVER = 20.0  # seconds a test gives a stream that should close at once


@pytest.fixture
async def served() -> AsyncIterator[tuple[App, httpx.AsyncClient]]:
    app = make_app(MemoryStore())
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=HOUR)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield app, client
    await app.close()


async def _followed(app: App, run_id: str) -> None:
    """Until the stream's follower is registered with the publisher (bounded)."""
    for _ in range(int(NEVER / 0.005)):
        channel = app.publisher._channels.get(run_id)
        if channel is not None and channel.followers:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"nobody follows {run_id}")


async def _suspended(app: App, client: httpx.AsyncClient, run_id: str) -> str:
    body = {"run_id": run_id, "agent": "support", "input": "I was charged twice."}
    assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
    await app.wait(run_id)
    (item,) = (await client.get(f"/runs/{run_id}/pending", headers=AUTH)).json()["items"]
    return str(item["call_id"])


async def test_a_followed_run_that_completes_closes_its_stream(
    served: tuple[App, httpx.AsyncClient],
) -> None:
    app, client = served
    call_id = await _suspended(app, client, "a")
    followed = asyncio.create_task(client.get("/runs/a/stream?until=done", headers=AUTH))
    await _followed(app, "a")
    assert not followed.done(), "a suspended run's stream stays open"
    decision = {"approve": True}
    r = await client.post(f"/runs/a/calls/{call_id}/decision", json=decision, headers=AUTH)
    assert r.status_code == 200, r.text
    response = await asyncio.wait_for(followed, NEVER)
    assert response.status_code == 200
    assert '"status":"completed"' in response.text.replace(" ", "")
    assert not app.executing("a")


async def test_a_run_that_fails_closes_its_stream() -> None:
    gate = asyncio.Event()

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        await gate.wait()  # until the follower is in
        raise RuntimeError("the provider is down")

    app = App(MemoryStore(), agents=[sr.Agent(name="flaky", model=FunctionModel(respond))])
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=HOUR)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        body = {"run_id": "f", "agent": "flaky", "input": "go"}
        assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
        followed = asyncio.create_task(client.get("/runs/f/stream?until=done", headers=AUTH))
        await _followed(app, "f")
        assert not followed.done(), "a running run's stream stays open"
        gate.set()
        response = await asyncio.wait_for(followed, NEVER)
    await app.close()
    assert '"status":"failed"' in response.text.replace(" ", "")


def test_through_a_real_server_the_stream_closes_when_the_run_completes() -> None:
    # uvicorn in a thread, as `steadyrun serve` runs it (uvloop and httptools when installed).
    from servekit import serving

    gate = threading.Event()

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        # Until the follower is in (set from the test's thread, not the server's loop).
        await asyncio.to_thread(gate.wait, NEVER)
        return text("done")

    app = App(MemoryStore(), agents=[sr.Agent(name="quick", model=FunctionModel(respond))])
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=HOUR)
    kinds = []
    with serving(api, lifespan="on") as base:
        body = {"run_id": "q", "agent": "quick", "input": "go"}
        assert httpx.post(f"{base}/runs", json=body, headers=AUTH).status_code == 202
        url = f"{base}/runs/q/stream?until=done"
        with httpx.stream("GET", url, headers=AUTH, timeout=NEVER) as response:
            for line in response.iter_lines():  # a read timeout if the stream stays open
                if line.startswith("event:"):
                    kinds.append(line[6:].strip())
                    gate.set()
                elif line.startswith("data:") and '"status":"completed"' in line.replace(" ", ""):
                    kinds.append("completed")
    assert kinds[0] == "snapshot" and "completed" in kinds
