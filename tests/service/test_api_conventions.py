"""The API's conventions: idempotent repeats, 409s, the inbox, cursor paging, OpenAPI, wording."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from servicekit import AUTH, TOKEN, asking_agent, support_agent

import steadyrun as sr
from steadyrun.control import await_external
from steadyrun.records import Checkpoint, RunRecord, Step
from steadyrun.service import App, create_app
from steadyrun.service._http_errors import http_message
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text, tool_calls


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


@pytest.fixture
def app() -> App:
    return App(MemoryStore(), agents=[support_agent(), asking_agent(), payer()])


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    api = create_app(app, tokens=[TOKEN])
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c
    await app.close()


async def start(client: httpx.AsyncClient, app: App, run_id: str, agent: str) -> None:
    body = {"run_id": run_id, "agent": agent, "input": "I was charged twice."}
    assert (await client.post("/runs", json=body, headers=AUTH)).status_code == 202
    await app.wait(run_id)


async def test_every_host_write_repeated_the_same_answers_the_same(
    client: httpx.AsyncClient, app: App
) -> None:
    await start(client, app, "d", "support")
    await start(client, app, "q", "asker")
    await start(client, app, "p", "payer")
    (decision,) = (await client.get("/runs/d/pending", headers=AUTH)).json()["items"]
    (question,) = (await client.get("/runs/q/pending", headers=AUTH)).json()["items"]
    (awaited,) = (await client.get("/runs/p/pending", headers=AUTH)).json()["items"]
    writes = [
        (f"/runs/d/calls/{decision['call_id']}/decision", {"approve": False, "reason": "no"}),
        (
            f"/runs/q/waits/{question['wait_id']}/answer",
            {"response": {"card": "visa", "amount_cents": 5}},
        ),
        (f"/runs/p/calls/{awaited['call_id']}/settle", {"result": "paid"}),
        ("/runs/p/messages", {"text": "thanks", "id": "m-1"}),
    ]
    for url, body in writes:
        first = await client.post(url, json=body, headers=AUTH)
        assert first.is_success, (url, first.json())
        for run_id in ("d", "q", "p"):
            await app.wait(run_id)  # the run went on meanwhile: the repeat comes late
        again = await client.post(url, json=body, headers=AUTH)
        assert again.status_code == first.status_code, (url, again.json())
        if url.endswith("/messages"):
            assert again.json() == first.json()
        else:
            assert again.json()["id"] == first.json()["id"]
    changed = [
        (writes[0][0], {"approve": True}),
        (writes[1][0], {"response": {"card": "mastercard", "amount_cents": 5}}),
        (writes[2][0], {"error": "declined"}),
    ]
    for url, body in changed:
        r = await client.post(url, json=body, headers=AUTH)
        assert r.status_code == 409 and r.json()["error"] == "conflict", url


async def test_actions_that_cannot_apply_answer_409(client: httpx.AsyncClient, app: App) -> None:
    await start(client, app, "q", "asker")
    (question,) = (await client.get("/runs/q/pending", headers=AUTH)).json()["items"]
    url = f"/runs/q/waits/{question['wait_id']}/answer"
    await client.post(url, json={"response": {"card": "visa", "amount_cents": 5}}, headers=AUTH)
    await app.wait("q")
    assert (await app.publisher.snapshot("q")).status == "completed"
    r = await client.post("/runs/q/resume", headers=AUTH)
    assert r.status_code == 409 and r.json()["error"] == "not_pending"
    assert "send it a message" in r.json()["message"]
    r = await client.post("/runs/q/cancel", headers=AUTH)
    assert r.status_code == 409 and r.json()["error"] == "not_pending"


async def test_the_inbox_lists_what_waits_across_runs_with_filters(
    client: httpx.AsyncClient, app: App
) -> None:
    await start(client, app, "d", "support")
    await start(client, app, "q", "asker")
    await start(client, app, "p", "payer")
    r = await client.get("/inbox", headers=AUTH)
    assert r.status_code == 200
    got = {(i["run_id"], i["item"]["kind"]) for i in r.json()["items"]}
    assert got == {("d", "decision"), ("q", "input"), ("p", "result")}
    assert r.json()["next_cursor"] is None
    only = (await client.get("/inbox?kind=input&kind=result", headers=AUTH)).json()["items"]
    assert {i["run_id"] for i in only} == {"q", "p"}
    mine = (await client.get("/inbox?agent=support", headers=AUTH)).json()["items"]
    assert [(i["run_id"], i["agent"], i["run_status"]) for i in mine] == [
        ("d", "support", "suspended")
    ]
    pages: list[str] = []
    cursor = ""
    while True:
        page = (await client.get(f"/inbox?limit=1{cursor}", headers=AUTH)).json()
        pages += [i["run_id"] for i in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert sorted(pages) == ["d", "p", "q"]
    bad = await client.get("/inbox?kind=nothing", headers=AUTH)
    assert bad.status_code == 422


async def test_runs_page_by_cursor_with_filters_and_search(
    client: httpx.AsyncClient, app: App
) -> None:
    same = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(7):  # four saved in one microsecond: a page boundary falls among them
        at = same if i < 4 else same + timedelta(minutes=i)
        run = RunRecord(
            run_id=f"{'ab' if i % 2 else 'cd'}-{i}",
            agent="support",
            status="completed" if i != 5 else "failed",
            created_at=at,
            updated_at=at,
            steps=1,
        )
        await app.store.save_step(run.run_id, Step(run=run, checkpoint=Checkpoint()))
    seen: list[str] = []
    cursor = ""
    while True:
        r = await client.get(f"/runs?limit=2{cursor}", headers=AUTH)
        assert r.status_code == 200
        page = r.json()
        assert len(page["runs"]) <= 2
        seen += [run["run_id"] for run in page["runs"]]
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert seen == ["cd-6", "ab-5", "cd-4", "cd-2", "cd-0", "ab-3", "ab-1"]
    prefixed = (await client.get("/runs?id_prefix=ab-", headers=AUTH)).json()["runs"]
    assert [run["run_id"] for run in prefixed] == ["ab-5", "ab-3", "ab-1"]
    failed = (await client.get("/runs?status=failed", headers=AUTH)).json()["runs"]
    assert [run["run_id"] for run in failed] == ["ab-5"]
    after = (same + timedelta(minutes=4, seconds=30)).isoformat()
    recent = (await client.get("/runs", params={"updated_after": after}, headers=AUTH)).json()
    assert [run["run_id"] for run in recent["runs"]] == ["cd-6", "ab-5"]
    bad = await client.get("/runs?cursor=not-a-cursor", headers=AUTH)
    assert bad.status_code == 422 and "cursor" in bad.json()["message"]


async def test_the_openapi_document_lists_every_routes_models_and_errors(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/openapi.json", headers=AUTH)).json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            assert op.get("summary") and op.get("description"), where
            codes = set(op["responses"])
            ok = [c for c in codes if c.startswith("2")]
            assert ok, where
            for code in ok:
                content = op["responses"][code]["content"]
                if "text/event-stream" not in content:
                    assert content["application/json"]["schema"], where
            errors = codes - set(ok)
            if path != "/health":
                assert {"401", "503"} <= errors, where
            if "{run_id}" in path:
                assert "404" in errors, where
            if "requestBody" in op:
                assert {"400", "413", "422"} <= errors, where
                schema = op["requestBody"]["content"]["application/json"]["schema"]
                assert schema["$ref"].startswith("#/components/schemas/"), where
            if op.get("parameters"):
                assert "422" in errors, where
            for code in errors:
                body = op["responses"][code]["content"]["application/json"]["schema"]
                assert body == {"$ref": "#/components/schemas/ErrorOut"}, (where, code)
    snapshot = doc["paths"]["/runs/{run_id}"]["get"]["responses"]["200"]["content"]
    data = doc["components"]["schemas"]["SnapshotDocument"]["properties"]["data"]
    assert snapshot["application/json"]["schema"]["$ref"].endswith("/SnapshotDocument")
    assert data["$ref"].endswith("/DisplaySnapshot")
    assert "decided_by" in doc["components"]["schemas"]["DisplayDecision"]["properties"]
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert refs and refs <= set(doc["components"]["schemas"]), refs - set(
        doc["components"]["schemas"]
    )


def test_errors_speak_in_http_terms() -> None:
    from steadyrun._errors import RunBusyError, RunNotFoundError, UsageError

    assert http_message(RunNotFoundError("x")) == "no run with id 'x'; start one with POST /runs"
    busy = http_message(RunBusyError("x", "worker-1", None))
    assert "POST /runs/x/messages" in busy and "send()" not in busy
    for python in (
        "run 'x' belongs to agent 'a', which this runtime does not know: pass agent=... or "
        "Runtime(store, agents=[...])",
        "an edit with tool calls needs the run's agent 'a': pass agent=... or "
        "Runtime(store, agents=[...])",
        "cannot check edited arguments of 'refund': this runtime does not know the run's agent "
        "or its tool (pass Runtime(store, agents=[...]))",
    ):
        said = http_message(UsageError(python))
        assert "Runtime" not in said and "pass" not in said, said
        assert "registered" in said and "service" in said, said
