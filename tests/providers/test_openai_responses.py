"""OpenAIResponsesModel (Responses API) against wire fixtures written from the API reference."""

from __future__ import annotations

import json

import pytest

import steadyrun as sr
from providerkit import (
    ANSWER,
    CITY,
    CITY_INFO,
    OPENAI_BLOBS,
    QUESTION,
    SYSTEM,
    WEATHER,
    ask,
    collect,
    media_reader,
    media_request,
    openai_responses,
    order_tool,
    parallel_request,
    tool_media_request,
    weather_question,
)
from steadyrun.chat import (
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
from steadyrun.models.openai import OpenAIResponsesModel
from wirekit import WireReplay, load

ENC1 = "gAAAAABoQ2r0cmVhc29uaW5nLWJsb2ItMQ==-Zx8b1y2c3d4e5f6g7h8i9j0"
ENC2 = "gAAAAABoQ2r0dG9vbC1yZWFzb25pbmc=-Qm9vbGVhbkVuY3J5cHRlZA"

read_media = media_reader(OPENAI_BLOBS)


# -- text, instructions, request id --------------------------------------------------------


async def test_text_with_instructions() -> None:
    replay = WireReplay(load("openai_responses_text"))
    response = await openai_responses(replay).respond(ask(instructions=SYSTEM))
    replay.assert_done()
    assert replay.bodies[0] == {
        "model": "gpt-4.1",
        "input": [{"role": "user", "content": QUESTION}],
        "store": False,
        "instructions": SYSTEM,
    }  # no "include": gpt-4.1 is not a reasoning model
    assert replay.requests[0].url.path == "/v1/responses"
    assert response.message == Message(role="assistant", parts=[TextPart(text=ANSWER)])
    assert response.finish_reason == "stop"
    assert response.usage == Usage(requests=1, input_tokens=36, output_tokens=8)
    assert response.model_name == "gpt-4.1-2025-04-14"
    assert response.provider_details == {
        "request_id": "req_r_text",
        "response_id": "resp_67ccd2bed1ec8190b14f964abc054267",
    }


async def test_stream_parity_text() -> None:
    plain = WireReplay(load("openai_responses_text"))
    streamed = WireReplay(load("openai_responses_text_stream"))
    response = await openai_responses(plain).respond(ask(instructions=SYSTEM))
    deltas = await collect(openai_responses(streamed).stream(ask(instructions=SYSTEM)))
    plain.assert_done()
    streamed.assert_done()
    assert len([d for d in deltas if d.part == "text"]) == 3
    assert accumulate(deltas) == response


# -- reasoning -----------------------------------------------------------------------------

REASONING = {"effort": "medium", "summary": "auto"}


async def test_reasoning_is_kept_with_its_encrypted_content() -> None:
    replay = WireReplay(load("openai_responses_reasoning"))
    model = openai_responses(replay, "o4-mini", extra={"reasoning": REASONING})
    response = await model.respond(ask("How many r's are in strawberry?"))
    replay.assert_done()
    assert replay.bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert replay.bodies[0]["store"] is False
    thinking, text = response.message.parts
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text == (
        "**Counting letters**\n\nI spell it out: s-t-r-a-w-b-e-r-r-y.\n\n"
        "**Answer**\n\nThere is one r after t and two before y."
    )
    assert thinking.signature == ENC1
    assert thinking.provider_details is not None
    assert thinking.provider_details["id"] == "rs_68a1b2c3d4e5f6a7"
    assert len(thinking.provider_details["summary"]) == 2
    assert text == TextPart(text='There are three r\'s in "strawberry".')
    assert response.usage == Usage(
        requests=1, input_tokens=40, output_tokens=320, reasoning_tokens=256
    )


async def test_stream_parity_reasoning_and_text() -> None:
    plain = WireReplay(load("openai_responses_reasoning"))
    streamed = WireReplay(load("openai_responses_reasoning_stream"))
    request = ask("How many r's are in strawberry?")
    response = await openai_responses(plain, "o4-mini", extra={"reasoning": REASONING}).respond(
        request
    )
    deltas = await collect(
        openai_responses(streamed, "o4-mini", extra={"reasoning": REASONING}).stream(request)
    )
    plain.assert_done()
    streamed.assert_done()
    assert len([d for d in deltas if d.part == "thinking"]) > 2
    assert accumulate(deltas) == response


async def test_reasoning_and_tool_call_are_sent_back() -> None:
    replay = WireReplay(load("openai_responses_reasoning_tools"))
    model = openai_responses(replay, "o4-mini")
    question = Message.user("What's the weather in Paris?")
    first = await model.respond(ModelRequest(messages=[question], tools=[WEATHER]))
    assert first.finish_reason == "tool_calls"
    thinking, call = first.message.parts
    assert isinstance(thinking, ThinkingPart) and thinking.signature == ENC2
    assert call == ToolCallPart(
        call_id="call_rt1",
        name="get_weather",
        arguments='{"city":"Paris","unit":"c"}',
        provider_details={"id": "fc_rt1"},
    )
    results = Message(
        role="tool",
        parts=[ToolResultPart(call_id="call_rt1", name="get_weather", content="18°C, light rain")],
    )
    second = await model.respond(
        ModelRequest(messages=[question, first.message, results], tools=[WEATHER])
    )
    replay.assert_done()
    assert second.message.text == "It's 18°C with light rain in Paris."
    assert second.usage == Usage(
        requests=1, input_tokens=1380, output_tokens=40, cache_read_tokens=1152, reasoning_tokens=16
    )


async def test_thinking_of_other_providers_is_not_sent() -> None:
    history = [
        Message.user("Earlier question"),
        Message(
            role="assistant",
            parts=[
                ThinkingPart(text="hmm", signature="anthropic-sig"),
                TextPart(text="Earlier answer"),
            ],
        ),
        Message.user(QUESTION),
    ]
    exchange = load("openai_responses_text")
    exchange[0]["request"]["json"]["input"] = [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": QUESTION},
    ]
    replay = WireReplay(exchange)
    await openai_responses(replay).respond(ModelRequest(instructions=SYSTEM, messages=history))
    replay.assert_done()


# -- tools ---------------------------------------------------------------------------------


async def test_tool_definitions_and_tool_choice() -> None:
    replay = WireReplay(load("openai_responses_tools"))
    model = openai_responses(replay)
    auto = await model.respond(weather_question(tool_choice="auto", parallel_tool_calls=False))
    none = await model.respond(weather_question(tool_choice="none"))
    required = await model.respond(weather_question(tool_choice="required"))
    named = await model.respond(weather_question(tool_choice="get_weather"))
    replay.assert_done()
    assert [t["strict"] for t in replay.bodies[0]["tools"]] == [True, False, False]
    assert "description" not in replay.bodies[0]["tools"][2]
    assert auto.finish_reason == none.finish_reason == "stop"
    assert required.finish_reason == named.finish_reason == "tool_calls"
    assert named.message.tool_calls[0].arguments == '{"city":"Paris","unit":null}'


async def test_parallel_tool_calls_and_results() -> None:
    replay = WireReplay(load("openai_responses_parallel"))
    model = openai_responses(replay)
    first = await model.respond(parallel_request())
    assert first.finish_reason == "tool_calls"
    assert [c.call_id for c in first.message.tool_calls] == ["call_p1Kd", "call_p2Lm"]
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
    assert second.message.text.startswith("Paris: 18°C")


async def test_stream_parity_parallel_tool_calls() -> None:
    plain = WireReplay(load("openai_responses_parallel")[:1])
    streamed = WireReplay(load("openai_responses_parallel_stream"))
    response = await openai_responses(plain).respond(parallel_request())
    deltas = await collect(openai_responses(streamed).stream(parallel_request()))
    plain.assert_done()
    streamed.assert_done()
    assert accumulate(deltas) == response
    assert response.message.tool_calls[1].provider_details == {"id": "fc_p2"}


async def test_single_call_answer_by_name() -> None:
    replay = WireReplay(load("openai_responses_tools")[2:3])
    response = await openai_responses(replay).respond(weather_question(tool_choice="required"))
    assert response.message.tool_calls == [
        ToolCallPart(
            call_id="call_r3Qx",
            name="get_weather",
            arguments='{"city":"Paris","unit":"c"}',
            provider_details={"id": "fc_t3"},
        )
    ]


# -- media ---------------------------------------------------------------------------------


async def test_image_and_pdf_from_media_reader_and_media_url() -> None:
    exchanges = load("openai_responses_media")
    by_bytes = WireReplay(exchanges[:1])
    await openai_responses(by_bytes, media_reader=read_media).respond(media_request())
    by_bytes.assert_done()

    async def media_url(ref: MediaRef) -> str | None:
        return f"https://media.example.com/{ref.key}"

    by_url = WireReplay(exchanges[1:])
    await openai_responses(by_url, media_url=media_url).respond(media_request())
    by_url.assert_done()  # both by URL: no reader needed


async def test_media_needs_a_reader() -> None:
    with pytest.raises(sr.UsageError, match="media_reader"):
        await openai_responses(WireReplay([])).respond(media_request())


async def test_tool_result_media_go_in_the_function_call_output() -> None:
    replay = WireReplay(load("openai_responses_tool_media"))
    response = await openai_responses(replay, media_reader=read_media).respond(tool_media_request())
    replay.assert_done()
    assert response.message.text == "Sales rose every quarter."


# -- settings, finish reasons, structured output -------------------------------------------


async def test_settings_defaults_and_extra() -> None:
    replay = WireReplay(load("openai_responses_settings"))
    model = openai_responses(replay, max_tokens=200, extra={"truncation": "auto"})
    await model.respond(ask("Count to ten.", temperature=0.3, extra={"metadata": {"run": "r1"}}))
    replay.assert_done()
    assert "max_tokens" not in replay.bodies[0]


async def test_stop_sequences_do_not_exist_here() -> None:
    replay = WireReplay([])
    with pytest.raises(sr.UsageError, match="stop"):
        await openai_responses(replay).respond(ask(stop=["END"]))
    assert replay.requests == []


async def test_finish_reasons() -> None:
    replay = WireReplay(load("openai_responses_finish"))
    model = openai_responses(replay)
    cut = await model.respond(ask(max_tokens=16))
    filtered = await model.respond(ask())
    refused = await model.respond(ask())
    replay.assert_done()
    assert (cut.finish_reason, cut.message.text) == ("length", "The capital of France")
    assert cut.provider_details is not None
    assert cut.provider_details["incomplete_reason"] == "max_output_tokens"
    assert (filtered.finish_reason, filtered.message.parts) == ("content_filter", [])
    assert refused.finish_reason == "content_filter"
    assert refused.message.text == "I'm sorry, I can't help with that."


async def test_response_format_as_text_format() -> None:
    replay = WireReplay(load("openai_responses_response_format"))
    model = openai_responses(replay)
    strict = await model.respond(ask(response_format=CITY))
    relaxed = await model.respond(ask(response_format=CITY_INFO))
    replay.assert_done()
    assert json.loads(strict.message.text)["country"] == "France"
    assert json.loads(relaxed.message.text) == {"city": "Paris"}


# -- a run, the registry ---------------------------------------------------------------------------


lookup_order = order_tool("Order {order_id}: shipped on Monday")


async def test_agent_run_through_the_runtime() -> None:
    replay = WireReplay(load("openai_responses_agent"))
    agent = sr.Agent(
        name="support",
        instructions="You help customers with their orders.",
        model=openai_responses(replay),
        tools=[lookup_order],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="t-1", input="Where is order 42?")
    replay.assert_done()
    assert result.status == "completed"
    assert result.text == "Order 42 shipped on Monday."
    assert [(c.provider_call_id, c.status) for c in result.calls] == [("call_a1", "succeeded")]


def test_registry_resolves_openai_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    agent = sr.Agent(name="a", model="openai-responses:o4-mini")
    assert isinstance(agent.client, OpenAIResponsesModel)
    assert agent.client.model == "o4-mini"
    assert agent.client.sdk_client().api_key == "sk-from-env"


@pytest.mark.parametrize(
    ("name", "encrypted"),
    [
        ("o4-mini", True),
        ("o3", True),
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("gpt-5-chat-latest", False),
        ("gpt-4.1", False),
        ("gpt-4o-mini", False),
    ],
)
def test_which_models_get_encrypted_reasoning(name: str, encrypted: bool) -> None:
    from steadyrun.models._openai_responses import encrypted_reasoning_model

    assert encrypted_reasoning_model(name) is encrypted
