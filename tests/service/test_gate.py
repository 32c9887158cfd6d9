"""The API's request gate on its own: the Authorization it accepts, the exact body bound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from steadyrun.service._gate import RequestGate

TOKEN = "s3cret-token"
LIMIT = 100


async def echo_size(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The app behind the gate: answers 200 with the size of the body it read."""
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return  # the gate refused the body and answered
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    gate = RequestGate(
        echo_size,
        tokens=[TOKEN],
        max_body_bytes=LIMIT,
        public=lambda path: False,
        query_token=lambda path: False,
    )
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {TOKEN}", 200),
        (f"bearer {TOKEN}", 200),  # the scheme is case-insensitive (RFC 9110)
        (f"Basic {TOKEN}", 401),  # the right token under another scheme is no bearer token
        (f"Token {TOKEN}", 401),
        (f"{TOKEN} {TOKEN}", 401),
        (TOKEN, 401),
        ("Bearer", 401),
        (f"Bearer {TOKEN}x", 401),
    ],
)
async def test_only_a_bearer_token_is_accepted(
    client: httpx.AsyncClient, authorization: str, status: int
) -> None:
    r = await client.post("/runs", content=b"{}", headers={"Authorization": authorization})
    assert r.status_code == status, r.text


async def chunks(size: int) -> AsyncIterator[bytes]:
    """A body of ``size`` bytes without Content-Length, sent in pieces."""
    sent = 0
    while sent < size:
        piece = min(30, size - sent)
        yield b"x" * piece
        sent += piece


@pytest.mark.parametrize(("size", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
async def test_the_body_bound_is_exact_by_length_and_while_read(
    client: httpx.AsyncClient, size: int, status: int
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    by_length = await client.post("/runs", content=b"x" * size, headers=auth)
    assert by_length.status_code == status
    read = await client.post("/runs", content=chunks(size), headers=auth)
    assert read.status_code == status
    if status == 200:
        assert by_length.text == read.text == str(size)  # the app read all of it
