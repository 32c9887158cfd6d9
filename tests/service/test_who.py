"""Who: a token's principal is recorded on every host write made through the API, and shown.

The runtime's host writes take ``by=`` themselves (so the CLI and scripts can say who, too);
the stored records keep it in optional fields, so rows written before still read.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from servicekit import make_app

import steadyrun as sr
from steadyrun._codec import decode, encode
from steadyrun.control import await_external
from steadyrun.records import CallDecision, CallRecord, InputRequest, RunRecord
from steadyrun.service import App, Token, create_app
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text, tool_calls

ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


@pytest.fixture
def app() -> App:
    return make_app(MemoryStore())


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    api = create_app(app, tokens={"alice-token": "alice", "bob-token": "bob"})
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c
    await app.close()


async def started(client: httpx.AsyncClient, app: App, run_id: str, agent: str) -> None:
    body = {"run_id": run_id, "agent": agent, "input": "I was charged twice."}
    assert (await client.post("/runs", json=body, headers=ALICE)).status_code == 202
    await app.wait(run_id)


async def test_decisions_answers_messages_and_cancels_record_the_tokens_principal(
    client: httpx.AsyncClient, app: App
) -> None:
    await started(client, app, "d", "support")
    (item,) = (await client.get("/runs/d/pending", headers=ALICE)).json()["items"]
    url = f"/runs/d/calls/{item['call_id']}/decision"
    edited = {"order_id": "A-1001", "amount_cents": 2500}
    # A body's decided_by does not override the token: who decided is who holds it.
    body = {"approve": True, "arguments": edited, "decided_by": "someone else"}
    r = await client.post(url, json=body, headers=ALICE)
    assert r.status_code == 200 and r.json()["decision"]["decided_by"] == "alice"
    stored = await app.store.load_call("d", item["call_id"])
    assert stored is not None and stored.decision is not None
    assert stored.decision.decided_by == "alice"
    await app.wait("d")
    snap = json.loads((await client.get("/runs/d", headers=BOB)).content)["data"]
    assert [c["decision"]["decided_by"] for c in snap["calls"] if c["decision"]] == ["alice"]

    r = await client.post("/runs/d/messages", json={"text": "One more?", "id": "x"}, headers=BOB)
    assert r.status_code == 202 and r.json()["by"] == "bob"
    await app.wait("d")
    steps = (await client.get("/runs/d/history", headers=BOB)).json()["steps"]
    users = [m for s in steps for m in s["messages"] if m["role"] == "user"]
    assert [m["by"] for m in users] == ["alice", "bob"]  # who started it, who sent more

    r = await client.post("/runs/d/cancel", headers=BOB)
    assert r.status_code == 200 and r.json()["by"] == "bob"
    snapshot = await app.store.load("d")
    assert snapshot is not None and snapshot.run.cancelled_by == "bob"
    cancelled = [c for c in snapshot.calls if c.status == "cancelled"]
    assert cancelled and all("by bob" in (c.error or "") for c in cancelled)

    await started(client, app, "q", "asker")
    (item,) = (await client.get("/runs/q/pending", headers=BOB)).json()["items"]
    answer = {"response": {"card": "visa", "amount_cents": 100}}
    r = await client.post(f"/runs/q/waits/{item['wait_id']}/answer", json=answer, headers=BOB)
    assert r.status_code == 200 and r.json()["answered_by"] == "bob"
    stored = await app.store.load_call("q", item["call_id"])
    assert stored is not None and stored.input_request is not None
    assert stored.input_request.answered_by == "bob"


@sr.tool(side_effects=True)
def charge(amount: int) -> str:
    """Charge a card (the payment system answers later).

    Args:
        amount: Cents.
    """
    await_external({"amount": amount})


def payer() -> sr.Agent:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if request.messages[-1].role == "user":
            return tool_calls(("charge", {"amount": 5}))
        return text("Charged.")

    return sr.Agent(name="payer", model=FunctionModel(respond), tools=[charge])


async def test_a_settled_result_records_who_settled_it() -> None:
    app = App(MemoryStore(), agents=[payer()])
    api = create_app(app, tokens=[Token("carol-token", "carol")])
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    auth = {"Authorization": "Bearer carol-token"}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        body = {"run_id": "p", "agent": "payer", "input": "go"}
        await client.post("/runs", json=body, headers=auth)
        await app.wait("p")
        (item,) = (await client.get("/runs/p/pending", headers=auth)).json()["items"]
        assert item["kind"] == "result"
        url = f"/runs/p/calls/{item['call_id']}/settle"
        r = await client.post(url, json={"result": "paid"}, headers=auth)
        assert r.status_code == 200 and r.json()["settled_by"] == "carol"
    await app.close()


async def test_plain_tokens_act_as_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(MemoryStore())
    monkeypatch.setenv("STEADYRUN_API_TOKENS", "dave:dave-token, plain-token")
    api = create_app(app)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for token, who in (("dave-token", "dave"), ("plain-token", "operator")):
            r = await client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200 and r.json() == {"principal": who}
        bad = await client.get("/whoami", headers={"Authorization": "Bearer dave:dave-token"})
        assert bad.status_code == 401
    await app.close()


def test_rows_written_before_the_fields_existed_still_read() -> None:
    record = CallRecord(
        id="m1.c1",
        name="ask",
        status="succeeded",
        decision=CallDecision(approve=True, decided_by="ann"),
        input_request=InputRequest(wait_id="m1.c1.w1", prompt="?", response=1),
    )
    doc = json.loads(encode(record))
    del doc["data"]["settled_by"]
    del doc["data"]["input_request"]["answered_by"]
    old = decode(json.dumps(doc), CallRecord)
    assert old.settled_by is None and old.input_request is not None
    assert old.input_request.answered_by is None and old.decision is not None
    run = json.loads(encode(RunRecord(run_id="r", agent="a")))
    del run["data"]["cancelled_by"]
    assert decode(json.dumps(run), RunRecord).cancelled_by is None


def test_token_configurations_that_cannot_work_are_refused() -> None:
    from steadyrun._errors import UsageError
    from steadyrun.service._gate import parse_tokens, principals

    assert parse_tokens("alice:a-1, b-2,bob:x:y") == {
        "a-1": "alice",
        "b-2": "operator",
        "x:y": "bob",
    }
    assert principals(["t"]) == {"t": "operator"}
    for bad in ({}, [""], {"t": "two words"}, [Token("t", "alice"), Token("t", "bob")]):
        with pytest.raises(UsageError):
            principals(bad)
    with pytest.raises(UsageError, match="STEADYRUN_API_TOKENS"):
        create_app(make_app(MemoryStore()), tokens={"t": "not a name"})
