"""What the OpenAI adapters share: errors, retry-after, media, settings, schemas, SDK calls."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import openai

from steadyrun._errors import UsageError
from steadyrun.chat import MediaRef, ModelSettings
from steadyrun.media._supply import supplied_bytes, supplied_url
from steadyrun.models._errors import (
    ContextOverflow,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    error_for_status,
)

__all__ = [
    "MediaReader",
    "MediaResolver",
    "MediaUrl",
    "ResolvedMedia",
    "as_dict",
    "body_error",
    "call_sdk",
    "default_settings",
    "details",
    "env_first",
    "merge_settings",
    "provider_error",
    "request_id_of",
    "retry_after_seconds",
    "strict_compatible",
    "text_of_arguments",
]

MediaReader = Callable[[MediaRef], Awaitable[bytes]]
"""Returns the bytes of a media reference."""

MediaUrl = Callable[[MediaRef], Awaitable[str | None]]
"""Returns a URL the provider can fetch a media reference from, or ``None``."""


# -- errors ---------------------------------------------------------------------------------

# Error codes/types found in bodies without an HTTP status (errors inside a stream, failed
# responses, 200 answers carrying an error) and the status they stand for.
_CODE_STATUS = {
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "insufficient_quota": 429,
    "tokens": 429,
    "requests": 429,
    "server_error": 500,
    "internal_error": 500,
    "internal_server_error": 500,
    "api_error": 500,
    "overloaded_error": 529,
    "server_is_overloaded": 503,
    "service_unavailable": 503,
    "slow_down": 503,
    "context_length_exceeded": 400,
    "exceed_context_size_error": 400,
    "invalid_request_error": 400,
    "bad_request": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
}

# Context-overflow wordings of OpenAI-compatible servers that the shared hints miss
# (llama.cpp: "the request exceeds the available context size").
_MORE_CONTEXT_HINTS = ("exceed_context_size", "context size", "exceeds the context")


def _status_of_code(code: str | None) -> int:
    if not code:
        return 500
    if code in _CODE_STATUS:
        return _CODE_STATUS[code]
    return 400 if code.startswith("invalid") else 500


def _typed(
    status: int | None,
    message: str,
    *,
    provider: str,
    code: str | None,
    body: Any,
    request_id: str | None,
    retry_after: float | None,
) -> ProviderError:
    text = f"{code or ''} {message}".lower()
    client_error = status is not None and 400 <= status < 500
    if (
        client_error
        and status not in (401, 403, 408, 429)
        and any(hint in text for hint in _MORE_CONTEXT_HINTS)
    ):
        return ContextOverflow(
            message,
            provider=provider,
            status=status,
            code=code,
            body=body,
            request_id=request_id,
        )
    return error_for_status(
        status,
        message,
        provider=provider,
        code=code,
        body=body,
        request_id=request_id,
        retry_after=retry_after,
    )


_MAX_MESSAGE = 500


def _error_fields(error: Any, fallback: str) -> tuple[str, str | None]:
    """The message and code of an OpenAI-style error object (``{"message", "type", "code"}``)."""
    if isinstance(error, Mapping):
        message = error.get("message")
        if isinstance(message, str) and len(message) > _MAX_MESSAGE:
            message = message[:_MAX_MESSAGE] + "..."
        code = error.get("code")
        if not isinstance(code, str) or not code:  # llama.cpp: "code": 400, "type": "..."
            code = error.get("type") or code
        return (str(message) if message else fallback), (str(code) if code else None)
    if isinstance(error, str) and error:  # a body that is not JSON (a proxy's HTML page...)
        return (error[:_MAX_MESSAGE] + "..." if len(error) > _MAX_MESSAGE else error), None
    return fallback, None


def body_error(error: Any, *, provider: str, request_id: str | None = None) -> ProviderError:
    """The typed error for an error object found in a body or event without an HTTP status.

    Args:
        error: The error object (``{"message", "type", "code"}``) or text.
        provider: The provider name for the error.
        request_id: The request id, when known.
    """
    message, code = _error_fields(error, "the provider reported an error")
    status = error.get("code") if isinstance(error, Mapping) else None
    if not (isinstance(status, int) and 400 <= status < 600):  # OpenRouter: "code": 502
        status = _status_of_code(code)
    return _typed(
        status,
        message,
        provider=provider,
        code=code,
        body=error,
        request_id=request_id,
        retry_after=None,
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def request_id_of(headers: Mapping[str, str] | None) -> str | None:
    """The provider's request id from response headers (``x-request-id`` or ``request-id``)."""
    if headers is None:
        return None
    return headers.get("x-request-id") or headers.get("request-id") or None


def provider_error(exc: BaseException, provider: str) -> BaseException:
    """The typed ``ProviderError`` for an SDK or transport exception; others unchanged.

    Args:
        exc: What the SDK raised.
        provider: The provider name for the error.
    """
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return ProviderTimeout(f"no answer in time ({exc})", provider=provider)
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        cause = exc.__cause__ or exc
        return ProviderConnectionError(
            f"the connection failed: {type(cause).__name__}: {cause}", provider=provider
        )
    if isinstance(exc, openai.APIStatusError):
        response = exc.response
        body: Any = exc.body
        with contextlib.suppress(Exception):  # not JSON: keep what the SDK parsed
            body = response.json()
        error = body.get("error", body) if isinstance(body, Mapping) else body
        message, code = _error_fields(error, exc.message)
        if code is None:
            code = exc.code or exc.type
        return _typed(
            exc.status_code,
            message,
            provider=provider,
            code=code,
            body=body,
            request_id=request_id_of(response.headers),
            retry_after=retry_after_seconds(response.headers),
        )
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        return body_error(exc.body if exc.body is not None else exc.message, provider=provider)
    if isinstance(exc, openai.OpenAIError):
        return ProviderError(str(exc), provider=provider)
    if isinstance(exc, ValueError):  # a body or event that is not the JSON it should be
        return ProviderError(f"malformed response: {exc}", provider=provider)
    return exc


async def call_sdk(method: Callable[..., Awaitable[Any]], params: Mapping[str, Any]) -> Any:
    """Call an SDK ``create`` method with a request body: unknown keys go in ``extra_body``.

    Args:
        method: The bound SDK method.
        params: The request body as a dict (SDK request options such as ``extra_headers``
            or ``timeout`` are taken too).
    """
    names = _parameter_names(method)
    kwargs: dict[str, Any] = {}
    extra_body: dict[str, Any] = dict(params.get("extra_body") or {})
    for key, value in params.items():
        if key == "extra_body":
            continue
        if key in names:
            kwargs[key] = value
        else:
            extra_body[key] = value
    if extra_body:
        kwargs["extra_body"] = extra_body
    return await method(**kwargs)


_NAMES: dict[Any, frozenset[str]] = {}


def _parameter_names(method: Callable[..., Any]) -> frozenset[str]:
    key = getattr(method, "__func__", method)
    names = _NAMES.get(key)
    if names is None:
        names = _NAMES[key] = frozenset(inspect.signature(method).parameters)
    return names


# -- settings, schemas, small mappings ------------------------------------------------------

_SETTING_NAMES = frozenset(f.name for f in fields(ModelSettings))


def default_settings(defaults: Mapping[str, Any]) -> ModelSettings:
    """``ModelSettings`` from constructor keywords; unknown names raise ``UsageError``."""
    unknown = sorted(set(defaults) - _SETTING_NAMES)
    if unknown:
        raise UsageError(
            f"unknown model settings {unknown}; the defaults a model takes are the "
            f"ModelSettings fields: {sorted(_SETTING_NAMES)}"
        )
    return ModelSettings(**defaults)


def merge_settings(defaults: ModelSettings, settings: ModelSettings) -> ModelSettings:
    """The request's settings over the model's defaults (``extra`` dicts merged, request wins)."""
    merged = ModelSettings()
    for f in fields(ModelSettings):
        value = getattr(settings, f.name)
        setattr(merged, f.name, getattr(defaults, f.name) if value is None else value)
    if defaults.extra and settings.extra:
        merged.extra = {**defaults.extra, **settings.extra}
    return merged


_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_VALUES = ("items", "additionalProperties", "not", "contains")


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema`` as it is.

    Strict mode needs ``additionalProperties: false`` on every object and every property listed
    in ``required`` (optional values are spelled as a union with ``null``).
    """
    if not isinstance(schema, Mapping):
        return True
    is_object = schema.get("type") == "object" or "properties" in schema
    if is_object:
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(schema.get("properties") or {}):
            return False
    for key in _SUBSCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, Mapping) and not all(strict_compatible(s) for s in sub.values()):
            return False
    for key in _SUBSCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list) and not all(strict_compatible(s) for s in sub):
            return False
    for key in _SUBSCHEMA_VALUES:
        sub = schema.get(key)
        if isinstance(sub, Mapping) and not strict_compatible(sub):
            return False
    return True


def text_of_arguments(arguments: Any) -> str:
    """Tool-call arguments as JSON text (some servers send an object instead of a string)."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def details(request_id: str | None, response_id: Any, **more: Any) -> dict[str, Any] | None:
    """``provider_details`` of a response: the request id (header, else body id) and more."""
    rid = response_id if isinstance(response_id, str) and response_id else None
    out: dict[str, Any] = {}
    if request_id or rid:
        out["request_id"] = request_id or rid
    if rid:
        out["response_id"] = rid
    out.update({k: v for k, v in more.items() if v is not None})
    return out or None


# -- media ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedMedia:
    """Media ready for a request.

    Attributes:
        kind: ``image`` or ``pdf``.
        url: A URL the provider fetches, or a ``data:`` URL with the bytes in base64.
        is_remote: Whether ``url`` is a provider-fetched URL (from ``media_url``).
        filename: A file name for documents.
        mime: The MIME type.
    """

    kind: str
    url: str
    is_remote: bool
    filename: str
    mime: str


class MediaResolver:
    """Turns ``MediaRef``s into URLs or data URLs with the host's ``media_url``/``media_reader``.

    Args:
        reader: Returns the bytes of a reference.
        url: Returns a provider-fetchable URL for a reference, or ``None`` (tried first).
        provider: The provider name, for error messages.
    """

    def __init__(self, reader: MediaReader | None, url: MediaUrl | None, provider: str) -> None:
        self.reader = reader
        self.url = url
        self.provider = provider

    async def resolve(self, ref: MediaRef, *, remote_kinds: tuple[str, ...]) -> ResolvedMedia:
        """Resolve one reference; ``remote_kinds`` are the kinds that may travel as URLs.

        Raises:
            UsageError: The MIME type is not an image or a PDF, no reader was given where
                bytes are needed, or the bytes do not match the reference's sha256.
        """
        mime = ref.mime.lower()
        if mime.startswith("image/"):
            kind = "image"
        elif mime == "application/pdf":
            kind = "pdf"
        else:
            raise UsageError(
                f"{self.provider} takes images (image/*) and PDFs (application/pdf); media "
                f"{ref.key!r} is {ref.mime!r}"
            )
        filename = ref.key.rstrip("/").rsplit("/", 1)[-1] or "document"
        if kind == "pdf" and not filename.lower().endswith(".pdf"):
            filename += ".pdf"
        supplied = supplied_url(ref)
        if supplied and kind in remote_kinds:
            return ResolvedMedia(kind, supplied, True, filename, mime)
        if self.url is not None and kind in remote_kinds:
            url = await self.url(ref)
            if url:
                return ResolvedMedia(kind, url, True, filename, mime)
        data = supplied_bytes(ref)  # read and checked by the runtime for this call
        if data is not None:
            encoded = base64.b64encode(data).decode("ascii")
            return ResolvedMedia(kind, f"data:{mime};base64,{encoded}", False, filename, mime)
        if self.reader is None:
            raise UsageError(
                f"a request to {self.provider} has media ({ref.key!r}, {ref.mime}) but the model "
                "has no way to read it: pass media_reader=async (ref) -> bytes"
                + (" (or media_url)" if kind in remote_kinds else "")
                + " to the model"
            )
        data = await self.reader(ref)
        if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256.lower():
            raise UsageError(f"media {ref.key!r}: the bytes read do not match its sha256")
        encoded = base64.b64encode(data).decode("ascii")
        return ResolvedMedia(kind, f"data:{mime};base64,{encoded}", False, filename, mime)


def as_dict(model: Any) -> dict[str, Any]:
    """An SDK model as the JSON dict the API sent (unset fields left out, no warnings)."""
    data: dict[str, Any] = model.to_dict(warnings=False)
    return data


def env_first(*names: str) -> str | None:
    """The value of the first of ``names`` set (non-empty) in the environment."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None
