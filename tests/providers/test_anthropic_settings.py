"""The Anthropic adapter: settings, stop reasons and usage, replayed from wire fixtures.

Each test replays ``tests/providers/wire/anthropic_*.json`` (written from the Messages API
reference) through the SDK's own HTTP client; requests are checked by the recorded subset and
by ``replay.bodies``.
"""

from __future__ import annotations

from typing import Any

import pytest

import steadyrun as sr
from providerkit import ANTHROPIC_WEATHER, CLAUDE, ORDER, anthropic_model, ask, replay_of
from steadyrun.chat import Message, ModelRequest, ModelSettings, ResponseFormat, TextPart, Usage
from steadyrun.models.anthropic import AnthropicModel
from wirekit import WireReplay

# -- settings --------------------------------------------------------------------------------


async def test_tool_choice_variants_max_tokens_and_stop() -> None:
    replay = replay_of("anthropic_settings")
    model = anthropic_model(replay)
    messages = [Message.user("Weather in Oslo?")]
    tools = [ANTHROPIC_WEATHER, ORDER]

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
    defaults = anthropic_model(
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
    model = anthropic_model(replay)
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
                tools=[ANTHROPIC_WEATHER],
                settings=ModelSettings(tool_choice="send_email"),
            )
        )
    assert replay.requests == []


def test_constructor_checks_its_options() -> None:
    with pytest.raises(sr.UsageError, match="unknown option"):
        AnthropicModel(CLAUDE, api_key="k", temprature=0.1)
    with pytest.raises(sr.UsageError, match="either client="):
        AnthropicModel(CLAUDE, api_key="k", client=AnthropicModel(CLAUDE, api_key="k")._client)
    with pytest.raises(sr.UsageError, match="http_client must be"):
        AnthropicModel(CLAUDE, api_key="k", http_client=object())
    with pytest.raises(sr.UsageError, match="model name"):
        AnthropicModel("", api_key="k")
    with pytest.raises(sr.UsageError, match="temperature"):
        AnthropicModel(CLAUDE, api_key="k", temperature=0.0)


async def test_an_sdk_client_can_be_passed_and_its_retries_are_turned_off() -> None:
    import anthropic
    import httpx2

    replay = replay_of("anthropic_text")
    bridge = anthropic_model(replay)._client._client  # an httpx2 client sending through the replay
    client = anthropic.AsyncAnthropic(api_key="sk-ant-own", max_retries=5, http_client=bridge)
    assert isinstance(bridge, httpx2.AsyncClient)
    model = AnthropicModel(CLAUDE, client=client)

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
    model = anthropic_model(replay)

    responses = [await model.respond(ask("go")) for _ in range(7)]

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
    response = await anthropic_model(replay).respond(ask("Total of the invoice?"))
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
    model = anthropic_model(replay)
    response = await model.respond(
        ModelRequest(
            messages=[Message.user("Write a novel.")], settings=ModelSettings(max_tokens=64000)
        )
    )
    replay.assert_done()
    assert response.message.text == "Chapter one."
    assert response.usage == Usage(requests=1, input_tokens=30, output_tokens=5)
