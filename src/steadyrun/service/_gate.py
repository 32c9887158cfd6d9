"""``RequestGate``: ASGI middleware in front of the API, for bearer tokens and request sizes.

(Not to be confused with a completion ``Guard`` of the runtime, which reviews a run's text.)
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs

__all__ = ["RequestGate"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]
ASGIApp = Callable[[Scope, Receive, Send], Any]


def _error(status: int, code: str, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="steadyrun"'))
    return status, headers, body


class RequestGate:
    """Checks every HTTP request before the app sees it.

    - A request needs ``Authorization: Bearer <token>`` with one of ``tokens`` (compared in
      constant time), except on ``public`` paths; on ``query_token`` paths a ``?token=``
      query parameter is accepted too (for ``EventSource``, which cannot set headers).
    - A body larger than ``max_body_bytes`` is refused with 413 (by ``Content-Length``, or
      while it is read for chunked bodies).

    Args:
        app: The ASGI app behind.
        tokens: The accepted tokens.
        max_body_bytes: The largest request body accepted.
        public: Whether a path needs no token.
        query_token: Whether a path also accepts the token as a query parameter.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Sequence[str],
        max_body_bytes: int,
        public: Callable[[str], bool],
        query_token: Callable[[str], bool],
    ) -> None:
        self.app = app
        self._tokens = [t.encode() for t in tokens]
        self.max_body_bytes = max_body_bytes
        self._public = public
        self._query_token = query_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if not self._public(path) and not self._authorized(scope, path):
            await self._respond(
                send, *_error(401, "unauthorized", "a valid bearer token is needed")
            )
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await self._respond(send, *_error(400, "bad_request", "invalid Content-Length"))
                return
            if int(length) > self.max_body_bytes:
                await self._respond(send, *self._too_large())
                return
        received = 0
        started = refused = False

        async def counted_receive() -> Message:
            nonlocal received, started, refused
            if refused:
                return {"type": "http.disconnect"}
            message: Message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    # Answer 413 now; the app sees the client go away and what it sends after
                    # that is dropped (frameworks turn errors while reading into 400s).
                    refused = True
                    if not started:
                        started = True
                        await self._respond(send, *self._too_large())
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, watched_send)

    def _too_large(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        return _error(413, "too_large", f"the request body is over {self.max_body_bytes} bytes")

    def _authorized(self, scope: Scope, path: str) -> bool:
        given: bytes | None = None
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given = token.strip()
        if given is None and self._query_token(path):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if query.get("token"):
                given = query["token"][0].encode()
        if not given:
            return False
        ok = False
        for token in self._tokens:  # every token compared: the time does not tell which
            ok |= hmac.compare_digest(given, token)
        return ok

    @staticmethod
    async def _respond(
        send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
