"""Replaying wire exchanges through a provider SDK's own HTTP client (no network).

An exchange file (``tests/providers/wire/<name>.json``) is a list of request/response pairs::

    [{"request": {"method": "POST", "path": "/v1/chat/completions", "json": {...subset...}},
      "response": {"status": 200, "headers": {...}, "json": {...}}},
     {"request": {...}, "response": {"status": 200, "sse": [{"event": "...", "data": {...}}]}}]

Requests must come in order; each is matched by method, path suffix and a JSON subset (every
key given must be present with that value; lists compare element-wise). ``"sse"`` responses are
sent as ``text/event-stream`` (``data`` dicts are JSON-encoded; the string ``"[DONE]"`` is sent
as is). The exchanges are written from each provider's API reference: they are wire fixtures,
not captures of a live service (tests never reach one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

WIRE = Path(__file__).parent / "providers" / "wire"


def load(name: str) -> list[dict[str, Any]]:
    """The exchanges of ``wire/<name>.json``."""
    data: list[dict[str, Any]] = json.loads((WIRE / f"{name}.json").read_text())
    return data


def subset_mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` does not contain ``expected``, or ``None``."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            problem = subset_mismatch(value, actual[key], f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: expected a list of {len(expected)}, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            problem = subset_mismatch(e, a, f"{path}[{i}]")
            if problem:
                return problem
        return None
    return None if expected == actual else f"{path}: expected {expected!r}, got {actual!r}"


class WireReplay:
    """An ``httpx`` transport that answers each request with the next recorded response.

    Pass ``replay.transport`` to the SDK's client (``http_client=httpx.AsyncClient(
    transport=replay.transport)``). ``requests`` keeps what was sent; ``assert_done()`` fails on
    a mismatch or an unused exchange.
    """

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.exchanges = list(exchanges)
        self.requests: list[httpx.Request] = []
        self.bodies: list[Any] = []
        self.problems: list[str] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        index = len(self.requests) - 1
        body: Any = None
        if request.content:
            try:
                body = json.loads(request.content)
            except ValueError:
                body = request.content.decode(errors="replace")
        self.bodies.append(body)
        if index >= len(self.exchanges):
            return self._refuse(f"request {index + 1} was not recorded: {request.url}")
        want = self.exchanges[index]["request"]
        if want.get("method", "POST") != request.method:
            return self._refuse(f"request {index + 1}: method {request.method}, want {want}")
        if not request.url.path.endswith(want["path"]):
            path = request.url.path
            return self._refuse(f"request {index + 1}: path {path}, want {want['path']}")
        if "json" in want:
            problem = subset_mismatch(want["json"], body)
            if problem:
                return self._refuse(f"request {index + 1} body: {problem}")
        return self._response(self.exchanges[index]["response"])

    def _refuse(self, problem: str) -> httpx.Response:
        self.problems.append(problem)
        # 418: no SDK retries it, so the test sees the mismatch at once.
        return httpx.Response(418, json={"error": {"message": problem, "type": "wire_mismatch"}})

    @staticmethod
    def _response(spec: dict[str, Any]) -> httpx.Response:
        status = spec.get("status", 200)
        headers = dict(spec.get("headers", {}))
        if "sse" in spec:
            lines = []
            for event in spec["sse"]:
                if "event" in event:
                    lines.append(f"event: {event['event']}")
                data = event["data"]
                lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
                lines.append("")
            headers.setdefault("content-type", "text/event-stream")
            return httpx.Response(status, headers=headers, content="\n".join(lines) + "\n")
        if "json" in spec:
            return httpx.Response(status, headers=headers, json=spec["json"])
        return httpx.Response(status, headers=headers, content=spec.get("text", "").encode())

    def assert_done(self) -> None:
        """Fail on any mismatch, and if a recorded exchange was never requested."""
        assert not self.problems, "wire mismatches:\n" + "\n".join(self.problems)
        assert len(self.requests) == len(self.exchanges), (
            f"{len(self.exchanges) - len(self.requests)} recorded exchange(s) never requested"
        )
