"""The HTTP API's history and fork: GET /runs/{id}/history, POST /runs/{id}/fork."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from servicekit import AUTH, TOKEN, make_app

from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore


@pytest.fixture
def app() -> App:
    return make_app(MemoryStore())


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    api = create_app(app, tokens=[TOKEN])
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c
    await app.close()


async def finished(app: App, client: httpx.AsyncClient) -> None:
    """``t1``: looked up, refund approved, answered: seven steps."""
    body = {"run_id": "t1", "agent": "support", "input": "I was charged twice."}
    assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
    await app.wait("t1")
    r = await client.post("/runs/t1/calls/m2.c1/decision", json={"approve": True}, headers=AUTH)
    assert r.status_code == 200
    await app.wait("t1")


async def test_history_lists_the_steps_with_what_each_added(
    app: App, client: httpx.AsyncClient
) -> None:
    await finished(app, client)
    r = await client.get("/runs/t1/history", headers=AUTH)
    assert r.status_code == 200
    steps = r.json()["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6, 7]
    assert steps[0]["messages"] == [
        {
            "role": "user",
            "text": "I was charged twice.",
            "tool_calls": [],
            "tool_results": [],
            "by": "operator",
        }
    ]
    refund = steps[3]
    assert refund["phase"] == "batch" and refund["calls"] == [
        {"id": "m2.c1", "name": "refund", "status": "queued"}
    ]
    asked = refund["messages"][0]["tool_calls"]
    assert [(c["id"], c["name"]) for c in asked] == [("m2.c1", "refund")]
    assert steps[4]["status"] == "suspended"
    assert steps[-1]["status"] == "completed" and "refunded" in steps[-1]["text"]
    assert steps[-1]["forked_from"] is None
    missing = await client.get("/runs/nope/history", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


async def test_fork_makes_a_new_run_a_worker_continues(app: App, client: httpx.AsyncClient) -> None:
    await finished(app, client)
    before = (await client.get("/runs/t1", headers=AUTH)).json()
    body = {"at": 4, "new_run_id": "t1-b"}
    r = await client.post("/runs/t1/fork", json=body, headers=AUTH)
    assert r.status_code == 202
    assert r.json() == {
        "run_id": "t1-b",
        "forked_from": "t1",
        "step": 4,
        "created": True,
        "status": "suspended",
    }
    await app.wait("t1-b")
    fork = (await client.get("/runs/t1-b", headers=AUTH)).json()["data"]
    assert fork["status"] == "completed"
    refund = next(c for c in fork["calls"] if c["id"] == "m2.c1")
    assert refund["status"] == "cancelled"  # approved in t1, not run again in the fork
    assert (await client.get("/runs/t1", headers=AUTH)).json() == before
    again = await client.post("/runs/t1/fork", json=body, headers=AUTH)
    assert again.status_code == 200 and again.json()["created"] is False
    history = (await client.get("/runs/t1-b/history", headers=AUTH)).json()["steps"]
    assert history[0]["forked_from"] == {"run_id": "t1", "step": 4}


async def test_fork_with_edited_tool_calls_asks_for_a_decision_again(
    app: App, client: httpx.AsyncClient
) -> None:
    await finished(app, client)
    edit = {
        "tool_calls": [{"name": "refund", "arguments": {"order_id": "A-1001", "amount_cents": 100}}]
    }
    body = {"at": 4, "new_run_id": "t1-edit", "edit": edit}
    assert (await client.post("/runs/t1/fork", json=body, headers=AUTH)).status_code == 202
    await app.wait("t1-edit")
    pending = (await client.get("/runs/t1-edit/pending", headers=AUTH)).json()["items"]
    assert [(p["kind"], p["call_id"]) for p in pending] == [("decision", "m2.c1")]
    assert '"amount_cents": 100' in pending[0]["arguments"]
    text = {"at": 1, "new_run_id": "t1-text", "edit": {"text": "Where is my order?"}}
    assert (await client.post("/runs/t1/fork", json=text, headers=AUTH)).status_code == 202
    await app.wait("t1-text")
    steps = (await client.get("/runs/t1-text/history", headers=AUTH)).json()["steps"]
    assert steps[0]["messages"][0]["text"] == "Where is my order?"


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/runs/nope/fork", {"at": 1, "new_run_id": "x"}, 404, "not_found"),
        ("/runs/t1/fork", {"at": 99, "new_run_id": "x"}, 404, "not_found"),
        ("/runs/t1/fork", {"at": 2, "new_run_id": "t1"}, 409, "conflict"),
        ("/runs/t1/fork", {"at": 0, "new_run_id": "x"}, 422, "invalid"),
        ("/runs/t1/fork", {"at": 2, "new_run_id": "a/b"}, 422, "invalid"),
        ("/runs/t1/fork", {"at": 2, "new_run_id": "x", "what": 1}, 422, "invalid"),
        ("/runs/t1/fork", {"at": 3, "new_run_id": "x", "edit": {"text": "fake"}}, 422, "invalid"),
        ("/runs/t1/fork", {"at": 2, "new_run_id": "x", "edit": {}}, 422, "invalid"),
    ],
)
async def test_bad_fork_requests_get_typed_errors(
    app: App, client: httpx.AsyncClient, path: str, body: dict[str, object], status: int, code: str
) -> None:
    await finished(app, client)
    r = await client.post(path, json=body, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (status, code), r.json()
    assert (await client.get("/runs/x", headers=AUTH)).status_code == 404
