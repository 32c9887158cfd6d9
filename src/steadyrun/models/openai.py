"""OpenAI models: ``OpenAIChatModel`` (Chat Completions) and ``OpenAIResponsesModel`` (Responses).

Needs the ``openai`` extra: ``pip install 'steadyrun[openai]'``. Choose them by name with
``"openai:<model>"`` and ``"openai-responses:<model>"``; the API key comes from
``OPENAI_API_KEY`` unless given. See ``docs/providers/openai.md``.

Example:
    ``OpenAIChatModel("gpt-4.1", temperature=0.2)``, or
    ``Agent(name="a", model="openai-responses:o4-mini")``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import openai

from steadyrun.chat import ModelRequest, ModelResponse, ModelSettings
from steadyrun.models._openai_base import OpenAIBase, StreamState
from steadyrun.models._openai_chat import ChatDialect, ChatStream, chat_params, chat_response
from steadyrun.models._openai_common import as_dict, call_sdk, request_id_of
from steadyrun.models._openai_responses import (
    ResponsesStream,
    responses_params,
    responses_response,
)

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel"]


class OpenAIChatModel(OpenAIBase):
    """A model behind OpenAI's Chat Completions API (``POST /chat/completions``).

    Maps instructions (a ``system`` message), text, images and PDFs, tool definitions (strict
    where the schema allows), tool calls (parallel too) and their results (one ``tool`` message
    each), settings (``max_tokens`` as ``max_completion_tokens``), ``response_format`` (JSON
    schema), usage (cached and reasoning tokens), finish reasons and the request id. The Chat
    Completions API returns no reasoning text, so thinking is neither returned nor sent.

    Args:
        model: The model name, e.g. ``gpt-4.1``.
        api_key: The API key (default: ``OPENAI_API_KEY``).
        base_url: The API base URL (default: ``OPENAI_BASE_URL`` or OpenAI's).
        client: An ``openai.AsyncOpenAI`` to use (its own retries are turned off).
        http_client: An ``httpx.AsyncClient`` for the SDK client this model creates.
        retry: How failed calls are retried (default ``RetryPolicy()``).
        timeout: Seconds a request may take.
        media_reader: Returns the bytes of a ``MediaRef`` (images and PDFs, base64).
        media_url: Returns a URL OpenAI can fetch an image from (tried first).
        **defaults: Default ``ModelSettings`` fields.
    """

    provider: ClassVar[str] = "openai"
    dialect: ClassVar[ChatDialect] = ChatDialect(provider="openai")
    """How this model speaks Chat Completions (which max-tokens field, reasoning fields)."""

    async def _params(
        self, request: ModelRequest, settings: ModelSettings, *, stream: bool
    ) -> dict[str, Any]:
        return await chat_params(
            request,
            settings,
            model=self.model,
            dialect=self.dialect,
            media=self.media,
            stream=stream,
        )

    async def _send(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None]:
        raw = await call_sdk(client.chat.completions.with_raw_response.create, params)
        return as_dict(raw.parse()), request_id_of(raw.headers)

    async def _start(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> Any:
        return await call_sdk(client.chat.completions.create, params)

    def _parse(self, data: dict[str, Any], request_id: str | None) -> ModelResponse:
        return chat_response(data, request_id=request_id, model=self.model, provider=self.provider)

    def _stream_state(self, request_id: str | None) -> StreamState:
        return ChatStream(request_id=request_id, model=self.model, provider=self.provider)


class OpenAIResponsesModel(OpenAIBase):
    """A model behind OpenAI's Responses API (``POST /responses``), used statelessly.

    Every request carries the whole conversation with ``store: false``; reasoning models get
    ``include: ["reasoning.encrypted_content"]`` and their reasoning items come back as
    ``ThinkingPart``s (summary text, encrypted content as the signature) that are sent back as
    ``reasoning`` input items. Maps instructions, text, images and PDFs (URLs or bytes), tools
    (``strict`` always explicit), tool calls and ``function_call_output``s (with media), settings
    (``max_tokens`` as ``max_output_tokens``; ``stop`` does not exist here and raises
    ``UsageError``), ``text.format`` for ``response_format``, usage, and ``incomplete_details``
    as finish reasons.

    Args:
        model: The model name, e.g. ``o4-mini`` or ``gpt-4.1``.
        api_key: The API key (default: ``OPENAI_API_KEY``).
        base_url: The API base URL (default: ``OPENAI_BASE_URL`` or OpenAI's).
        client: An ``openai.AsyncOpenAI`` to use (its own retries are turned off).
        http_client: An ``httpx.AsyncClient`` for the SDK client this model creates.
        retry: How failed calls are retried (default ``RetryPolicy()``).
        timeout: Seconds a request may take.
        media_reader: Returns the bytes of a ``MediaRef`` (images and PDFs, base64).
        media_url: Returns a URL OpenAI can fetch an image or PDF from (tried first).
        **defaults: Default ``ModelSettings`` fields.
    """

    provider: ClassVar[str] = "openai"

    async def _params(
        self, request: ModelRequest, settings: ModelSettings, *, stream: bool
    ) -> dict[str, Any]:
        return await responses_params(
            request, settings, model=self.model, media=self.media, stream=stream
        )

    async def _send(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None]:
        raw = await call_sdk(client.responses.with_raw_response.create, params)
        return as_dict(raw.parse()), request_id_of(raw.headers)

    async def _start(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> Any:
        return await call_sdk(client.responses.create, params)

    def _parse(self, data: dict[str, Any], request_id: str | None) -> ModelResponse:
        return responses_response(
            data, request_id=request_id, model=self.model, provider=self.provider
        )

    def _stream_state(self, request_id: str | None) -> StreamState:
        return ResponsesStream(request_id=request_id, model=self.model, provider=self.provider)
