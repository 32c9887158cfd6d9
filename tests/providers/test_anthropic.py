"""The Anthropic adapter: request and response mapping, replayed from wire fixtures.

Each test replays ``tests/providers/wire/anthropic_*.json`` (written from the Messages API
reference) through the SDK's own HTTP client; requests are checked by the recorded subset and
by ``replay.bodies``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
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
    ResponseFormat,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
)
from steadyrun.models import AuthenticationFailed, model_requests, resolve_model
from steadyrun.models.anthropic import DEFAULT_MAX_TOKENS, AnthropicModel
from wirekit import WireReplay, load

MODEL = "claude-sonnet-4-6"
ANSWERING_MODEL = "claude-sonnet-4-6"

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city name."},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters=WEATHER_SCHEMA,
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

PNG = b"\x89PNG\r\n\x1a\n"
PDF = b"%PDF-1.4\n%%EOF\n"
RADAR = b"\x89PNG\r\n\x1a\nradar"


def ref(key: str, mime: str, data: bytes) -> MediaRef:
    return MediaRef(key=key, mime=mime, size=len(data), sha256=hashlib.sha256(data).hexdigest())


PHOTO = ref("photo.png", "image/png", PNG)
REPORT = ref("report.pdf", "application/pdf", PDF)
RADAR_MAP = ref("radar/paris.png", "image/png", RADAR)
STORE = {PHOTO.key: PNG, REPORT.key: PDF, RADAR_MAP.key: RADAR}


async def read_media(media: MediaRef) -> bytes:
    return STORE[media.key]


@pytest.fixture(autouse=True)
def _allow_model_requests() -> Iterator[None]:
    with model_requests(True):
        yield


def replay_of(name: str) -> WireReplay:
    return WireReplay(load(name))


def model_for(replay: WireReplay, **options: Any) -> AnthropicModel:
    http_client = httpx.AsyncClient(transport=replay.transport)
    return AnthropicModel(MODEL, api_key="sk-ant-test", http_client=http_client, **options)


def user(text: str) -> ModelRequest:
    return ModelRequest(messages=[Message.user(text)])


# -- text, system --------------------------------------------------------------------------


async def test_text_with_system_instructions() -> None:
    replay = replay_of("anthropic_text")
    model = model_for(replay)
    request = ModelRequest(
        instructions="You are a terse assistant.", messages=[Message.user("Say hello.")]
    )

    response = await model.respond(request)

    replay.assert_done()
    assert replay.bodies[0] == {
        "model": MODEL,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": "You are a terse assistant.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}],
    }
    headers = replay.requests[0].headers
    assert headers["authorization"] == "Bearer sk-ant-test"
    assert headers["x-stainless-retry-count"] == "0"
    assert response.message == Message(
        role="assistant", parts=[TextPart(text="Hello! How can I help you today?")]
    )
    assert response.finish_reason == "stop"
    assert response.model_name == ANSWERING_MODEL
    assert response.usage == Usage(requests=1, input_tokens=21, output_tokens=12)
    assert response.provider_details == {
        "request_id": "req_011CTextHello0001",
        "response_id": "msg_01TextHelloAnswer01",
        "stop_reason": "end_turn",
    }


async def test_leading_system_messages_join_the_instructions_later_ones_keep_their_place() -> None:
    replay = replay_of("anthropic_system")
    model = model_for(replay)
    request = ModelRequest(
        instructions="You are a support agent for an online shop.",
        messages=[
            Message(role="system", parts=[TextPart(text="The customer is on the premium plan.")]),
            Message.user("Hi"),
            Message(role="assistant", parts=[TextPart(text="Hello! What can I do for you?")]),
            Message(role="system", parts=[TextPart(text="Order 4711 shipped today.")]),
            Message.user("Where is my order?"),
            Message.user("It is order 4711."),  # consecutive user messages become one turn
        ],
    )

    response = await model.respond(request)

    replay.assert_done()
    assert [m["role"] for m in replay.bodies[0]["messages"]] == [
        "user",
        "assistant",
        "system",
        "user",
    ]
    assert response.message.text == "Order 4711 shipped today."


async def test_system_message_with_media_is_refused() -> None:
    model = model_for(WireReplay([]), media_reader=read_media)
    request = ModelRequest(messages=[Message(role="system", parts=[MediaPart(ref=PHOTO)])])
    with pytest.raises(sr.UsageError, match="system message may hold only text"):
        await model.respond(request)


# -- thinking --------------------------------------------------------------------------------


async def test_thinking_is_kept_and_sent_back_unchanged_before_the_tool_calls() -> None:
    replay = replay_of("anthropic_thinking")
    model = model_for(replay, extra={"thinking": {"type": "enabled", "budget_tokens": 10000}})
    first = ModelRequest(
        instructions="You answer weather questions with the get_weather tool.",
        messages=[Message.user("What's the weather in Paris?")],
        tools=[WEATHER],
    )

    response = await model.respond(first)

    wire = load("anthropic_thinking")[0]["response"]["json"]["content"]
    assert response.message.parts == [
        ThinkingPart(text=wire[0]["thinking"], signature=wire[0]["signature"]),
        ThinkingPart(text="", provider_details={"redacted": wire[1]["data"]}),
        TextPart(text="Let me check the weather in Paris."),
        ToolCallPart(
            call_id="toolu_01A09q90qw90lq917835lq9",
            name="get_weather",
            arguments='{"city": "Paris", "unit": "celsius"}',
        ),
    ]
    assert response.finish_reason == "tool_calls"
    # max_tokens defaults to the thinking budget plus DEFAULT_MAX_TOKENS for the answer.
    assert replay.bodies[0]["max_tokens"] == 10000 + DEFAULT_MAX_TOKENS
    assert response.usage == Usage(
        requests=1,
        input_tokens=412 + 1024 + 2048,
        output_tokens=180,
        cache_read_tokens=2048,
        cache_write_tokens=1024,
        reasoning_tokens=96,
    )

    call = response.message.tool_calls[0]
    follow_up = ModelRequest(
        messages=[
            *first.messages,
            response.message,
            Message(
                role="tool",
                parts=[
                    ToolResultPart(call_id=call.call_id, name=call.name, content="15°C, light rain")
                ],
            ),
        ],
        tools=[WEATHER],
    )
    final = await model.respond(follow_up)

    replay.assert_done()
    sent_back = replay.bodies[1]["messages"][1]
    assert sent_back == {"role": "assistant", "content": wire}  # byte for byte what came
    assert final.message.text == "It is 15°C with light rain in Paris."
    assert final.usage.cache_read_tokens == 3072


async def test_unsigned_thinking_and_empty_text_are_not_sent_and_bad_arguments_are_kept() -> None:
    replay = replay_of("anthropic_history")
    model = model_for(replay)
    request = ModelRequest(
        messages=[
            Message.user("Book the 9:00 train."),
            Message(
                role="assistant",
                parts=[
                    ThinkingPart(text="reasoning from another provider"),  # no signature
                    TextPart(text=""),
                    ToolCallPart(
                        call_id="toolu_01BookTrain0000000001",
                        name="book_train",
                        arguments='{"time": "9:00"',
                    ),
                ],
            ),
            Message.user("Any seat is fine."),  # out of order: results still open the turn
            Message(
                role="tool",
                parts=[
                    ToolResultPart(
                        call_id="toolu_01BookTrain0000000001",
                        name="book_train",
                        content="Invalid arguments for book_train: the JSON is cut off",
                        is_error=True,
                    )
                ],
            ),
        ]
    )

    response = await model.respond(request)

    replay.assert_done()
    assert response.message.tool_calls[0].arguments == '{"time": "9:00"}'


# -- tools -----------------------------------------------------------------------------------


async def test_single_tool_call_and_strict_tool_definitions() -> None:
    replay = replay_of("anthropic_tool_single")
    model = model_for(replay)
    strict_weather = ToolDefinition(
        name="get_weather",
        description="Get the current weather for a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
            "additionalProperties": False,
        },
        strict=True,
    )
    request = ModelRequest(
        messages=[Message.user("What's the weather in Paris?")], tools=[strict_weather, ORDER]
    )

    response = await model.respond(request)

    replay.assert_done()
    tools = replay.bodies[0]["tools"]
    assert tools[0]["strict"] is True
    assert "strict" not in tools[1]
    assert "tool_choice" not in replay.bodies[0]
    assert response.finish_reason == "tool_calls"
    assert response.message.parts == [
        ToolCallPart(
            call_id="toolu_01Xy7sQb1nN3kWq2jL5mZp8r",
            name="get_weather",
            arguments='{"city": "Paris"}',
        )
    ]


async def test_parallel_tool_calls_and_the_follow_up_with_results_media_and_errors() -> None:
    replay = replay_of("anthropic_tool_parallel")
    model = model_for(replay, media_reader=read_media)
    ask = Message.user("Compare the weather in Paris and Berlin, with the radar map.")

    response = await model.respond(ModelRequest(messages=[ask], tools=[WEATHER]))

    paris, berlin = response.message.tool_calls
    assert (paris.call_id, paris.arguments) == (
        "toolu_01ParisWeather0000001",
        '{"city": "Paris", "radar": true}',
    )
    assert (berlin.call_id, berlin.arguments) == (
        "toolu_02BerlinWeather000001",
        '{"city": "Berlin", "note": "Café Müller"}',
    )
    assert response.finish_reason == "tool_calls"

    results = Message(
        role="tool",
        parts=[
            ToolResultPart(
                call_id=paris.call_id, name=paris.name, content="18°C, sunny", media=[RADAR_MAP]
            ),
            ToolResultPart(
                call_id=berlin.call_id,
                name=berlin.name,
                content="weather service unavailable for Berlin",
                is_error=True,
            ),
        ],
    )
    final = await model.respond(
        ModelRequest(messages=[ask, response.message, results], tools=[WEATHER])
    )

    replay.assert_done()
    answer = replay.bodies[1]["messages"][2]
    assert answer["role"] == "user"
    assert "is_error" not in answer["content"][0]
    assert (
        final.message.text == "Paris is sunny at 18°C; Berlin's weather is unavailable right now."
    )


# -- media -----------------------------------------------------------------------------------


async def test_images_and_pdfs_from_media_reader_and_media_url() -> None:
    replay = replay_of("anthropic_media")
    message = Message(
        role="user",
        parts=[
            TextPart(text="What is in this photo and this report?"),
            MediaPart(ref=PHOTO),
            MediaPart(ref=REPORT),
        ],
    )
    request = ModelRequest(messages=[message])
    urls = {PHOTO.key: "https://media.example.com/photo.png"}

    async def all_urls(media: MediaRef) -> str | None:
        return f"https://media.example.com/{media.key}"

    async def photo_url_only(media: MediaRef) -> str | None:
        return urls.get(media.key)

    by_reader = await model_for(replay, media_reader=read_media).respond(request)
    by_url = await model_for(replay, media_url=all_urls).respond(request)
    mixed = await model_for(replay, media_url=photo_url_only, media_reader=read_media).respond(
        request
    )

    replay.assert_done()
    assert by_reader.message.text == "A tiny PNG and an empty one-page PDF."
    assert by_url.message.text == "A photo of a harbour and a quarterly report."
    assert mixed.message.text == "A harbour photo and an empty PDF."


async def test_media_problems_are_usage_errors_before_anything_is_sent() -> None:
    replay = WireReplay([])

    async def wrong_bytes(media: MediaRef) -> bytes:
        return b"not the photo"

    def with_media(media: MediaRef, role: str = "user") -> ModelRequest:
        return ModelRequest(messages=[Message(role=role, parts=[MediaPart(ref=media)])])  # type: ignore[arg-type]

    with pytest.raises(sr.UsageError, match="pass media_reader"):
        await model_for(replay).respond(with_media(PHOTO))
    with pytest.raises(sr.UsageError, match="sha256"):
        await model_for(replay, media_reader=wrong_bytes).respond(with_media(PHOTO))
    audio = MediaRef(key="a.mp3", mime="audio/mpeg", size=3)
    with pytest.raises(sr.UsageError, match="audio/mpeg"):
        await model_for(replay, media_reader=read_media).respond(with_media(audio))
    tiff = MediaRef(key="scan.tiff", mime="image/tiff", size=3)
    with pytest.raises(sr.UsageError, match="image/tiff"):
        await model_for(replay, media_reader=read_media).respond(with_media(tiff))
    with pytest.raises(sr.UsageError, match="assistant message cannot hold a media part"):
        await model_for(replay, media_reader=read_media).respond(with_media(PHOTO, "assistant"))
    assert replay.requests == []


# -- settings --------------------------------------------------------------------------------


async def test_tool_choice_variants_max_tokens_and_stop() -> None:
    replay = replay_of("anthropic_settings")
    model = model_for(replay)
    messages = [Message.user("Weather in Oslo?")]
    tools = [WEATHER, ORDER]

    def settings(**kw: Any) -> ModelRequest:
        return ModelRequest(messages=messages, tools=tools, settings=ModelSettings(**kw))

    auto = await model.respond(
        settings(
            tool_choice="auto",
            parallel_tool_calls=False,
            max_tokens=512,
            stop=["\n\nObservation:", "END"],
        )
    )
    none = await model.respond(settings(tool_choice="none", parallel_tool_calls=False))
    required = await model.respond(settings(tool_choice="required"))
    named = await model.respond(settings(tool_choice="lookup_order", parallel_tool_calls=False))
    defaults = model_for(
        replay,
        max_tokens=1024,
        stop=["END"],
        tool_choice="required",
        extra={"metadata": {"user_id": "user-1234"}},
    )
    merged = await defaults.respond(
        settings(tool_choice="auto", extra={"service_tier": "standard_only"})
    )

    replay.assert_done()
    assert auto.finish_reason == required.finish_reason == named.finish_reason == "tool_calls"
    assert none.finish_reason == merged.finish_reason == "stop"
    assert named.message.tool_calls[0].name == "lookup_order"
    assert "disable_parallel_tool_use" not in replay.bodies[1]["tool_choice"]
    assert "stop_sequences" not in replay.bodies[1]


async def test_settings_the_adapter_cannot_map_are_usage_errors() -> None:
    replay = WireReplay([])
    model = model_for(replay)
    assert AnthropicModel.supports_response_format is False
    with pytest.raises(sr.UsageError, match="response_format"):
        await model.respond(
            ModelRequest(
                messages=[Message.user("x")],
                settings=ModelSettings(
                    response_format=ResponseFormat(name="answer", schema={"type": "object"})
                ),
            )
        )
    with pytest.raises(sr.UsageError, match="temperature"):
        await model.respond(
            ModelRequest(messages=[Message.user("x")], settings=ModelSettings(temperature=0.2))
        )
    with pytest.raises(sr.UsageError, match="needs tools"):
        await model.respond(
            ModelRequest(
                messages=[Message.user("x")], settings=ModelSettings(tool_choice="required")
            )
        )
    with pytest.raises(sr.UsageError, match="names no tool"):
        await model.respond(
            ModelRequest(
                messages=[Message.user("x")],
                tools=[WEATHER],
                settings=ModelSettings(tool_choice="send_email"),
            )
        )
    assert replay.requests == []


def test_constructor_checks_its_options() -> None:
    with pytest.raises(sr.UsageError, match="unknown option"):
        AnthropicModel(MODEL, api_key="k", temprature=0.1)
    with pytest.raises(sr.UsageError, match="either client="):
        AnthropicModel(MODEL, api_key="k", client=AnthropicModel(MODEL, api_key="k")._client)
    with pytest.raises(sr.UsageError, match="http_client must be"):
        AnthropicModel(MODEL, api_key="k", http_client=object())
    with pytest.raises(sr.UsageError, match="model name"):
        AnthropicModel("", api_key="k")
    with pytest.raises(sr.UsageError, match="temperature"):
        AnthropicModel(MODEL, api_key="k", temperature=0.0)


async def test_an_sdk_client_can_be_passed_and_its_retries_are_turned_off() -> None:
    import anthropic
    import httpx2

    replay = replay_of("anthropic_text")
    bridge = model_for(replay)._client._client  # an httpx2 client sending through the replay
    client = anthropic.AsyncAnthropic(api_key="sk-ant-own", max_retries=5, http_client=bridge)
    assert isinstance(bridge, httpx2.AsyncClient)
    model = AnthropicModel(MODEL, client=client)

    response = await model.respond(
        ModelRequest(
            instructions="You are a terse assistant.", messages=[Message.user("Say hello.")]
        )
    )

    replay.assert_done()
    assert response.finish_reason == "stop"
    assert model._client.max_retries == 0
    assert replay.requests[0].headers["authorization"] == "Bearer sk-ant-own"


# -- finish reasons, usage -------------------------------------------------------------------


async def test_every_stop_reason_maps_to_a_finish_reason() -> None:
    replay = replay_of("anthropic_finish")
    model = model_for(replay)

    responses = [await model.respond(user("go")) for _ in range(7)]

    replay.assert_done()
    assert [r.finish_reason for r in responses] == [
        "stop",  # end_turn
        "stop",  # stop_sequence
        "length",  # max_tokens
        "tool_calls",  # tool_use
        "content_filter",  # refusal
        "length",  # pause_turn: unfinished, must be sent back to continue
        "length",  # model_context_window_exceeded
    ]
    assert [r.provider_details["stop_reason"] for r in responses if r.provider_details] == [
        "end_turn",
        "stop_sequence",
        "max_tokens",
        "tool_use",
        "refusal",
        "pause_turn",
        "model_context_window_exceeded",
    ]
    assert responses[1].provider_details is not None
    assert responses[1].provider_details["stop_sequence"] == "4"
    refusal = responses[4]
    assert refusal.message.parts == []
    assert refusal.provider_details is not None
    assert refusal.provider_details["stop_details"] == {
        "type": "refusal",
        "category": "cyber",
        "explanation": "The request could enable malware development.",
    }
    paused = responses[5]
    assert paused.message.parts == [TextPart(text="Let me search for that.")]
    assert paused.provider_details is not None
    assert paused.provider_details["unmapped_blocks"] == ["server_tool_use"]


async def test_usage_counts_cached_and_thinking_tokens() -> None:
    replay = replay_of("anthropic_usage")
    response = await model_for(replay).respond(user("Total of the invoice?"))
    replay.assert_done()
    assert response.usage == Usage(
        requests=1,
        input_tokens=50 + 1200 + 3000,
        output_tokens=400,
        cache_read_tokens=3000,
        cache_write_tokens=1200,
        reasoning_tokens=250,
    )
    assert response.usage.total_tokens == 4650
    assert response.provider_details is not None
    assert response.provider_details["request_id"] == "req_011CUsage0000001"
    assert response.provider_details["response_id"] == "msg_01UsageCachedThink1"


async def test_a_large_max_tokens_is_answered_by_streaming() -> None:
    replay = replay_of("anthropic_long_stream")
    model = model_for(replay)
    response = await model.respond(
        ModelRequest(
            messages=[Message.user("Write a novel.")], settings=ModelSettings(max_tokens=64000)
        )
    )
    replay.assert_done()
    assert response.message.text == "Chapter one."
    assert response.usage == Usage(requests=1, input_tokens=30, output_tokens=5)


# -- guards, registry, runtime ---------------------------------------------------------------


async def test_requests_are_blocked_when_model_requests_are_off() -> None:
    replay = WireReplay([])
    model = model_for(replay)
    with model_requests(False), pytest.raises(sr.UsageError, match="blocked"):
        await model.respond(user("hi"))
    assert replay.requests == []


async def test_a_missing_api_key_fails_the_first_request_with_authentication_failed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_FEDERATION_RULE_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credential profile on disk either
    replay = WireReplay([])
    model = AnthropicModel(MODEL, http_client=httpx.AsyncClient(transport=replay.transport))
    with pytest.raises(AuthenticationFailed, match="ANTHROPIC_API_KEY"):
        await model.respond(user("hi"))
    assert replay.requests == []


def test_the_registry_resolves_anthropic_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    agent = sr.Agent(name="a", model="anthropic:claude-sonnet-4-6")
    client = agent.client
    assert isinstance(client, AnthropicModel)
    assert client.model == "claude-sonnet-4-6"
    assert client._client.api_key == "sk-ant-from-env"
    other = resolve_model("anthropic:claude-haiku-4-5", max_tokens=256)
    assert isinstance(other, AnthropicModel)
    assert other._defaults.max_tokens == 256


@sr.tool
def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return f"order {order_id}: shipped"


async def test_an_agent_runs_through_the_adapter() -> None:
    replay = replay_of("anthropic_agent")
    agent = sr.Agent(
        name="orders",
        model=model_for(replay),
        instructions="You help customers track their orders.",
        tools=[lookup_order],
    )

    result = await sr.Runtime(sr.MemoryStore()).run(
        agent, run_id="ticket-1", input="Where is order 4711?"
    )

    replay.assert_done()
    assert result.status == "completed", result.error
    assert result.text == "Order 4711 has shipped."
    assert [c.status for c in result.calls] == ["succeeded"]
    assert result.calls[0].provider_call_id == "toolu_01AgentLookupOrder4711"
    assert result.usage.requests == 2
    assert result.usage.input_tokens == 520 + 610 + 480
    tool_result = replay.bodies[1]["messages"][2]["content"][0]
    assert tool_result["content"] == "order 4711: shipped"
    assert "is_error" not in tool_result
