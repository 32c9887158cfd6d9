"""Anthropic's Messages API (Claude) as a steadyrun model: ``"anthropic:<model>"``.

Needs the ``anthropic`` extra (``pip install 'steadyrun[anthropic]'``). The API key comes from
``api_key`` or the ``ANTHROPIC_API_KEY`` environment variable (``ANTHROPIC_BASE_URL`` sets the
endpoint). See ``docs/providers/anthropic.md`` for what is mapped and how.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar

import anthropic
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent

from steadyrun._errors import UsageError
from steadyrun.chat import (
    MediaRef,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ResponseDelta,
    accumulate_async,
)
from steadyrun.models._anthropic_convert import (
    DEFAULT_MAX_TOKENS,
    MediaAccess,
    build_params,
    check_settings,
    count_params,
    merge_settings,
    response_from_message,
)
from steadyrun.models._anthropic_errors import PROVIDER, provider_error
from steadyrun.models._anthropic_http import sdk_http_client
from steadyrun.models._anthropic_stream import StreamState
from steadyrun.models._client import check_model_requests_allowed
from steadyrun.models._errors import ProviderConnectionError
from steadyrun.models._retry import RetryPolicy, call_with_retries

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel"]

_SETTINGS = frozenset(f.name for f in dataclasses.fields(ModelSettings))


class _StreamingRequired(Exception):
    """The SDK refuses this request without streaming (it may take over ten minutes)."""


_Opened = tuple[
    anthropic.AsyncStream[RawMessageStreamEvent],
    AsyncIterator[RawMessageStreamEvent],
    StreamState,
    list[ResponseDelta],
]


class AnthropicModel:
    """A Claude model through the Anthropic Messages API.

    ``respond`` and ``stream`` map steadyrun's request to a Messages API request and the answer
    back: system instructions, text, thinking (signed and redacted blocks are sent back
    unchanged), tool calls and results, images and PDFs, tool definitions, ``tool_choice``,
    ``max_tokens`` (required by the API: ``DEFAULT_MAX_TOKENS`` unless set), stop sequences,
    usage with cached and thinking tokens, and errors as typed ``ProviderError``s.
    ``count_tokens`` counts a request's input tokens with the Messages API's count endpoint
    (``ProviderCounter(model)`` uses it for ``ContextPolicy``).

    Extended thinking is switched on through the API's own option, per call or as a default::

        AnthropicModel("claude-sonnet-4-5", extra={"thinking": {"type": "enabled",
                                                                "budget_tokens": 4096}})

    Attributes:
        model: The model name sent to the API, e.g. ``claude-sonnet-4-5``.
        retry: How failed calls are retried (the SDK's own retries are off).
        sleep: The sleep used between retries (tests replace it).
        supports_response_format: ``False``: the adapter does not map
            ``ModelSettings.response_format`` (``generate_object`` uses a forced tool call).
    """

    supports_response_format = False
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
        client: anthropic.AsyncAnthropic | None = None,
        http_client: Any = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        media_reader: Callable[[MediaRef], Awaitable[bytes]] | None = None,
        media_url: Callable[[MediaRef], Awaitable[str | None]] | None = None,
        **defaults: Any,
    ) -> None:
        """Create the model; nothing is sent until the first request.

        Args:
            model: The Anthropic model name, e.g. ``claude-sonnet-4-5``.
            api_key: The API key; defaults to ``ANTHROPIC_API_KEY`` (a missing key fails the
                first request with ``AuthenticationFailed``).
            base_url: The API endpoint; defaults to ``ANTHROPIC_BASE_URL`` or Anthropic's.
            client: An ``anthropic.AsyncAnthropic`` to use instead of creating one (its
                retries are turned off in a copy; ``api_key``/``base_url``/``http_client``
                must then be left out).
            http_client: An ``httpx.AsyncClient`` (or ``httpx2.AsyncClient``) to send through.
            retry: The retry policy; ``RetryPolicy()`` by default.
            timeout: Seconds a request may take; the SDK's default otherwise.
            media_reader: Returns the bytes of a ``MediaRef`` (sent base64-encoded).
            media_url: Returns a URL Anthropic can fetch for a ``MediaRef`` (or ``None``);
                tried before ``media_reader``.
            defaults: Default ``ModelSettings`` fields (``max_tokens``, ``stop``,
                ``tool_choice``, ``parallel_tool_calls``, ``extra``...); a call's own
                settings win, and ``extra`` dicts are merged.

        Raises:
            UsageError: For an unknown default setting, a default the API cannot take
                (``temperature``, ``response_format``), or client options that conflict.
        """
        if not model or not isinstance(model, str):
            raise UsageError("AnthropicModel needs a model name, e.g. 'claude-sonnet-4-5'")
        unknown = sorted(set(defaults) - _SETTINGS)
        if unknown:
            raise UsageError(
                f"AnthropicModel got unknown option(s) {unknown}; extra keyword arguments are "
                f"default ModelSettings fields: {sorted(_SETTINGS)}"
            )
        self.model = model
        self._defaults = ModelSettings(**defaults)
        check_settings(self._defaults)  # say so now rather than at the first request
        self.retry = retry if retry is not None else RetryPolicy()
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self._media = MediaAccess(reader=media_reader, url=media_url)
        self._owns_client = client is None
        if client is not None:
            if api_key is not None or base_url is not None or http_client is not None:
                raise UsageError(
                    "pass either client= or api_key=/base_url=/http_client=, not both: "
                    "configure the client you pass instead"
                )
            self._client = (
                client.with_options(max_retries=0, timeout=timeout)
                if timeout is not None
                else client.with_options(max_retries=0)
            )
            return
        options: dict[str, Any] = {"max_retries": 0}  # steadyrun retries, by its RetryPolicy
        if api_key is not None:
            options["api_key"] = api_key
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = timeout
        sdk_client = sdk_http_client(http_client)
        if sdk_client is not None:
            options["http_client"] = sdk_client
        try:
            self._client = anthropic.AsyncAnthropic(**options)
        except (anthropic.AnthropicError, ValueError) as exc:
            raise UsageError(
                f"could not create the Anthropic client: {exc}; set ANTHROPIC_API_KEY or pass "
                "api_key="
            ) from exc

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request with one Messages API call (retried by the retry policy).

        A request the SDK refuses to make without streaming (a large ``max_tokens``) is
        streamed and accumulated instead, which gives the same response.

        Raises:
            ProviderError: The typed error of the last attempt.
            UsageError: For a request the adapter cannot map.
        """
        check_model_requests_allowed(PROVIDER)
        params = await self._params(request)
        try:
            return await call_with_retries(
                lambda: self._respond_once(params), self.retry, sleep=self.sleep
            )
        except _StreamingRequired:
            return await accumulate_async(self._stream(params))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Answer one request as deltas ending with a ``finish`` delta.

        The deltas accumulate to what ``respond`` returns for the same answer. A failure before
        the first delta is retried by the retry policy; once a delta was given, an error ends
        the stream with the typed error.

        Raises:
            ProviderError: The typed error (an ``error`` event inside the stream included).
            UsageError: For a request the adapter cannot map.
        """
        check_model_requests_allowed(PROVIDER)
        params = await self._params(request)
        async for delta in self._stream(params):
            yield delta

    async def count_tokens(self, request: ModelRequest) -> int:
        """Count the input tokens of ``request`` with ``POST /v1/messages/count_tokens``.

        The count request is the message request ``respond`` would send, less what the count
        endpoint does not take: the same ``model``, ``system``, ``messages``, ``tools``,
        ``tool_choice``, and ``thinking``/``output_config``/``cache_control``/``speed`` from
        ``extra``; ``max_tokens``, ``stop_sequences``, ``temperature`` and other ``extra``
        options (``metadata``, ``service_tier``...) are left out, as they do not change the
        input. Failures are typed and retried like ``respond``'s. The endpoint is free but rate
        limited: wrap the counter in ``CachedCounter`` to count an identical request once.

        Args:
            request: The request to count (its settings merged over the model's defaults).

        Returns:
            The ``input_tokens`` the API counted: system prompt, messages and tools.

        Raises:
            ProviderError: The typed error of the last attempt.
            UsageError: For a request the adapter cannot map (as ``respond`` would).
        """
        check_model_requests_allowed(PROVIDER)
        params = count_params(await self._params(request, counting=True))
        return await call_with_retries(
            lambda: self._count_once(params), self.retry, sleep=self.sleep
        )

    async def aclose(self) -> None:
        """Close the SDK client if this model created it."""
        if self._owns_client:
            await self._client.close()

    # -- internals ---------------------------------------------------------------------------

    async def _params(self, request: ModelRequest, *, counting: bool = False) -> dict[str, Any]:
        settings = merge_settings(self._defaults, request.settings)
        if counting:  # an output option the API refuses does not stop a count of the input
            settings = dataclasses.replace(settings, temperature=None)
        return await build_params(self.model, request, settings, self._media)

    async def _count_once(self, params: dict[str, Any]) -> int:
        try:
            counted = await self._client.messages.count_tokens(**params)
        except Exception as exc:
            error = provider_error(exc)
            if error is None:
                raise
            raise error from exc
        return counted.input_tokens

    async def _respond_once(self, params: dict[str, Any]) -> ModelResponse:
        try:
            raw = await self._client.messages.with_raw_response.create(**params)
            message: AnthropicMessage = await raw.parse()
        except ValueError as exc:
            if "Streaming is required" in str(exc):
                raise _StreamingRequired(str(exc)) from exc
            raise
        except Exception as exc:
            error = provider_error(exc)
            if error is None:
                raise
            raise error from exc
        return response_from_message(message, raw.headers.get("request-id"))

    async def _stream(self, params: dict[str, Any]) -> AsyncIterator[ResponseDelta]:
        sdk_stream, events, state, first = await call_with_retries(
            lambda: self._open_stream(params), self.retry, sleep=self.sleep
        )
        try:
            for delta in first:
                yield delta
            while not state.done:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    raise ProviderConnectionError(
                        "the stream ended before message_stop",
                        provider=PROVIDER,
                        request_id=state.request_id,
                    ) from None
                except Exception as exc:
                    error = provider_error(exc)
                    if error is None:
                        raise
                    raise error from exc
                for delta in state.feed(event):
                    yield delta
        finally:
            await _close(sdk_stream, events)

    async def _open_stream(self, params: dict[str, Any]) -> _Opened:
        """Start a stream and read it up to its first deltas (what a retry may repeat)."""
        try:
            sdk_stream = await self._client.messages.create(**params, stream=True)
        except Exception as exc:
            error = provider_error(exc)
            if error is None:
                raise
            raise error from exc
        events = sdk_stream.__aiter__()
        state = StreamState(sdk_stream.response.headers.get("request-id"))
        try:
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    raise ProviderConnectionError(
                        "the stream ended before its first part",
                        provider=PROVIDER,
                        request_id=state.request_id,
                    ) from None
                deltas = state.feed(event)
                if deltas:
                    return sdk_stream, events, state, deltas
        except BaseException as exc:
            await _close(sdk_stream, events)
            error = provider_error(exc) if isinstance(exc, Exception) else None
            if error is None or error is exc:
                raise
            raise error from exc


async def _close(
    sdk_stream: anthropic.AsyncStream[RawMessageStreamEvent],
    events: AsyncIterator[RawMessageStreamEvent],
) -> None:
    """Release the response of a stream, whatever state it is in."""
    aclose = getattr(events, "aclose", None)
    with contextlib.suppress(Exception):
        if aclose is not None:
            await aclose()
        await sdk_stream.close()
