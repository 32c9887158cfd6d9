"""What the provider adapter tests share: a fake sleep, wiring, requests, media, hanging streams.

Each adapter's tests replay wire fixtures (``wirekit``) through its real HTTP code; the pieces
around that were the same in every file and live here. Model requests are allowed for these
tests by ``tests/providers/conftest.py``. The OpenAI-format tool definitions and media at the
end are the ones the fixtures of both OpenAI adapters (Chat Completions, Responses) were
written with.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

import steadyrun as sr
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelSettings,
    ResponseDelta,
    ResponseFormat,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from steadyrun.models import RetryPolicy
from steadyrun.models.anthropic import AnthropicModel
from steadyrun.models.google import GoogleModel
from steadyrun.models.openai import OpenAIChatModel, OpenAIResponsesModel
from wirekit import WireReplay, load

__all__ = [
    "ANSWER",
    "CHART",
    "CITY",
    "CITY_INFO",
    "CLAUDE",
    "ANTHROPIC_WEATHER",
    "CONTRACT",
    "GEMINI",
    "NOOP",
    "OPENAI_BLOBS",
    "ORDER",
    "PDF",
    "PNG",
    "QUESTION",
    "SEARCH",
    "SYSTEM",
    "WEATHER",
    "HangingStream",
    "Sleeps",
    "Wire",
    "anthropic_model",
    "ask",
    "cancel_midway",
    "collect",
    "google_model",
    "http_client",
    "media_ref",
    "media_reader",
    "openai_chat",
    "openai_responses",
    "media_request",
    "order_tool",
    "parallel_request",
    "replay_of",
    "tool_media_request",
    "weather_question",
    "waits",
]


CLAUDE = "claude-sonnet-4-6"
GEMINI = "gemini-2.5-flash"

SYSTEM = "You are a terse geography assistant."
QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
"""The instructions, question and answer of the OpenAI fixtures (``ask``'s question)."""


class Sleeps:
    """Stands in for an adapter's sleep between retries: records the waits, waits nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def waits(model: Any) -> list[float]:
    """The waits an adapter made by one of the constructors below took between retries."""
    sleeps = model.retry_sleep if isinstance(model, GoogleModel) else model.sleep
    assert isinstance(sleeps, Sleeps)
    return sleeps.waits


Wire = WireReplay | httpx.AsyncBaseTransport
"""Where an adapter's requests go: a wire replay, or any transport (``httpx.MockTransport``)."""


def replay_of(name: str) -> WireReplay:
    """A replay of the wire fixture ``name``."""
    return WireReplay(load(name))


def http_client(source: Wire) -> httpx.AsyncClient:
    """An HTTP client that sends to a wire replay (or to any transport)."""
    transport = source.transport if isinstance(source, WireReplay) else source
    return httpx.AsyncClient(transport=transport)


def openai_chat(source: Wire, model: str = "gpt-4.1", **options: Any) -> OpenAIChatModel:
    """An ``OpenAIChatModel`` sending to ``source``, its retries waiting nothing."""
    built = OpenAIChatModel(model, api_key="sk-test", http_client=http_client(source), **options)
    built.sleep = Sleeps()
    return built


def openai_responses(source: Wire, model: str = "gpt-4.1", **options: Any) -> OpenAIResponsesModel:
    """An ``OpenAIResponsesModel`` sending to ``source``, its retries waiting nothing."""
    built = OpenAIResponsesModel(
        model, api_key="sk-test", http_client=http_client(source), **options
    )
    built.sleep = Sleeps()
    return built


def anthropic_model(source: Wire, model: str = CLAUDE, **options: Any) -> AnthropicModel:
    """An ``AnthropicModel`` sending to ``source``, its retries waiting nothing."""
    built = AnthropicModel(model, api_key="sk-ant-test", http_client=http_client(source), **options)
    built.sleep = Sleeps()
    return built


def google_model(source: Wire, model: str = GEMINI, **options: Any) -> GoogleModel:
    """A ``GoogleModel`` sending to ``source``, retrying without jitter and waiting nothing."""
    options.setdefault("retry", RetryPolicy(jitter=0.0))  # waits the fixtures can name
    built = GoogleModel(model, api_key="test-key", http_client=http_client(source), **options)
    built.retry_sleep = Sleeps()
    return built


def ask(text: str = QUESTION, *, instructions: str = "", **settings: Any) -> ModelRequest:
    """A request of one user message, with instructions and settings."""
    return ModelRequest(
        instructions=instructions, messages=[Message.user(text)], settings=ModelSettings(**settings)
    )


async def collect(stream: AsyncIterator[ResponseDelta]) -> list[ResponseDelta]:
    """Every delta of a stream."""
    return [d async for d in stream]


def media_ref(key: str, mime: str, data: bytes) -> MediaRef:
    """The reference to ``data`` stored under ``key``."""
    return MediaRef(key=key, mime=mime, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def media_reader(blobs: dict[str, bytes]) -> Callable[[MediaRef], Awaitable[bytes]]:
    """A media reader that serves ``blobs`` by key."""

    async def read_media(ref: MediaRef) -> bytes:
        return blobs[ref.key]

    return read_media


def order_tool(reply: str) -> sr.Tool:
    """The ``lookup_order`` tool of the fixtures' agent runs; ``reply`` has an ``{order_id}``."""

    def lookup_order(order_id: str) -> str:
        """Look up an order.

        Args:
            order_id: The order id.
        """
        return reply.format(order_id=order_id)

    return sr.tool(lookup_order)


class HangingStream(httpx.AsyncBaseTransport):
    """Answers with an event stream that sends ``first``, then never anything more."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.requests: list[httpx.Request] = []
        self.closed = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        transport = self

        class Body(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                yield transport.first
                await asyncio.Event().wait()

            async def aclose(self) -> None:
                transport.closed.set()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())


async def cancel_midway(model: Any, request: ModelRequest, transport: HangingStream) -> None:
    """Cancel a stream after its first delta: one request was sent, and its response closed."""
    got = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(request):
            got.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(transport.requests) == 1
    assert transport.closed.is_set()


# -- the OpenAI fixtures' tools and media (Chat Completions and Responses) -----------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake chart"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF"
CHART = media_ref("charts/q3.png", "image/png", PNG)
CONTRACT = media_ref("docs/contract.pdf", "application/pdf", PDF)
OPENAI_BLOBS = {CHART.key: PNG, CONTRACT.key: PDF}

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name."},
            "unit": {"type": ["string", "null"], "enum": ["c", "f", None]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    strict=True,
)
SEARCH = ToolDefinition(  # strict asked for, but "limit" is optional: sent non-strict
    name="search_docs",
    description="Search the documentation.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["query"],
        "additionalProperties": False,
    },
    strict=True,
)
NOOP = ToolDefinition(
    name="noop",
    description="",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)


CITY = ResponseFormat(
    name="city",
    schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    },
)
"""A strict-compatible structured output of the OpenAI fixtures."""
CITY_INFO = ResponseFormat(
    name="city_info",
    schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city"],
    },
)
"""A structured output that is not strict-compatible (``population`` is optional)."""


def weather_question(**settings: Any) -> ModelRequest:
    """The OpenAI fixtures' question with the three tools, and ``settings``."""
    return ModelRequest(
        messages=[Message.user("What's the weather in Paris?")],
        tools=[WEATHER, SEARCH, NOOP],
        settings=ModelSettings(**settings),
    )


def parallel_request(*extra: Message) -> ModelRequest:
    """The OpenAI fixtures' question for parallel calls, ``extra`` messages after it."""
    return ModelRequest(
        messages=[Message.user("Compare the weather in Paris and Tokyo."), *extra],
        tools=[WEATHER],
        settings=ModelSettings(parallel_tool_calls=True),
    )


def media_request() -> ModelRequest:
    """The OpenAI fixtures' question about a chart (``CHART``) and a contract (``CONTRACT``)."""
    message = Message(
        role="user",
        parts=[
            TextPart(text="Describe the chart and summarize the contract."),
            MediaPart(ref=CHART),
            MediaPart(ref=CONTRACT),
        ],
    )
    return ModelRequest(messages=[message])


def tool_media_request() -> ModelRequest:
    """The OpenAI fixtures' conversation in which a tool's result carries ``CHART``."""
    call = ToolCallPart(call_id="call_c1", name="render_chart", arguments='{"metric":"sales"}')
    result = ToolResultPart(
        call_id="call_c1", name="render_chart", content="rendered chart.png", media=[CHART]
    )
    return ModelRequest(
        messages=[
            Message.user("Chart the sales."),
            Message(role="assistant", parts=[call]),
            Message(role="tool", parts=[result]),
        ]
    )


# -- the Anthropic fixtures' tools (also those of the token counts) ------------------------

ANTHROPIC_WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
)
ORDER = ToolDefinition(
    name="lookup_order",
    description="Look up an order by its id.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)
