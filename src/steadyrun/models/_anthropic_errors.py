"""Turning Anthropic SDK exceptions into steadyrun's typed provider errors."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

import anthropic
import httpx2

from steadyrun.models._errors import (
    AuthenticationFailed,
    ContextOverflow,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    error_for_status,
)

__all__ = ["PROVIDER", "provider_error", "retry_after"]

PROVIDER = "anthropic"

# The HTTP status each documented error type comes with. An error event inside a stream arrives
# on a 200 response, so its type is all that tells what happened.
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# Anthropic's wordings of "the prompt does not fit" beyond the shared hints.
_CONTEXT_HINTS = ("prompt is too long", "context limit")

_AUTH_HINT = "Could not resolve authentication method"


def retry_after(headers: Any) -> float | None:
    """Seconds the provider asked to wait: ``retry-after-ms``, or ``retry-after`` (secs or date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def provider_error(exc: BaseException) -> ProviderError | None:
    """The typed error for an exception raised by the SDK or its transport; ``None`` if foreign."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ProviderTimeout(_message(exc, "the request timed out"), provider=PROVIDER)
    if isinstance(exc, anthropic.APIConnectionError | httpx2.RequestError):
        return ProviderConnectionError(_message(exc, "connection failed"), provider=PROVIDER)
    if isinstance(exc, anthropic.APIStatusError):
        return _status_error(exc)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(
            f"the response did not match the Messages API schema: {exc.message}",
            provider=PROVIDER,
            status=exc.status_code,
            body=exc.body,
        )
    if isinstance(exc, anthropic.CredentialsError) or (
        isinstance(exc, TypeError) and _AUTH_HINT in str(exc)
    ):
        return AuthenticationFailed(
            "no API key: set ANTHROPIC_API_KEY or pass AnthropicModel(api_key=...) "
            f"({str(exc).strip(chr(34))})",
            provider=PROVIDER,
        )
    if isinstance(exc, anthropic.APIError):
        return ProviderConnectionError(_message(exc, type(exc).__name__), provider=PROVIDER)
    return None


def _status_error(exc: anthropic.APIStatusError) -> ProviderError:
    body = exc.body
    error_type = exc.type if isinstance(exc.type, str) else None
    status = exc.status_code
    if status < 400:  # an error event inside a stream that had started with 200
        status = _STATUS_OF_TYPE.get(error_type or "", 500)
    message = exc.api_message or exc.message
    code = exc.error_code or error_type
    request_id = exc.request_id
    if request_id is None and isinstance(body, dict) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    wait = retry_after(exc.response.headers) if exc.response is not None else None
    lowered = message.lower()
    if status in (400, 413) and any(hint in lowered for hint in _CONTEXT_HINTS):
        return ContextOverflow(
            message,
            provider=PROVIDER,
            status=status,
            code=code,
            body=body,
            request_id=request_id,
            retry_after=wait,
        )
    return error_for_status(
        status,
        message,
        provider=PROVIDER,
        code=code,
        body=body,
        request_id=request_id,
        retry_after=wait,
    )


def _message(exc: BaseException, fallback: str) -> str:
    cause = exc.__cause__
    text = str(exc) or fallback
    if cause is not None and str(cause):
        text = f"{text} ({type(cause).__name__}: {cause})"
    return text
