"""Google Gemini models through the google-genai SDK (the Gemini Developer API).

``GoogleModel("gemini-2.5-flash")`` or ``"google:gemini-2.5-flash"`` in an ``Agent``. Needs the
``google`` extra: ``pip install 'steadyrun[google]'``. The API key comes from ``api_key=`` or the
``GOOGLE_API_KEY`` / ``GEMINI_API_KEY`` environment variables; a Vertex AI client can be passed
as ``client=``. See ``docs/providers/google.md`` for what is mapped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar

import httpx
from google import genai
from google.genai import types
from google.genai.client import AsyncClient

from steadyrun._errors import UsageError
from steadyrun.chat import ModelRequest, ModelResponse, ModelSettings, ResponseDelta
from steadyrun.chat._estimate import estimate_request
from steadyrun.models._client import check_model_requests_allowed
from steadyrun.models._errors import ServerError
from steadyrun.models._google_errors import map_error
from steadyrun.models._google_request import (
    GoogleCall,
    MediaReader,
    MediaUrl,
    build_call,
    count_config,
)
from steadyrun.models._google_response import PROVIDER, ResponseMapper, response_from
from steadyrun.models._retry import RetryPolicy, call_with_retries

__all__ = ["GoogleModel"]

_SETTINGS = frozenset(f.name for f in dataclasses.fields(ModelSettings))
_DEFAULT_API_VERSION = "v1beta"


def _merge_settings(defaults: ModelSettings, settings: ModelSettings) -> ModelSettings:
    """``settings`` over ``defaults`` field by field; ``extra`` dicts are merged."""
    merged: dict[str, Any] = {}
    for name in _SETTINGS:
        value = getattr(settings, name)
        merged[name] = getattr(defaults, name) if value is None else value
    if defaults.extra and settings.extra:
        merged["extra"] = {**defaults.extra, **settings.extra}
    return ModelSettings(**merged)


class GoogleModel:
    """A Gemini model, called through ``google.genai.Client(...).aio.models``.

    The SDK's own retries are off: calls are retried by ``retry`` (a ``RetryPolicy``) on rate
    limits, overload, server errors, timeouts and connection failures; a stream is retried only
    before its first chunk. Every SDK exception becomes a typed ``ProviderError``.
    ``count_tokens`` counts a request's input tokens with ``countTokens`` (``ProviderCounter(
    model)`` uses it for ``ContextPolicy``).

    Attributes:
        model: The model name, e.g. ``gemini-2.5-flash``.
        defaults: Settings used where a request's ``ModelSettings`` leave a field ``None``.
        retry: How failed calls are retried.
        retry_sleep: The coroutine that waits between retries (tests replace it).
        supports_response_format: Gemini has native JSON-schema output (``responseJsonSchema``).
    """

    supports_response_format: ClassVar[bool] = True
    input_modalities: ClassVar[frozenset[str]] = frozenset({"image", "pdf"})
    """Media kinds the model reads natively; others go through the runtime's adapters."""
    media_in_tool_results: ClassVar[bool] = True
    """Whether tool results may carry media."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: genai.Client | AsyncClient | None = None,
        http_client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        media_reader: MediaReader | None = None,
        media_url: MediaUrl | None = None,
        include_thoughts: bool | None = None,
        **defaults: Any,
    ) -> None:
        """Create the model; the SDK client is made now, or at the first request without a key.

        Args:
            model: The Gemini model name (``gemini-2.5-flash``, ``models/gemini-2.5-pro``...).
            api_key: The API key; defaults to ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``.
            base_url: Another endpoint; defaults to ``GOOGLE_GEMINI_BASE_URL`` or Google's.
            client: A ready ``genai.Client`` (e.g. for Vertex AI); then ``api_key``,
                ``base_url`` and ``http_client`` must not be given.
            http_client: The ``httpx.AsyncClient`` the SDK sends requests with.
            retry: How failed calls are retried; defaults to ``RetryPolicy()``.
            timeout: Seconds one HTTP request may take.
            media_reader: Gives the bytes of a ``MediaRef`` (sent inline, base64).
            media_url: Gives a URL Gemini can read for a ``MediaRef`` (``fileData``); tried
                before ``media_reader``.
            include_thoughts: Ask for thought summaries (``thinkingConfig.includeThoughts``);
                ``None`` leaves the model's default (no summaries).
            **defaults: Default ``ModelSettings`` fields (``temperature=0.2``...).

        Raises:
            UsageError: An unknown setting, or ``client`` together with connection options.
        """
        unknown = sorted(set(defaults) - _SETTINGS)
        if unknown:
            raise UsageError(
                f"GoogleModel got unknown settings {unknown}; settings are {sorted(_SETTINGS)}"
            )
        if client is not None and (api_key or base_url or http_client):
            raise UsageError("pass either client= or api_key=/base_url=/http_client=, not both")
        self.model = model
        self.defaults = ModelSettings(**defaults)
        self.retry = retry or RetryPolicy()
        self.retry_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self._timeout = timeout
        self._media_reader = media_reader
        self._media_url = media_url
        self._include_thoughts = include_thoughts
        self._api_key = api_key
        self._base_url = base_url
        self._http_client = http_client
        self._client: AsyncClient | None = None
        if client is not None:
            self._client = client.aio if isinstance(client, genai.Client) else client
        else:
            try:
                self._client = self._make_client()
            except ValueError:
                self._client = None  # no API key yet: the first request says so

    def __repr__(self) -> str:
        return f"GoogleModel({self.model!r})"

    def _make_client(self) -> AsyncClient:
        options: dict[str, Any] = {}
        if not os.environ.get("GOOGLE_GENAI_API_VERSION"):
            options["api_version"] = _DEFAULT_API_VERSION
        if self._base_url:
            options["base_url"] = self._base_url
        if self._http_client is not None:
            options["httpx_async_client"] = self._http_client
        sync = genai.Client(
            api_key=self._api_key,
            vertexai=False,
            http_options=types.HttpOptions(**options),
        )
        return sync.aio

    def _sdk(self) -> AsyncClient:
        if self._client is None:
            try:
                self._client = self._make_client()
            except ValueError as exc:
                raise UsageError(
                    "no Google API key: pass api_key= to GoogleModel or set GOOGLE_API_KEY "
                    f"(or GEMINI_API_KEY) ({exc})"
                ) from exc
        return self._client

    async def _prepare(self, request: ModelRequest) -> GoogleCall:
        return await build_call(
            request,
            _merge_settings(self.defaults, request.settings),
            media_reader=self._media_reader,
            media_url=self._media_url,
            include_thoughts=self._include_thoughts,
            http_timeout=self._timeout,
        )

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request with ``generate_content``.

        Raises:
            ProviderError: A typed error (after the retries the policy allows).
            UsageError: Real requests are blocked, no API key, or the request cannot be mapped.
        """
        check_model_requests_allowed(PROVIDER)
        client = self._sdk()
        call = await self._prepare(request)

        async def once() -> types.GenerateContentResponse:
            try:
                return await client.models.generate_content(
                    model=self.model, contents=call.contents, config=call.config
                )
            except Exception as exc:
                mapped = map_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc

        response = await call_with_retries(once, self.retry, sleep=self.retry_sleep)
        return response_from(response, self.model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Answer one request with ``generate_content_stream``, as deltas.

        The deltas accumulate to what ``respond`` returns for the same answer; the last one is a
        ``finish`` delta. Failures before the first chunk are retried; later ones are raised.

        Raises:
            ProviderError: A typed error.
            UsageError: Real requests are blocked, no API key, or the request cannot be mapped.
        """
        check_model_requests_allowed(PROVIDER)
        client = self._sdk()
        call = await self._prepare(request)
        chunks, first = await call_with_retries(
            lambda: self._open(client, call), self.retry, sleep=self.retry_sleep
        )
        mapper = ResponseMapper(self.model)
        try:
            for delta in mapper.feed(first):
                yield delta
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    mapped = map_error(exc)
                    if mapped is None:
                        raise
                    raise mapped from exc
                for delta in mapper.feed(chunk):
                    yield delta
        finally:
            await _close(chunks)
        yield mapper.finish()

    async def count_tokens(self, request: ModelRequest) -> int:
        """Count the input tokens of ``request`` with ``models.count_tokens`` (``countTokens``).

        The contents are mapped as ``respond`` maps them (media included, read through
        ``media_reader``/``media_url``). With the Gemini Developer API the SDK sends only the
        contents (it refuses a system instruction and tools in a count call), so the API counts
        the conversation and steadyrun's documented estimate
        (``steadyrun.context.estimate_request``) is added for the system instruction and the
        function declarations; built-in tools from ``extra`` are not counted. With a Vertex AI
        client the SDK sends the system instruction and tools too, and the whole count is the
        API's. A request without contents is estimated, without a call. Failures are typed and
        retried like ``respond``'s; wrap the counter in ``CachedCounter`` to count an identical
        request once.

        Args:
            request: The request to count (its settings merged over the model's defaults).

        Returns:
            The tokens of the request's input (``totalTokens``, plus the estimate above).

        Raises:
            ProviderError: A typed error (after the retries the policy allows).
            UsageError: Real requests are blocked, no API key, or the request cannot be mapped.
        """
        check_model_requests_allowed(PROVIDER)
        client = self._sdk()
        call = await self._prepare(request)
        vertex = _is_vertex(client)
        uncounted = ModelRequest(instructions="\n".join(call.system), tools=request.tools)
        if not call.contents:
            return estimate_request(uncounted)
        config = count_config(call, vertex=vertex)

        async def once() -> types.CountTokensResponse:
            try:
                return await client.models.count_tokens(
                    model=self.model, contents=call.contents, config=config
                )
            except Exception as exc:
                mapped = map_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc

        counted = await call_with_retries(once, self.retry, sleep=self.retry_sleep)
        total = counted.total_tokens or 0  # proto3 JSON leaves a zero out
        return total if vertex else total + estimate_request(uncounted)

    async def _open(
        self, client: AsyncClient, call: GoogleCall
    ) -> tuple[AsyncIterator[types.GenerateContentResponse], types.GenerateContentResponse]:
        """Start a stream and read its first chunk (what a retry may repeat)."""
        chunks: AsyncIterator[types.GenerateContentResponse] | None = None
        try:
            chunks = await client.models.generate_content_stream(
                model=self.model, contents=call.contents, config=call.config
            )
            first = await chunks.__anext__()
        except StopAsyncIteration:
            await _close(chunks)
            empty = ServerError("the stream ended before its first chunk", provider=PROVIDER)
            raise empty from None
        except BaseException as exc:
            await _close(chunks)
            mapped = map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return chunks, first


def _is_vertex(client: AsyncClient) -> bool:
    """Whether the SDK client talks to Vertex AI (the SDK keeps this on its API client)."""
    return bool(getattr(getattr(client, "_api_client", None), "vertexai", False))


async def _close(chunks: AsyncIterator[Any] | None) -> None:
    """Close a stream's generator, which closes its HTTP response."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
