"""OpenAIChatModel (Chat Completions) against wire fixtures written from the API reference."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
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
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    accumulate,
)
from steadyrun.models import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimited,
    RetryPolicy,
    ServerError,
    model_requests,
)
from steadyrun.models._openai_common import retry_after_seconds, strict_compatible
from steadyrun.models.openai import OpenAIChatModel
from wirekit import WireReplay, load

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake chart"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF"
CHART = MediaRef(
    key="charts/q3.png", mime="image/png", size=len(PNG), sha256=hashlib.sha256(PNG).hexdigest()
)
CONTRACT = MediaRef(
    key="docs/contract.pdf",
    mime="application/pdf",
    size=len(PDF),
    sha256=hashlib.sha256(PDF).hexdigest(),
)
BLOBS = {CHART.key: PNG, CONTRACT.key: PDF}

SYSTEM = "You are a terse geography assistant."
QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."

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


@pytest.fixture(autouse=True)
def _allow_model_requests() -> Iterator[None]:
    with model_requests(True):
        yield


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def chat_model(
    replay: WireReplay | httpx.AsyncBaseTransport, model: str = "gpt-4.1", **options: Any
) -> OpenAIChatModel:
    transport = replay.transport if isinstance(replay, WireReplay) else replay
    built = OpenAIChatModel(
        model, api_key="sk-test", http_client=httpx.AsyncClient(transport=transport), **options
    )
    built.sleep = Sleeps()
    return built


def ask(text: str = QUESTION, *, instructions: str = "", **settings: Any) -> ModelRequest:
    return ModelRequest(
        instructions=instructions, messages=[Message.user(text)], settings=ModelSettings(**settings)
    )


async def read_media(ref: MediaRef) -> bytes:
    return BLOBS[ref.key]


async def collect(stream: AsyncIterator[ResponseDelta]) -> list[ResponseDelta]:
    return [d async for d in stream]


# -- text, instructions, request id --------------------------------------------------------


async def test_text_with_instructions() -> None:
    replay = WireReplay(load("openai_chat_text"))
    response = await chat_model(replay).respond(ask(instructions=SYSTEM))
    replay.assert_done()
    assert replay.bodies[0] == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
    }
    assert replay.requests[0].headers["authorization"] == "Bearer sk-test"
    assert response.message == Message(role="assistant", parts=[TextPart(text=ANSWER)])
    assert response.finish_reason == "stop"
    assert response.usage == Usage(requests=1, input_tokens=24, output_tokens=8)
    assert response.model_name == "gpt-4.1-2025-04-14"
    assert response.provider_details == {
        "request_id": "req_7c2e0a1f9d",
        "response_id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    }


async def test_stream_parity_text() -> None:
    plain = WireReplay(load("openai_chat_text"))
    streamed = WireReplay(load("openai_chat_text_stream"))
    response = await chat_model(plain).respond(ask(instructions=SYSTEM))
    deltas = await collect(chat_model(streamed).stream(ask(instructions=SYSTEM)))
    plain.assert_done()
    streamed.assert_done()
    assert [d.text for d in deltas if d.part == "text"] == [
        "The capital",
        " of France",
        " is Paris.",
    ]
    assert deltas[-1].part == "finish"
    assert accumulate(deltas) == response
    assert streamed.bodies[0]["stream"] is True
    assert streamed.bodies[0]["stream_options"] == {"include_usage": True}


async def test_stream_parity_parallel_tool_calls() -> None:
    plain = WireReplay(load("openai_chat_parallel")[:1])
    streamed = WireReplay(load("openai_chat_parallel_stream"))
    request = parallel_request()
    response = await chat_model(plain).respond(request)
    deltas = await collect(chat_model(streamed).stream(request))
    plain.assert_done()
    streamed.assert_done()
    assert accumulate(deltas) == response
    assert [c.call_id for c in response.message.tool_calls] == ["call_p1Kd", "call_p2Lm"]
    assert response.finish_reason == "tool_calls"


# -- usage, reasoning ----------------------------------------------------------------------


async def test_usage_with_cached_and_reasoning_tokens_and_thinking_not_sent() -> None:
    replay = WireReplay(load("openai_chat_usage"))
    history = [
        Message.user("Plan a 3-day trip to Rome."),
        Message(
            role="assistant",
            parts=[
                ThinkingPart(text="Three days, classic sights.", signature="sig-from-elsewhere"),
                TextPart(text="Day 1: Colosseum. Day 2: Vatican. Day 3: Trastevere."),
            ],
        ),
        Message.user("Make it 2 days."),
    ]
    response = await chat_model(replay, "o4-mini").respond(ModelRequest(messages=history))
    replay.assert_done()
    # Chat Completions has no field for reasoning: thinking from history is left out.
    assert replay.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": "Day 1: Colosseum. Day 2: Vatican. Day 3: Trastevere.",
    }
    assert response.usage == Usage(
        requests=1,
        input_tokens=1450,
        output_tokens=620,
        cache_read_tokens=1024,
        reasoning_tokens=448,
    )
    assert response.model_name == "o4-mini-2025-04-16"
    assert not any(isinstance(p, ThinkingPart) for p in response.message.parts)


# -- settings ------------------------------------------------------------------------------


async def test_settings_defaults_and_extra() -> None:
    replay = WireReplay(load("openai_chat_settings"))
    model = chat_model(replay, temperature=0.9, max_tokens=200, extra={"seed": 7, "top_k": 10})
    request = ask(
        "Count to ten, then say END.",
        temperature=0.3,
        stop=["END"],
        extra={"metadata": {"run": "r1"}, "top_k": 40},
    )
    response = await model.respond(request)
    replay.assert_done()
    body = replay.bodies[0]
    assert body["temperature"] == 0.3  # the request wins over the default
    assert body["max_completion_tokens"] == 200  # from the default
    assert "max_tokens" not in body
    assert body["stop"] == ["END"]
    assert body["seed"] == 7 and body["metadata"] == {"run": "r1"}
    assert body["top_k"] == 40  # unknown to the SDK: passed through extra_body
    assert response.message.text == "1 2 3 4 5 6 7 8 9 10 "


def test_unknown_default_setting_is_a_usage_error() -> None:
    with pytest.raises(sr.UsageError, match="temprature"):
        OpenAIChatModel("gpt-4.1", api_key="sk-test", temprature=0.2)


# -- tools ---------------------------------------------------------------------------------


def weather_question(**settings: Any) -> ModelRequest:
    return ModelRequest(
        messages=[Message.user("What's the weather in Paris?")],
        tools=[WEATHER, SEARCH, NOOP],
        settings=ModelSettings(**settings),
    )


async def test_tool_definitions_and_tool_choice() -> None:
    replay = WireReplay(load("openai_chat_tools"))
    model = chat_model(replay)
    auto = await model.respond(weather_question(tool_choice="auto", parallel_tool_calls=False))
    none = await model.respond(weather_question(tool_choice="none"))
    required = await model.respond(weather_question(tool_choice="required"))
    named = await model.respond(weather_question(tool_choice="get_weather"))
    replay.assert_done()
    tools = replay.bodies[0]["tools"]
    assert tools[0]["function"]["strict"] is True
    assert "strict" not in tools[1]["function"]  # optional property: not strict-compatible
    assert "strict" not in tools[2]["function"] and "description" not in tools[2]["function"]
    assert [b["tool_choice"] for b in replay.bodies] == [
        "auto",
        "none",
        "required",
        {"type": "function", "function": {"name": "get_weather"}},
    ]
    assert auto.finish_reason == "stop" and auto.message.text == "Which unit would you like?"
    assert none.finish_reason == "stop"
    assert required.finish_reason == "tool_calls"
    assert required.message.tool_calls == [
        ToolCallPart(
            call_id="call_r3Qx", name="get_weather", arguments='{"city":"Paris","unit":"c"}'
        )
    ]
    # A forced function answers with finish_reason "stop": it still means "call the tools".
    assert named.finish_reason == "tool_calls"
    assert named.message.tool_calls[0].call_id == "call_n4Zk"


async def test_tool_choice_must_name_a_tool() -> None:
    replay = WireReplay([])
    with pytest.raises(sr.UsageError, match="lookup"):
        await chat_model(replay).respond(weather_question(tool_choice="lookup"))
    assert replay.requests == []


def test_strict_compatibility() -> None:
    assert strict_compatible(WEATHER.parameters)
    assert not strict_compatible(SEARCH.parameters)
    nested_open = {
        "type": "object",
        "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["tags"],
        "additionalProperties": False,
    }
    assert not strict_compatible(nested_open)


async def test_single_tool_call_and_its_result() -> None:
    replay = WireReplay(load("openai_chat_tool_call"))
    model = chat_model(replay)
    question = Message.user("What's the weather in Paris?")
    first = await model.respond(ModelRequest(messages=[question], tools=[WEATHER]))
    assert first.finish_reason == "tool_calls"
    assert first.message.parts == [
        ToolCallPart(call_id="call_w1", name="get_weather", arguments='{"city":"Paris","unit":"c"}')
    ]
    results = Message(
        role="tool",
        parts=[ToolResultPart(call_id="call_w1", name="get_weather", content="18°C, light rain")],
    )
    second = await model.respond(
        ModelRequest(messages=[question, first.message, results], tools=[WEATHER])
    )
    replay.assert_done()
    assert second.message.text == "It's 18°C with light rain in Paris."
    assert replay.bodies[1]["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_w1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"c"}'},
            }
        ],
    }


def parallel_request(*extra: Message) -> ModelRequest:
    return ModelRequest(
        messages=[Message.user("Compare the weather in Paris and Tokyo."), *extra],
        tools=[WEATHER],
        settings=ModelSettings(parallel_tool_calls=True),
    )


async def test_parallel_tool_calls_and_results() -> None:
    replay = WireReplay(load("openai_chat_parallel"))
    model = chat_model(replay)
    first = await model.respond(parallel_request())
    assert first.finish_reason == "tool_calls"
    assert [(c.call_id, json.loads(c.arguments)["city"]) for c in first.message.tool_calls] == [
        ("call_p1Kd", "Paris"),
        ("call_p2Lm", "Tokyo"),
    ]
    results = Message(
        role="tool",
        parts=[
            ToolResultPart(call_id="call_p1Kd", name="get_weather", content="18°C, light rain"),
            ToolResultPart(
                call_id="call_p2Lm",
                name="get_weather",
                content="weather service timed out",
                is_error=True,
            ),
        ],
    )
    second = await model.respond(parallel_request(first.message, results))
    replay.assert_done()
    tool_messages = [m for m in replay.bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "call_p1Kd", "content": "18°C, light rain"},
        {"role": "tool", "tool_call_id": "call_p2Lm", "content": "weather service timed out"},
    ]
    assert second.finish_reason == "stop"


# -- media ---------------------------------------------------------------------------------


def media_request() -> ModelRequest:
    message = Message(
        role="user",
        parts=[
            TextPart(text="Describe the chart and summarize the contract."),
            MediaPart(ref=CHART),
            MediaPart(ref=CONTRACT),
        ],
    )
    return ModelRequest(messages=[message])


async def test_image_and_pdf_from_media_reader_and_media_url() -> None:
    exchanges = load("openai_chat_media")
    by_bytes = WireReplay(exchanges[:1])
    await chat_model(by_bytes, media_reader=read_media).respond(media_request())
    by_bytes.assert_done()

    async def media_url(ref: MediaRef) -> str | None:
        return f"https://media.example.com/{ref.key}"

    by_url = WireReplay(exchanges[1:])
    response = await chat_model(by_url, media_reader=read_media, media_url=media_url).respond(
        media_request()
    )
    by_url.assert_done()  # the image by URL; the PDF still as file_data (no URL form here)
    content = by_url.bodies[0]["messages"][0]["content"]
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": "https://media.example.com/charts/q3.png"},
    }
    assert content[2]["file"]["file_data"].startswith("data:application/pdf;base64,")
    assert response.message.text.startswith("A bar chart")


async def test_media_needs_a_reader() -> None:
    replay = WireReplay([])
    with pytest.raises(sr.UsageError, match="media_reader"):
        await chat_model(replay).respond(media_request())
    assert replay.requests == []


async def test_media_of_other_types_is_refused() -> None:
    audio = MediaRef(key="a.wav", mime="audio/wav", size=3)
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=audio)])])
    with pytest.raises(sr.UsageError, match="audio/wav"):
        await chat_model(WireReplay([]), media_reader=read_media).respond(request)


async def test_media_bytes_must_match_sha256() -> None:
    forged = MediaRef(key=CHART.key, mime="image/png", size=len(PNG), sha256="0" * 64)
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=forged)])])
    with pytest.raises(sr.UsageError, match="sha256"):
        await chat_model(WireReplay([]), media_reader=read_media).respond(request)


async def test_tool_result_media_follow_in_a_user_message() -> None:
    replay = WireReplay(load("openai_chat_tool_media"))
    call = ToolCallPart(call_id="call_c1", name="render_chart", arguments='{"metric":"sales"}')
    messages = [
        Message.user("Chart the sales."),
        Message(role="assistant", parts=[call]),
        Message(
            role="tool",
            parts=[
                ToolResultPart(
                    call_id="call_c1",
                    name="render_chart",
                    content="rendered chart.png",
                    media=[CHART],
                )
            ],
        ),
    ]
    response = await chat_model(replay, media_reader=read_media).respond(
        ModelRequest(messages=messages)
    )
    replay.assert_done()
    assert response.message.text == "Sales rose every quarter."


# -- finish reasons, structured output -----------------------------------------------------


async def test_finish_reasons() -> None:
    replay = WireReplay(load("openai_chat_finish"))
    model = chat_model(replay)
    cut = await model.respond(ask(max_tokens=5))
    filtered = await model.respond(ask())
    refused = await model.respond(ask())
    replay.assert_done()
    assert (cut.finish_reason, cut.message.text) == ("length", "The capital of France")
    assert (filtered.finish_reason, filtered.message.parts) == ("content_filter", [])
    assert refused.finish_reason == "content_filter"
    assert refused.message.text == "I'm sorry, I can't help with that."


async def test_response_format_json_schema() -> None:
    replay = WireReplay(load("openai_chat_response_format"))
    model = chat_model(replay)
    city = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    loose = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city"],
    }
    strict = await model.respond(ask(response_format=ResponseFormat(name="city", schema=city)))
    relaxed = await model.respond(
        ask(response_format=ResponseFormat(name="city_info", schema=loose))
    )
    replay.assert_done()
    assert json.loads(strict.message.text) == {"city": "Paris", "country": "France"}
    assert json.loads(relaxed.message.text) == {"city": "Paris"}
    assert OpenAIChatModel.supports_response_format is True


# -- errors and retries --------------------------------------------------------------------


async def test_429_is_retried_after_retry_after() -> None:
    replay = WireReplay(load("openai_chat_error_429"))
    model = chat_model(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert model.sleep.waits == [1.0]  # type: ignore[attr-defined]
    assert response.message.text == ANSWER


@pytest.mark.parametrize("name", ["openai_chat_error_500", "openai_chat_error_503"])
async def test_server_errors_and_overload_are_retried(name: str) -> None:
    replay = WireReplay(load(name))
    model = chat_model(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert len(model.sleep.waits) == 1  # type: ignore[attr-defined]
    assert response.message.text == ANSWER


@pytest.mark.parametrize(
    ("name", "cls", "status", "code", "request_id"),
    [
        ("openai_chat_error_401", AuthenticationFailed, 401, "invalid_api_key", "req_err_401"),
        ("openai_chat_error_400", BadRequest, 400, "invalid_value", "req_err_400"),
        (
            "openai_chat_error_context",
            ContextOverflow,
            400,
            "context_length_exceeded",
            "req_err_ctx",
        ),
    ],
)
async def test_client_errors_are_not_retried(
    name: str, cls: type[Exception], status: int, code: str, request_id: str
) -> None:
    replay = WireReplay(load(name))
    model = chat_model(replay)
    with pytest.raises(cls) as caught:
        await model.respond(ask())
    replay.assert_done()
    error = caught.value
    assert type(error) is cls
    assert (error.status, error.code, error.request_id) == (status, code, request_id)  # type: ignore[attr-defined]
    assert error.body["error"]["code"] == code  # type: ignore[attr-defined]
    assert model.sleep.waits == []  # type: ignore[attr-defined]


async def test_overload_is_typed() -> None:
    replay = WireReplay(load("openai_chat_error_503")[:1])
    with pytest.raises(Overloaded):
        await chat_model(replay, retry=RetryPolicy(max_attempts=1)).respond(ask())


async def test_retries_exhausted_raise_the_last_error() -> None:
    replay = WireReplay(load("openai_chat_error_exhausted"))
    model = chat_model(replay, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    with pytest.raises(ServerError) as caught:
        await model.respond(ask())
    replay.assert_done()
    error = caught.value
    assert (error.status, error.code, error.request_id) == (500, "server_error", "req_err_3")
    assert error.body["error"]["type"] == "server_error"
    assert len(model.sleep.waits) == 2  # type: ignore[attr-defined]


async def test_stream_failing_before_the_first_event_is_retried() -> None:
    replay = WireReplay(load("openai_chat_error_stream_retry"))
    model = chat_model(replay)
    deltas = await collect(model.stream(ask()))
    replay.assert_done()  # a 500, then an error event, then the answer
    assert len(model.sleep.waits) == 2  # type: ignore[attr-defined]
    response = accumulate(deltas)
    assert response.message.text == ANSWER
    assert response.provider_details == {
        "request_id": "req_serr_3",
        "response_id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    }


async def test_stream_failing_after_a_delta_is_not_retried() -> None:
    replay = WireReplay(load("openai_chat_error_midstream"))
    model = chat_model(replay)
    seen: list[ResponseDelta] = []
    with pytest.raises(ServerError):
        async for delta in model.stream(ask()):
            seen.append(delta)
    replay.assert_done()
    assert [d.text for d in seen] == ["The capital"]
    assert model.sleep.waits == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("failure", "cls"),
    [(httpx.ReadTimeout, ProviderTimeout), (httpx.ConnectError, ProviderConnectionError)],
)
async def test_timeouts_and_connection_failures_are_retried(
    failure: type[httpx.TransportError], cls: type[Exception]
) -> None:
    seen: list[httpx.Request] = []

    def fail(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise failure("no answer", request=request)

    model = chat_model(httpx.MockTransport(fail), retry=RetryPolicy(max_attempts=2))
    with pytest.raises(cls):
        await model.respond(ask())
    assert len(seen) == 2


def test_retry_after_forms() -> None:
    assert retry_after_seconds(httpx.Headers({"retry-after": "3"})) == 3.0
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert (
        retry_after_seconds(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    )
    assert retry_after_seconds(httpx.Headers({})) is None


async def test_rate_limit_carries_retry_after() -> None:
    replay = WireReplay(load("openai_chat_error_429")[:1])
    with pytest.raises(RateLimited) as caught:
        await chat_model(replay, retry=RetryPolicy(max_attempts=1)).respond(ask())
    assert caught.value.retry_after == 1.0
    assert caught.value.code == "rate_limit_exceeded"


# -- cancellation --------------------------------------------------------------------------


class HangingStream(httpx.AsyncBaseTransport):
    """Sends one SSE event, then never anything more."""

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


async def test_cancellation_stops_a_stream() -> None:
    chunk = {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": {"content": "The"}, "finish_reason": None}],
    }
    transport = HangingStream(f"data: {json.dumps(chunk)}\n\n".encode())
    await cancel_midway(chat_model(transport), ask(), transport)


# -- the adapter in a run, by name, without a key ------------------------------------------


@sr.tool
def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return f"Order {order_id}: shipped on Monday"


async def test_agent_run_through_the_runtime() -> None:
    replay = WireReplay(load("openai_chat_agent"))
    agent = sr.Agent(
        name="support",
        instructions="You help customers with their orders.",
        model=chat_model(replay),
        tools=[lookup_order],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="t-1", input="Where is order 42?")
    replay.assert_done()
    assert result.status == "completed"
    assert result.text == "Order 42 shipped on Monday."
    assert [(c.provider_call_id, c.status) for c in result.calls] == [("call_a1", "succeeded")]
    assert result.usage.requests == 2


def test_registry_resolves_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    agent = sr.Agent(name="a", model="openai:gpt-4.1")
    client = agent.client
    assert isinstance(client, OpenAIChatModel)
    assert client.model == "gpt-4.1"
    assert client.sdk_client().api_key == "sk-from-env"
    assert client.sdk_client().max_retries == 0


async def test_missing_key_fails_at_the_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("gpt-4.1")  # constructing needs no key
    with pytest.raises(sr.UsageError, match="OPENAI_API_KEY"):
        await model.respond(ask())


async def test_blocked_model_requests_send_nothing() -> None:
    replay = WireReplay([])
    with model_requests(False), pytest.raises(sr.UsageError, match="blocked"):
        await chat_model(replay).respond(ask())
    assert replay.requests == []


def test_given_client_loses_its_retries() -> None:
    client = openai.AsyncOpenAI(api_key="sk-test", max_retries=5)
    model = OpenAIChatModel("gpt-4.1", client=client, timeout=12.0)
    assert model.sdk_client().max_retries == 0
    assert model.sdk_client().timeout == 12.0
