"""OpenAIChatModel (Chat Completions) against wire fixtures written from the API reference."""

from __future__ import annotations

import json

import openai
import pytest

import steadyrun as sr
from providerkit import (
    ANSWER,
    CHART,
    CITY,
    CITY_INFO,
    OPENAI_BLOBS,
    PNG,
    QUESTION,
    SEARCH,
    SYSTEM,
    WEATHER,
    ask,
    collect,
    media_reader,
    media_request,
    openai_chat,
    order_tool,
    parallel_request,
    tool_media_request,
    weather_question,
)
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    accumulate,
)
from steadyrun.models import model_requests
from steadyrun.models._openai_common import strict_compatible
from steadyrun.models.openai import OpenAIChatModel
from wirekit import WireReplay, load

read_media = media_reader(OPENAI_BLOBS)


# -- text, instructions, request id --------------------------------------------------------


async def test_text_with_instructions() -> None:
    replay = WireReplay(load("openai_chat_text"))
    response = await openai_chat(replay).respond(ask(instructions=SYSTEM))
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
    response = await openai_chat(plain).respond(ask(instructions=SYSTEM))
    deltas = await collect(openai_chat(streamed).stream(ask(instructions=SYSTEM)))
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
    response = await openai_chat(plain).respond(request)
    deltas = await collect(openai_chat(streamed).stream(request))
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
    response = await openai_chat(replay, "o4-mini").respond(ModelRequest(messages=history))
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
    model = openai_chat(replay, temperature=0.9, max_tokens=200, extra={"seed": 7, "top_k": 10})
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


async def test_tool_definitions_and_tool_choice() -> None:
    replay = WireReplay(load("openai_chat_tools"))
    model = openai_chat(replay)
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
        await openai_chat(replay).respond(weather_question(tool_choice="lookup"))
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
    model = openai_chat(replay)
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


async def test_parallel_tool_calls_and_results() -> None:
    replay = WireReplay(load("openai_chat_parallel"))
    model = openai_chat(replay)
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


async def test_image_and_pdf_from_media_reader_and_media_url() -> None:
    exchanges = load("openai_chat_media")
    by_bytes = WireReplay(exchanges[:1])
    await openai_chat(by_bytes, media_reader=read_media).respond(media_request())
    by_bytes.assert_done()

    async def media_url(ref: MediaRef) -> str | None:
        return f"https://media.example.com/{ref.key}"

    by_url = WireReplay(exchanges[1:])
    response = await openai_chat(by_url, media_reader=read_media, media_url=media_url).respond(
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
        await openai_chat(replay).respond(media_request())
    assert replay.requests == []


async def test_media_of_other_types_is_refused() -> None:
    audio = MediaRef(key="a.wav", mime="audio/wav", size=3)
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=audio)])])
    with pytest.raises(sr.UsageError, match="audio/wav"):
        await openai_chat(WireReplay([]), media_reader=read_media).respond(request)


async def test_media_bytes_must_match_sha256() -> None:
    forged = MediaRef(key=CHART.key, mime="image/png", size=len(PNG), sha256="0" * 64)
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=forged)])])
    with pytest.raises(sr.UsageError, match="sha256"):
        await openai_chat(WireReplay([]), media_reader=read_media).respond(request)


async def test_tool_result_media_follow_in_a_user_message() -> None:
    replay = WireReplay(load("openai_chat_tool_media"))
    response = await openai_chat(replay, media_reader=read_media).respond(tool_media_request())
    replay.assert_done()
    assert response.message.text == "Sales rose every quarter."


# -- finish reasons, structured output -----------------------------------------------------


async def test_finish_reasons() -> None:
    replay = WireReplay(load("openai_chat_finish"))
    model = openai_chat(replay)
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
    model = openai_chat(replay)
    strict = await model.respond(ask(response_format=CITY))
    relaxed = await model.respond(ask(response_format=CITY_INFO))
    replay.assert_done()
    assert json.loads(strict.message.text) == {"city": "Paris", "country": "France"}
    assert json.loads(relaxed.message.text) == {"city": "Paris"}
    assert OpenAIChatModel.supports_response_format is True


# -- the adapter in a run, by name, without a key ------------------------------------------


lookup_order = order_tool("Order {order_id}: shipped on Monday")


async def test_agent_run_through_the_runtime() -> None:
    replay = WireReplay(load("openai_chat_agent"))
    agent = sr.Agent(
        name="support",
        instructions="You help customers with their orders.",
        model=openai_chat(replay),
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
        await openai_chat(replay).respond(ask())
    assert replay.requests == []


def test_given_client_loses_its_retries() -> None:
    client = openai.AsyncOpenAI(api_key="sk-test", max_retries=5)
    model = OpenAIChatModel("gpt-4.1", client=client, timeout=12.0)
    assert model.sdk_client().max_retries == 0
    assert model.sdk_client().timeout == 12.0
