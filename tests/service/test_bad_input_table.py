"""Every row of docs/service.md's "Bad input, per route" table, sent to the API as written.

The table is the test's data: a row's request is sent as it reads, and the answer must have
the row's status and error code, and a message containing the row's example. A route added
to the API without a row fails ``test_every_route_has_a_row``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from servicekit import AUTH, TOKEN, ask_customer, support_agent
from test_api_conventions import payer

import steadyrun as sr
from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text, tool_calls

DOC = Path(__file__).parents[2] / "docs" / "service.md"
HEADING = "## Bad input, per route"
# Routes whose only bad input is a missing or wrong token (401, the general table's).
NO_INPUT = {"GET /health", "GET /whoami", "GET /agents", "GET /openapi.json"}

# One app (with its runs) for the module: the rows only read it or are refused.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass(frozen=True)
class Row:
    route: str
    case: str
    method: str
    path: str
    body: str | None
    status: int
    error: str
    message: str

    def __str__(self) -> str:
        return f"{self.route}: {self.case}"


def _code(cell: str) -> str:
    found = re.fullmatch(r"`(.*)`", cell.strip())
    assert found, f"expected one `code` span, got {cell!r}"
    return found.group(1)


def table_rows() -> list[Row]:
    text = DOC.read_text()
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows: list[Row] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        route, case, request, status, message = cells
        method, _, rest = _code(request).partition(" ")
        path, _, body = rest.partition(" ")
        code, _, error = status.partition(" ")
        rows.append(
            Row(
                route=_code(route),
                case=case,
                method=method,
                path=path,
                body=body or None,
                status=int(code),
                error=_code(error),
                message=_code(message),
            )
        )
    return rows


ROWS = table_rows()


def asker() -> sr.Agent:
    """Asks the customer which card, for any number of runs."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if request.messages[-1].role == "user":
            return tool_calls(("ask_customer", {"question": "Which card?"}))
        return text("Thanks!")

    return sr.Agent(name="asker", model=FunctionModel(respond), tools=[ask_customer])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """An app with a run in every state the rows need (see the table's introduction)."""
    app = App(MemoryStore(), agents=[support_agent(), asker(), payer()])
    api = create_app(app, tokens=[TOKEN])
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        for run_id, agent in [
            ("waiting", "support"),
            ("decided", "support"),
            ("asking", "asker"),
            ("done", "asker"),
            ("paying", "payer"),
            ("gone", "support"),
        ]:
            body = {"run_id": run_id, "agent": agent, "input": "I was charged twice."}
            assert (await c.post("/runs", json=body, headers=AUTH)).status_code == 202
            await app.wait(run_id)
        writes = [
            ("/runs/decided/calls/m2.c1/decision", {"approve": False, "reason": "no"}),
            ("/runs/done/waits/m1.c1.w3/answer", {"response": {"card": "visa", "amount_cents": 5}}),
            ("/runs/gone/cancel", None),
        ]
        for url, write in writes:
            assert (await c.post(url, json=write, headers=AUTH)).is_success, url
        for run_id in ("decided", "done"):
            await app.wait(run_id)
            assert (await app.publisher.snapshot(run_id)).status == "completed"
        yield c
    await app.close()


async def test_the_table_has_rows() -> None:
    assert len(ROWS) >= 40


@pytest.mark.parametrize("row", ROWS, ids=str)
async def test_row(client: httpx.AsyncClient, row: Row) -> None:
    headers = dict(AUTH)
    content: bytes | None = None
    if row.body is not None:
        content = row.body.encode()
        if not row.case.startswith("not sent as JSON"):
            headers["Content-Type"] = "application/json"
        else:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
    r = await client.request(row.method, row.path, content=content, headers=headers)
    body = r.json()
    assert (r.status_code, body["error"]) == (row.status, row.error), body
    assert row.message in body["message"], body["message"]


async def test_every_route_has_a_row(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json", headers=AUTH)).json()
    routes = {f"{m.upper()} {p}" for p, ops in doc["paths"].items() for m in ops}
    covered = {r.route for r in ROWS}
    assert routes - NO_INPUT <= covered, sorted(routes - NO_INPUT - covered)
    assert covered <= routes, sorted(covered - routes)
