"""The HTTP API: auth, limits, errors, idempotent start, host operations, the SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from servicekit import AUTH, TOKEN, make_app

from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore
from steadyrun.stream import DisplaySnapshot, apply, delta_from_json, snapshot_from_json


@pytest.fixture
def app() -> App:
    return make_app(MemoryStore())


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    api = create_app(app, tokens=[TOKEN, "another-token"], max_body_bytes=2000)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c
    await app.close()


async def until(app: App, run_id: str, status: str) -> dict[str, Any]:
    await app.wait(run_id)
    snap = await app.publisher.snapshot(run_id)
    assert snap.status == status, snap
    return {"status": snap.status}


async def test_health_needs_no_token_everything_else_does(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health")).json() == {"status": "ok"}
    for path in ("/runs", "/runs/x", "/runs/x/stream", "/openapi.json", "/agents", "/nope"):
        r = await client.get(path)
        assert r.status_code == 401, path
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"].startswith("Bearer")
    wrong = {"Authorization": "Bearer test-token-124"}
    assert (await client.get("/runs", headers=wrong)).status_code == 401
    assert (await client.get("/runs", headers={"Authorization": TOKEN})).status_code == 401
    assert (await client.get(f"/runs?token={TOKEN}")).status_code == 401  # stream route only
    assert (await client.get("/runs", headers={"Authorization": "Bearer another-token"})).is_success
    assert (await client.get("/openapi.json", headers=AUTH)).json()["paths"]["/runs"]


def test_a_service_without_tokens_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from steadyrun._errors import UsageError

    monkeypatch.delenv("STEADYRUN_API_TOKENS", raising=False)
    with pytest.raises(UsageError):
        create_app(make_app(MemoryStore()))
    with pytest.raises(UsageError):
        create_app(make_app(MemoryStore()), tokens=[""])
    monkeypatch.setenv("STEADYRUN_API_TOKENS", "a, b")
    create_app(make_app(MemoryStore()))


async def test_oversized_requests_are_refused(client: httpx.AsyncClient) -> None:
    big = {"agent": "support", "input": "x" * 5000, "run_id": "big"}
    r = await client.post("/runs", json=big, headers=AUTH)
    assert r.status_code == 413 and r.json()["error"] == "too_large"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        yield b'{"agent": "support", "input": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'"}'

    r = await client.post("/runs", content=chunks(), headers=AUTH)
    assert r.status_code == 413


async def test_invalid_input_gets_a_clear_422(client: httpx.AsyncClient) -> None:
    r = await client.post("/runs", json={"input": "hi"}, headers=AUTH)
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "invalid" and "agent" in body["message"]
    r = await client.post("/runs", json={"agent": "nobody", "input": "hi"}, headers=AUTH)
    assert r.status_code == 422 and "nobody" in r.json()["message"]
    r = await client.post("/runs", json={"agent": "support", "input": "hi", "x": 1}, headers=AUTH)
    assert r.status_code == 422
    r = await client.post("/runs", content=b"{not json", headers=AUTH)
    assert r.status_code == 400 and r.json()["error"] == "bad_request"  # not JSON: malformed
    r = await client.post(
        "/runs", json={"agent": "support", "input": "hi", "run_id": "a b"}, headers=AUTH
    )
    assert r.status_code == 422


async def test_start_is_idempotent_and_a_different_request_conflicts(
    client: httpx.AsyncClient, app: App
) -> None:
    body = {"run_id": "t-1", "agent": "support", "input": "I was charged twice."}
    first = await client.post("/runs", json=body, headers=AUTH)
    assert first.status_code == 202
    assert first.json() == {"run_id": "t-1", "created": True, "status": "running"}
    again = await client.post("/runs", json=body, headers=AUTH)
    assert again.status_code in (200, 202) and again.json()["created"] is False
    await until(app, "t-1", "suspended")
    again = await client.post("/runs", json=body, headers=AUTH)
    assert again.status_code == 200 and again.json()["created"] is False
    other = await client.post("/runs", json={**body, "input": "something else"}, headers=AUTH)
    assert other.status_code == 409 and other.json()["error"] == "conflict"
    listed = (await client.get("/runs", headers=AUTH)).json()["runs"]
    assert [r["run_id"] for r in listed] == ["t-1"]


async def test_approve_and_the_run_finishes(client: httpx.AsyncClient, app: App) -> None:
    body = {"run_id": "t-2", "agent": "support", "input": "I was charged twice."}
    await client.post("/runs", json=body, headers=AUTH)
    await until(app, "t-2", "suspended")
    items = (await client.get("/runs/t-2/pending", headers=AUTH)).json()["items"]
    assert [(i["kind"], i["name"]) for i in items] == [("decision", "refund")]
    assert items[0]["prompt"] == "Refund 4999 cents on A-1001?"
    call_id = items[0]["call_id"]
    url = f"/runs/t-2/calls/{call_id}/decision"
    bad = await client.post(url, json={"approve": True, "arguments": {"order_id": 5}}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["error"] == "invalid"
    edited = {"order_id": "A-1001", "amount_cents": 2500}
    r = await client.post(url, json={"approve": True, "arguments": edited}, headers=AUTH)
    assert r.status_code == 200 and r.json()["decision"]["edited"] is True
    await app.wait("t-2")
    snap = snapshot_from_json((await client.get("/runs/t-2", headers=AUTH)).content)
    assert snap.status == "completed"
    assert [c.status for c in snap.calls] == ["succeeded", "succeeded"]
    assert "2500" in (snap.calls[1].result or "")
    r = await client.post(url, json={"approve": False, "reason": "no"}, headers=AUTH)
    assert r.status_code == 409
    r = await client.post("/runs/t-2/calls/nope/decision", json={"approve": True}, headers=AUTH)
    assert r.status_code == 404
    r = await client.post("/runs/t-2/messages", json={"text": "Thanks! One more?"}, headers=AUTH)
    assert r.status_code == 202
    await app.wait("t-2")
    assert (await app.publisher.snapshot("t-2")).status == "suspended"  # a second refund


async def test_answers_are_validated_against_their_schema(
    client: httpx.AsyncClient, app: App
) -> None:
    await client.post("/runs", json={"run_id": "q", "agent": "asker", "input": "hi"}, headers=AUTH)
    await until(app, "q", "suspended")
    (item,) = (await client.get("/runs/q/pending", headers=AUTH)).json()["items"]
    assert item["kind"] == "input" and item["response_schema"]["type"] == "object"
    url = f"/runs/q/waits/{item['wait_id']}/answer"
    r = await client.post(url, json={"response": {"card": "amex", "amount_cents": 1}}, headers=AUTH)
    assert r.status_code == 422 and "card" in r.json()["message"]
    good = {"card": "visa", "amount_cents": 100}
    assert (await client.post(url, json={"response": good}, headers=AUTH)).status_code == 200
    await until(app, "q", "completed")
    r = await client.post("/runs/q/waits/zzz/answer", json={"response": 1}, headers=AUTH)
    assert r.status_code == 404


async def test_errors_of_unknown_runs_cancel_and_settle(client: httpx.AsyncClient) -> None:
    for method, path, body in [
        ("GET", "/runs/none", None),
        ("GET", "/runs/none/pending", None),
        ("GET", "/runs/none/stream", None),
        ("POST", "/runs/none/resume", None),
        ("POST", "/runs/none/messages", {"text": "hi"}),
        ("POST", "/runs/none/calls/c/settle", {"result": "ok"}),
    ]:
        r = await client.request(method, path, json=body, headers=AUTH)
        assert r.status_code == 404, path
        assert r.json()["error"] == "not_found" and "'none'" in r.json()["message"]
    r = await client.post("/runs/x/calls/c/settle", json={}, headers=AUTH)
    assert r.status_code == 422
    r = await client.post("/runs/x/cancel", headers=AUTH)
    assert r.status_code == 404


async def test_cancel_settles_open_calls_and_the_run_never_resumes(
    client: httpx.AsyncClient, app: App
) -> None:
    body = {"run_id": "t-9", "agent": "support", "input": "I was charged twice."}
    await client.post("/runs", json=body, headers=AUTH)
    await until(app, "t-9", "suspended")
    r = await client.post("/runs/t-9/cancel", headers=AUTH)
    assert r.status_code == 200
    out = r.json()
    assert out["runs"] == ["t-9"] and len(out["calls"]) == 1
    snap = snapshot_from_json((await client.get("/runs/t-9", headers=AUTH)).content)
    assert snap.status == "cancelled"
    assert [c.status for c in snap.calls] == ["succeeded", "cancelled"]
    r = await client.post("/runs/t-9/resume", headers=AUTH)
    assert r.status_code == 409 and r.json()["error"] == "cancelled"
    again = await client.post("/runs/t-9/cancel", headers=AUTH)
    assert again.status_code == 200 and again.json() == out  # answered as the first was


async def test_no_stack_trace_leaves_the_service(
    client: httpx.AsyncClient, app: App, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(**kw: Any) -> Any:
        raise RuntimeError("secret internals")

    app.store.list_runs = broken  # type: ignore[method-assign]
    r = await client.get("/runs", headers=AUTH)
    assert r.status_code == 500
    body = r.json()
    assert body["error"] == "internal" and body["error_id"]
    assert "secret" not in r.text and "Traceback" not in r.text
    assert body["error_id"] in caplog.text and "secret internals" in caplog.text


def fold_events(raw: str) -> tuple[DisplaySnapshot, list[str]]:
    snap: DisplaySnapshot | None = None
    ids: list[str] = []
    for chunk in raw.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in chunk.splitlines() if ": " in line and line[0] != ":"
        )
        if "event" not in fields:
            continue
        ids.append(fields["id"])
        if fields["event"] == "snapshot":
            snap = snapshot_from_json(fields["data"])
        else:
            assert snap is not None
            snap = apply(snap, delta_from_json(fields["data"]))
        assert json.loads(fields["data"])["format"] == 1
    assert snap is not None
    return snap, ids


async def test_the_stream_folds_to_the_run_and_resumes(client: httpx.AsyncClient, app: App) -> None:
    body = {"run_id": "s", "agent": "support", "input": "I was charged twice."}
    await client.post("/runs", json=body, headers=AUTH)
    await until(app, "s", "suspended")
    (item,) = (await client.get("/runs/s/pending", headers=AUTH)).json()["items"]

    async def approve_soon() -> None:
        await asyncio.sleep(0.05)
        url = f"/runs/s/calls/{item['call_id']}/decision"
        await client.post(url, json={"approve": True}, headers=AUTH)

    approving = asyncio.create_task(approve_soon())
    r = await client.get(f"/runs/s/stream?until=done&token={TOKEN}")
    await approving
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    snap, ids = fold_events(r.text)
    assert snap.status == "completed" and snap.pending == ()
    assert snap == await app.publisher.snapshot("s")
    # Resuming from an earlier event replays only what came after it.
    r = await client.get("/runs/s/stream?until=done", headers={**AUTH, "Last-Event-ID": ids[1]})
    replayed = [c for c in r.text.split("\n\n") if c.startswith("id: ")]
    assert "event: delta" in replayed[0]
    # The same changes, from the one after ids[1] to the last (consecutive fragments of a
    # block may come joined: one event standing for several, with first_seq).
    got = [c.split("\n", 1)[0].removeprefix("id: ") for c in replayed]
    assert set(got) <= set(ids[2:]) and got[-1] == ids[-1]
    first = json.loads(replayed[0].split("data: ", 1)[1])["data"]
    assert (first.get("first_seq") or first["seq"]) == int(ids[1].split(".")[1]) + 1
    # An unknown id: a fresh snapshot.
    r = await client.get("/runs/s/stream?until=done", headers={**AUTH, "Last-Event-ID": "x.1"})
    assert fold_events(r.text)[0] == snap


async def test_a_run_can_be_followed_the_moment_its_start_returns(
    client: httpx.AsyncClient, app: App
) -> None:
    body = {"run_id": "t-10", "agent": "support", "input": "I was charged twice."}
    r = await client.post("/runs", json=body, headers=AUTH)
    assert r.status_code == 202
    snap = await client.get("/runs/t-10", headers=AUTH)  # no 404 while it is about to start
    assert snap.status_code == 200
    await app.wait("t-10")


async def test_the_stream_pings_while_quiet_and_keeps_its_wire_format(app: App) -> None:
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=0.02)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        body = {"run_id": "p", "agent": "support", "input": "I was charged twice."}
        await client.post("/runs", json=body, headers=AUTH)
        await until(app, "p", "suspended")
        (item,) = (await client.get("/runs/p/pending", headers=AUTH)).json()["items"]

        async def approve_later() -> None:
            await asyncio.sleep(0.3)  # quiet for many poll intervals: pings meanwhile
            url = f"/runs/p/calls/{item['call_id']}/decision"
            await client.post(url, json={"approve": True}, headers=AUTH)

        approving = asyncio.create_task(approve_later())
        r = await client.get("/runs/p/stream?until=done", headers=AUTH)
        await approving
    assert r.headers["cache-control"] == "no-cache"
    assert r.text.startswith("retry: 2000\n\nid: ") and "\r" not in r.text
    assert ": keepalive\n\n" in r.text
    chunks = [c for c in r.text.split("\n\n") if c]
    for chunk in chunks:
        if chunk.startswith("id: "):
            # id, event and one data line: the JSON has no raw line breaks.
            assert [line.partition(": ")[0] for line in chunk.split("\n")] == [
                "id",
                "event",
                "data",
            ]
    assert fold_events(r.text)[0].status == "completed"


async def test_a_client_that_goes_away_ends_its_stream(app: App) -> None:
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=0.02)
    await app.start("g", "support", "I was charged twice.")
    await until(app, "g", "suspended")
    sent: list[dict[str, Any]] = []
    first_event = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await first_event.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if b"event: snapshot" in message.get("body", b""):
            first_event.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/runs/g/stream",
        "raw_path": b"/runs/g/stream",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", AUTH["Authorization"].encode()), (b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    # The run stays suspended, so only the disconnect can end this (endless) stream.
    await asyncio.wait_for(api(scope, receive, send), 5)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert app.publisher._channels["g"].followers == 0  # the follower was closed
