"""The Anthropic adapter: request and response mapping, replayed from wire fixtures.

Each test replays ``tests/providers/wire/anthropic_*.json`` (written from the Messages API
reference) through the SDK's own HTTP client; requests are checked by the recorded subset and
by ``replay.bodies``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import steadyrun as sr
from providerkit import (
    ANTHROPIC_WEATHER,
    CLAUDE,
    ORDER,
    anthropic_model,
    ask,
    media_reader,
    media_ref,
    order_tool,
    replay_of,
)
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
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

ANSWERING_MODEL = "claude-sonnet-4-6"

PNG = b"\x89PNG\r\n\x1a\n"
PDF = b"%PDF-1.4\n%%EOF\n"
RADAR = b"\x89PNG\r\n\x1a\nradar"
PHOTO = media_ref("photo.png", "image/png", PNG)
REPORT = media_ref("report.pdf", "application/pdf", PDF)
RADAR_MAP = media_ref("radar/paris.png", "image/png", RADAR)
STORE = {PHOTO.key: PNG, REPORT.key: PDF, RADAR_MAP.key: RADAR}
read_media = media_reader(STORE)


# -- text, system --------------------------------------------------------------------------


async def test_text_with_system_instructions() -> None:
    replay = replay_of("anthropic_text")
    model = anthropic_model(replay)
    request = ModelRequest(
        instructions="You are a terse assistant.", messages=[Message.user("Say hello.")]
    )

    response = await model.respond(request)

    replay.assert_done()
    assert replay.bodies[0] == {
        "model": CLAUDE,
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
    model = anthropic_model(replay)
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
    model = anthropic_model(WireReplay([]), media_reader=read_media)
    request = ModelRequest(messages=[Message(role="system", parts=[MediaPart(ref=PHOTO)])])
    with pytest.raises(sr.UsageError, match="system message may hold only text"):
        await model.respond(request)


# -- thinking --------------------------------------------------------------------------------


async def test_thinking_is_kept_and_sent_back_unchanged_before_the_tool_calls() -> None:
    replay = replay_of("anthropic_thinking")
    model = anthropic_model(replay, extra={"thinking": {"type": "enabled", "budget_tokens": 10000}})
    first = ModelRequest(
        instructions="You answer weather questions with the get_weather tool.",
        messages=[Message.user("What's the weather in Paris?")],
        tools=[ANTHROPIC_WEATHER],
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
        tools=[ANTHROPIC_WEATHER],
    )
    final = await model.respond(follow_up)

    replay.assert_done()
    sent_back = replay.bodies[1]["messages"][1]
    assert sent_back == {"role": "assistant", "content": wire}  # byte for byte what came
    assert final.message.text == "It is 15°C with light rain in Paris."
    assert final.usage.cache_read_tokens == 3072


async def test_unsigned_thinking_and_empty_text_are_not_sent_and_bad_arguments_are_kept() -> None:
    replay = replay_of("anthropic_history")
    model = anthropic_model(replay)
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
    model = anthropic_model(replay)
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
    model = anthropic_model(replay, media_reader=read_media)
    ask = Message.user("Compare the weather in Paris and Berlin, with the radar map.")

    response = await model.respond(ModelRequest(messages=[ask], tools=[ANTHROPIC_WEATHER]))

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
        ModelRequest(messages=[ask, response.message, results], tools=[ANTHROPIC_WEATHER])
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

    by_reader = await anthropic_model(replay, media_reader=read_media).respond(request)
    by_url = await anthropic_model(replay, media_url=all_urls).respond(request)
    mixed = await anthropic_model(
        replay, media_url=photo_url_only, media_reader=read_media
    ).respond(request)

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
        await anthropic_model(replay).respond(with_media(PHOTO))
    with pytest.raises(sr.UsageError, match="sha256"):
        await anthropic_model(replay, media_reader=wrong_bytes).respond(with_media(PHOTO))
    audio = MediaRef(key="a.mp3", mime="audio/mpeg", size=3)
    with pytest.raises(sr.UsageError, match="audio/mpeg"):
        await anthropic_model(replay, media_reader=read_media).respond(with_media(audio))
    tiff = MediaRef(key="scan.tiff", mime="image/tiff", size=3)
    with pytest.raises(sr.UsageError, match="image/tiff"):
        await anthropic_model(replay, media_reader=read_media).respond(with_media(tiff))
    with pytest.raises(sr.UsageError, match="assistant message cannot hold a media part"):
        await anthropic_model(replay, media_reader=read_media).respond(
            with_media(PHOTO, "assistant")
        )
    assert replay.requests == []


# -- guards, registry, runtime ---------------------------------------------------------------


async def test_requests_are_blocked_when_model_requests_are_off() -> None:
    replay = WireReplay([])
    model = anthropic_model(replay)
    with model_requests(False), pytest.raises(sr.UsageError, match="blocked"):
        await model.respond(ask("hi"))
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
    model = AnthropicModel(CLAUDE, http_client=httpx.AsyncClient(transport=replay.transport))
    with pytest.raises(AuthenticationFailed, match="ANTHROPIC_API_KEY"):
        await model.respond(ask("hi"))
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


lookup_order = order_tool("order {order_id}: shipped")


async def test_an_agent_runs_through_the_adapter() -> None:
    replay = replay_of("anthropic_agent")
    agent = sr.Agent(
        name="orders",
        model=anthropic_model(replay),
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
