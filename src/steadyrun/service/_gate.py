"""``RequestGate``: ASGI middleware in front of the API, for bearer tokens and request sizes.

(Not to be confused with a completion ``Guard`` of the runtime, which reviews a run's text.)
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from steadyrun._errors import UsageError

__all__ = ["OPERATOR", "PRINCIPAL_SCOPE", "RequestGate", "Token", "parse_tokens", "principals"]

OPERATOR = "operator"
"""The principal of a token configured without a name."""

PRINCIPAL_SCOPE = "steadyrun.principal"
"""Key of the caller's principal in the ASGI scope of a request the gate let through."""

_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,200}$")


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token of the API and who holds it.

    What the API records on every write a request makes (a decision's ``decided_by``, an
    answer's ``answered_by``, ...) is the principal of the request's token.

    Attributes:
        value: The secret the client sends (``Authorization: Bearer <value>``).
        principal: Who holds it: a name of letters, digits and ``. _ @ -``.
    """

    value: str
    principal: str = OPERATOR


def principals(tokens: Iterable[str | Token] | Mapping[str, str]) -> dict[str, str]:
    """The principal of every accepted token, by token.

    ``tokens`` is a mapping of token to principal, or tokens (``Token`` or a bare string, whose
    principal is ``OPERATOR``).

    Raises:
        UsageError: None is given, one is empty, a principal is not a plain name, or one token
            is given to two principals.
    """
    pairs: list[tuple[str, str]]
    if isinstance(tokens, Mapping):
        pairs = list(tokens.items())
    else:
        pairs = [(t.value, t.principal) if isinstance(t, Token) else (t, OPERATOR) for t in tokens]
    out: dict[str, str] = {}
    for value, principal in pairs:
        if not isinstance(value, str) or not value:
            raise UsageError("the API's bearer tokens must be non-empty strings")
        if not _NAME.match(principal):
            raise UsageError(
                f"principal {principal!r} is not a plain name (letters, digits and . _ @ -)"
            )
        if out.setdefault(value, principal) != principal:
            raise UsageError("one token is given to two principals")
    if not out:
        raise UsageError("the API needs at least one non-empty bearer token")
    return out


def parse_tokens(text: str) -> dict[str, str]:
    """The tokens of ``STEADYRUN_API_TOKENS``, with the principal of each.

    Entries are comma-separated, each ``principal:token`` or a bare token (its principal is
    ``OPERATOR``). An entry whose part before the first ``:`` is not a plain name is a bare token.
    """
    out: list[Token] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, value = entry.partition(":")
        if sep and value and _NAME.match(name):
            out.append(Token(value, name))
        else:
            out.append(Token(entry))
    return principals(out)


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
      query parameter is accepted too (for ``EventSource``, which cannot set headers). The
      token's principal goes in the scope under ``PRINCIPAL_SCOPE``.
    - A body larger than ``max_body_bytes`` is refused with 413 (by ``Content-Length``, or
      while it is read for chunked bodies).

    Args:
        app: The ASGI app behind.
        tokens: The accepted tokens, with the principal of each (see ``principals``).
        max_body_bytes: The largest request body accepted.
        public: Whether a path needs no token.
        query_token: Whether a path also accepts the token as a query parameter.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Mapping[str, str] | Sequence[str | Token],
        max_body_bytes: int,
        public: Callable[[str], bool],
        query_token: Callable[[str], bool],
    ) -> None:
        self.app = app
        self._tokens = [(t.encode(), who) for t, who in principals(tokens).items()]
        self.max_body_bytes = max_body_bytes
        self._public = public
        self._query_token = query_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        principal = self._principal(scope, path)
        if principal is not None:
            scope[PRINCIPAL_SCOPE] = principal
        elif not self._public(path):
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

    def _principal(self, scope: Scope, path: str) -> str | None:
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
            return None
        found: str | None = None
        for token, principal in self._tokens:  # every one compared: the time does not tell which
            if hmac.compare_digest(given, token):
                found = principal
        return found

    @staticmethod
    async def _respond(
        send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
