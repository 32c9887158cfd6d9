"""The request life cycle shared by the OpenAI adapters; subclasses supply the API mapping.

``OpenAIBase`` checks that real requests are allowed, creates the SDK client (its own retries
off), builds the request, sends it with ``call_with_retries``, and maps the answer back.
``stream`` retries only until the first delta, and closes the stream when the consumer stops
or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import httpx
import openai

from steadyrun._errors import UsageError
from steadyrun.chat import ModelRequest, ModelResponse, ModelSettings, ResponseDelta
from steadyrun.models._client import check_model_requests_allowed
from steadyrun.models._openai_common import (
    MediaReader,
    MediaResolver,
    MediaUrl,
    as_dict,
    default_settings,
    merge_settings,
    provider_error,
    request_id_of,
)
from steadyrun.models._retry import RetryPolicy, call_with_retries

__all__ = ["OpenAIBase", "StreamState"]


class StreamState(Protocol):
    """Turns provider stream events (as dicts) into deltas; ``finish`` gives the last one."""

    def feed(self, event: dict[str, Any]) -> list[ResponseDelta]:
        """The deltas of one event; raises ``ProviderError`` for an error event."""
        ...

    def finish(self) -> ResponseDelta:
        """The ``finish`` delta, after the last event."""
        ...


@dataclass(slots=True)
class _Opened:
    source: Any
    state: StreamState
    first: list[ResponseDelta]
    done: bool


class OpenAIBase:
    """The request life cycle shared by the OpenAI adapters (subclasses map the API).

    Args:
        model: The model name.
        api_key: The API key; defaults to the environment variable named by ``key_env``.
        base_url: The API base URL; defaults to the SDK's (``OPENAI_BASE_URL`` or OpenAI).
        client: An ``openai.AsyncOpenAI`` to use (its own retries are turned off).
        http_client: An ``httpx.AsyncClient`` for the SDK client this model creates.
        retry: How failed calls are retried (default ``RetryPolicy()``).
        timeout: Seconds a request may take (default: the SDK's).
        media_reader: Returns the bytes of a ``MediaRef`` (sent base64-encoded).
        media_url: Returns a URL the provider can fetch a ``MediaRef`` from (tried first).
        **defaults: Default ``ModelSettings`` fields (``temperature=0.2``...); a request's own
            settings win.

    Attributes:
        model: The model name.
        retry: The retry policy.
        defaults: The default settings.
        media: Resolves ``MediaRef``s with ``media_url``/``media_reader``.
        sleep: What retries wait with (``asyncio.sleep``; tests replace it).
    """

    provider: ClassVar[str] = "openai"
    """The provider name in errors and in ``check_model_requests_allowed``."""

    key_env: ClassVar[str] = "OPENAI_API_KEY"
    """The environment variable the API key comes from."""

    supports_response_format: ClassVar[bool] = True
    input_modalities: ClassVar[frozenset[str]] = frozenset({"image", "pdf"})
    """Media kinds the model reads natively; others go through the runtime's adapters."""
    media_in_tool_results: ClassVar[bool] = True
    """Whether tool results may carry media (Chat Completions moves them to a user message)."""
    """Whether ``ModelSettings.response_format`` is sent as native structured output."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        media_reader: MediaReader | None = None,
        media_url: MediaUrl | None = None,
        **defaults: Any,
    ) -> None:
        if not model:
            raise UsageError(f"{type(self).__name__} needs a model name")
        self.model = model
        self.retry = retry or RetryPolicy()
        self.defaults = default_settings(defaults)
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self.media = MediaResolver(media_reader, media_url, self.provider)
        self._api_key = api_key
        self._base_url = base_url
        self._http_client = http_client
        self._timeout = timeout
        self._client: openai.AsyncOpenAI | None = None
        if client is not None:
            options: dict[str, Any] = {"max_retries": 0}
            if timeout is not None:
                options["timeout"] = timeout
            self._client = client.with_options(**options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    def sdk_client(self) -> openai.AsyncOpenAI:
        """The SDK client, created on first use (without retries of its own).

        Raises:
            UsageError: No API key was given and the environment has none.
        """
        if self._client is None:
            kwargs: dict[str, Any] = {"max_retries": 0}
            if self._api_key is not None:
                kwargs["api_key"] = self._api_key
            if self._base_url is not None:
                kwargs["base_url"] = self._base_url
            if self._http_client is not None:
                kwargs["http_client"] = self._http_client
            if self._timeout is not None:
                kwargs["timeout"] = self._timeout
            try:
                self._client = openai.AsyncOpenAI(**kwargs)
            except openai.OpenAIError as exc:
                raise UsageError(
                    f"{type(self).__name__} has no API key: set the {self.key_env} environment "
                    f"variable or pass api_key=... ({exc})"
                ) from exc
        return self._client

    # -- hooks of the API mapping ------------------------------------------------------------

    async def _params(
        self, request: ModelRequest, settings: ModelSettings, *, stream: bool
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def _send(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None]:
        raise NotImplementedError

    async def _start(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any], request_id: str | None) -> ModelResponse:
        raise NotImplementedError

    def _stream_state(self, request_id: str | None) -> StreamState:
        raise NotImplementedError

    # -- the life cycle ------------------------------------------------------------------------

    def _error(self, exc: Exception) -> BaseException:
        return provider_error(exc, self.provider)

    async def _build(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        settings = merge_settings(self.defaults, request.settings)
        if settings.response_format is not None and not self.supports_response_format:
            raise UsageError(f"{type(self).__name__} has no native response_format")
        params = await self._params(request, settings, stream=stream)
        if settings.extra:
            params.update(settings.extra)
        return params

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request (retried by the retry policy).

        Args:
            request: The provider-neutral request.

        Raises:
            ProviderError: The provider failed (typed by status; the last error once retries
                are spent).
            UsageError: Real model requests are blocked, the request cannot be mapped, or the
                API key is missing.
        """
        check_model_requests_allowed(self.provider)
        client = self.sdk_client()
        params = await self._build(request, stream=False)

        async def attempt() -> ModelResponse:
            try:
                data, request_id = await self._send(client, params)
            except Exception as exc:
                converted = self._error(exc)
                if converted is exc:
                    raise
                raise converted from exc
            return self._parse(data, request_id)

        return await call_with_retries(attempt, self.retry, sleep=self.sleep)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Answer one request as deltas ending with a ``finish`` delta.

        The deltas accumulate to what ``respond`` returns for the same answer. A stream that
        fails before its first delta is retried; after that, errors are raised as they come.
        Cancelling the consumer closes the stream.

        Args:
            request: The provider-neutral request.

        Raises:
            ProviderError: The provider failed.
            UsageError: As for ``respond``.
        """
        check_model_requests_allowed(self.provider)
        client = self.sdk_client()
        params = await self._build(request, stream=True)
        opened = await call_with_retries(
            lambda: self._open(client, params), self.retry, sleep=self.sleep
        )
        try:
            for delta in opened.first:
                yield delta
            if opened.done:
                return
            while True:
                try:
                    event = await opened.source.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    converted = self._error(exc)
                    if converted is exc:
                        raise
                    raise converted from exc
                for delta in opened.state.feed(as_dict(event)):
                    yield delta
            yield opened.state.finish()
        finally:
            await opened.source.close()

    async def _open(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> _Opened:
        """Start a stream and read it up to its first delta (the part that may be retried)."""
        source: Any = None
        try:
            source = await self._start(client, params)
            state = self._stream_state(request_id_of(source.response.headers))
            while True:
                try:
                    event = await source.__anext__()
                except StopAsyncIteration:
                    return _Opened(source, state, [state.finish()], True)
                first = state.feed(as_dict(event))
                if first:
                    return _Opened(source, state, first, False)
        except BaseException as exc:
            if source is not None:
                await source.close()
            if not isinstance(exc, Exception):
                raise
            converted = self._error(exc)
            if converted is exc:
                raise
            raise converted from exc
