"""Exceptions of the google-genai SDK (and its HTTP clients) as typed ``ProviderError``s."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import httpx
import pydantic
from google.genai import errors as genai_errors

from steadyrun.models._errors import (
    AuthenticationFailed,
    ContextOverflow,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    error_for_status,
)
from steadyrun.models._google_response import PROVIDER, request_id_from

__all__ = ["map_error", "retry_after_from"]

_CONTEXT = re.compile(
    r"input token count.*exceeds|exceeds the maximum number of tokens|context (?:length|window)"
    r"|prompt is too long|too many tokens",
    re.IGNORECASE | re.DOTALL,
)
_KEY_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _headers(response: Any) -> Mapping[str, str] | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        return {str(k): str(v) for k, v in dict(headers).items()}
    except (TypeError, ValueError):
        return None


def _details(body: Any, kind: str) -> list[dict[str, Any]]:
    """The ``google.rpc`` details of one kind (``RetryInfo``, ``ErrorInfo``) in an error body."""
    error = body.get("error", body) if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, dict) and str(d.get("@type", "")).endswith(kind)]


def _retry_info_delay(body: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "37s"``)."""
    for detail in _details(body, "RetryInfo"):
        match = _DURATION.match(str(detail.get("retryDelay", "")))
        if match:
            return float(match.group(1))
    return None


def retry_after_from(headers: Mapping[str, str] | None, body: Any = None) -> float | None:
    """Seconds to wait: ``retry-after-ms``, ``retry-after`` (seconds or date), or RetryInfo."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in lowered:
        value = lowered["retry-after"].strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    return _retry_info_delay(body)


def _api_error(exc: genai_errors.APIError) -> ProviderError:
    headers = _headers(exc.response)
    body = exc.details
    message = exc.message or str(exc)
    status = exc.code if isinstance(exc.code, int) else None
    code = exc.status if isinstance(exc.status, str) else None
    request_id = request_id_from(headers)
    retry_after = retry_after_from(headers, body)
    cls: type[ProviderError] | None = None
    if any(d.get("reason") in _KEY_REASONS for d in _details(body, "ErrorInfo")):
        cls = AuthenticationFailed  # Gemini answers a bad API key with 400 INVALID_ARGUMENT
    elif status is not None and 400 <= status < 500 and status != 429 and _CONTEXT.search(message):
        cls = ContextOverflow  # "The input token count (...) exceeds the maximum number..."
    if cls is not None:
        return cls(
            message,
            provider=PROVIDER,
            status=status,
            code=code,
            body=body,
            request_id=request_id,
            retry_after=retry_after,
        )
    return error_for_status(
        status,
        message,
        provider=PROVIDER,
        code=code,
        body=body,
        request_id=request_id,
        retry_after=retry_after,
    )


def map_error(exc: BaseException) -> ProviderError | None:
    """The typed error for an exception raised while calling Gemini; ``None`` to re-raise it.

    Cancellation is never mapped: it must stop the request as it is.
    """
    if isinstance(exc, asyncio.CancelledError):
        return None
    if isinstance(exc, genai_errors.APIError):
        return _api_error(exc)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return ProviderTimeout(f"no answer in time: {exc!r}", provider=PROVIDER)
    if isinstance(exc, httpx.TransportError):
        return ProviderConnectionError(f"connection failed: {exc!r}", provider=PROVIDER)
    if type(exc).__module__.startswith("aiohttp"):  # the SDK uses aiohttp when installed
        return ProviderConnectionError(f"connection failed: {exc!r}", provider=PROVIDER)
    if isinstance(exc, genai_errors.UnknownApiResponseError | pydantic.ValidationError):
        return ProviderError(f"malformed response: {exc}", provider=PROVIDER)
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(f"malformed response: {exc}", provider=PROVIDER)
    return None
