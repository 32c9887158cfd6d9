"""Typed errors of model providers, carrying what a caller needs to decide what to do.

::

    ModelError
    └── ProviderError            status, code, body, request_id, retryable, retry_after
        ├── RateLimited          429: retried after the provider's retry-after
        ├── Overloaded           503/529: retried with backoff
        ├── ServerError          other 5xx: retried with backoff
        ├── ProviderTimeout      no answer in time: retried
        ├── ProviderConnectionError  the connection failed: retried
        ├── AuthenticationFailed 401/403: not retried; check the API key
        └── BadRequest           400/404/422: not retried; the request is wrong
            └── ContextOverflow  the prompt is longer than the model's window
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from steadyrun._errors import ModelError

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ContextOverflow",
    "Overloaded",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "ServerError",
    "error_for_status",
]


class ProviderError(ModelError):
    """A provider answered with an error, or could not be reached.

    Attributes:
        provider: Which provider (``openai``, ``anthropic``...).
        status: The HTTP status, when there was a response.
        code: The provider's own error code or type, when it gave one.
        body: The response body (parsed JSON where it was JSON).
        request_id: The provider's request id, for its support.
        retry_after: Seconds the provider asked to wait, when it said.
    """

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        code: str | None = None,
        body: Any = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self.code = code
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after
        where = f"{provider}" + (f" {status}" if status is not None else "")
        extra = f" [{code}]" if code else ""
        rid = f" (request {request_id})" if request_id else ""
        super().__init__(f"{where}{extra}: {message}{rid}")


class MalformedResponse(ProviderError):
    """A provider's response did not have the shape its API documents.

    A broken proxy, or a server that is not what it claims: nothing of the response is used.
    """


@contextmanager
def reading_response(provider: str, request_id: str | None) -> Iterator[None]:
    """Turn a parser's stray ``TypeError``/``ValueError``/... into ``MalformedResponse``.

    The SDKs build response objects without type checks, so a misbehaving server's body
    reaches our parsers as it is: the caller gets a typed error, not a crash of the parser.
    """
    try:
        yield
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise MalformedResponse(
            f"the response cannot be read: {type(exc).__name__}: {exc}",
            provider=provider,
            request_id=request_id,
        ) from exc


class RateLimited(ProviderError):
    """Too many requests (429); retried after the provider's ``retry_after``."""

    retryable = True


class Overloaded(ProviderError):
    """The provider is overloaded (503, 529); retried with backoff."""

    retryable = True


class ServerError(ProviderError):
    """The provider failed (5xx); retried with backoff."""

    retryable = True


class ProviderTimeout(ProviderError):
    """No answer in time; retried."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed; retried."""

    retryable = True


class AuthenticationFailed(ProviderError):
    """The API key is missing, wrong or lacks permission (401, 403); not retried."""


class BadRequest(ProviderError):
    """The provider refused the request as malformed (400, 404, 422); not retried."""


class ContextOverflow(BadRequest):
    """The request does not fit the model's context window; not retried."""


_CONTEXT_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "exceeds the maximum number of tokens",
)


def error_for_status(
    status: int | None,
    message: str,
    *,
    provider: str,
    code: str | None = None,
    body: Any = None,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The typed error for an HTTP status (``None``: no response) and the provider's message."""
    text = f"{code or ''} {message}".lower()
    cls: type[ProviderError]
    if status == 429:
        cls = RateLimited
    elif status in (503, 529) or "overloaded" in text:
        cls = Overloaded
    elif status in (401, 403):
        cls = AuthenticationFailed
    elif status == 408:
        cls = ProviderTimeout
    elif status is not None and status >= 500:
        cls = ServerError
    elif status is not None and 400 <= status < 500:
        cls = ContextOverflow if any(h in text for h in _CONTEXT_HINTS) else BadRequest
    else:
        cls = ProviderConnectionError
    return cls(
        message,
        provider=provider,
        status=status,
        code=code,
        body=body,
        request_id=request_id,
        retry_after=retry_after,
    )
