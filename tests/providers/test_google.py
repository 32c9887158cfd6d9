"""GoogleModel: request and response mapping, replayed from wire fixtures; streaming parity."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from providerkit import GEMINI, google_model, media_reader, media_ref, replay_of
from steadyrun import UsageError
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ResponseFormat,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    accumulate_async,
)
from steadyrun.models.google import GoogleModel
from wirekit import WireReplay

SIG_TEXT = "CvvvEjT//n0h"
SIG_CALL = "Er/8VQH6Pg=="


def wired(name: str, *, model: str = GEMINI, **options: Any) -> tuple[GoogleModel, WireReplay]:
    replay = replay_of(f"google_{name}")
    return google_model(replay, model, **options), replay


def loose(name: str, **options: Any) -> tuple[GoogleModel, WireReplay]:
    """Like ``wired`` but any request body is accepted (the test inspects ``replay.bodies``)."""
    llm, replay = wired(name, **options)
    replay.exchanges = [
        {"request": {"path": x["request"]["path"]}, "response": x["response"]}
        for x in replay.exchanges
    ]
    return llm, replay


def gen_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = body.get("generationConfig", {})
    return config


TQ = "Which is larger, 9.11 or 9.9?"


# -- text, system instructions, usage, ids --------------------------------------------------------

TEXT_REQUEST = ModelRequest(
    instructions="Answer in one sentence.",
    messages=[Message.user("What is the capital of France?")],
)


async def test_text_and_system_instructions() -> None:
    llm, replay = wired("text")
    response = await llm.respond(TEXT_REQUEST)
    replay.assert_done()
    assert response.message == Message(
        role="assistant", parts=[TextPart(text="The capital of France is Paris.")]
    )
    assert response.finish_reason == "stop"
    assert response.usage == Usage(requests=1, input_tokens=14, output_tokens=8)
    assert response.model_name == GEMINI
    assert response.provider_details == {
        "response_id": "Yk1xaKeDFdGm1MkP8cHk2Q0",
        "request_id": "Yk1xaKeDFdGm1MkP8cHk2Q0",
        "finish_reason": "STOP",
    }
    body = replay.bodies[0]
    assert body["systemInstruction"] == {"parts": [{"text": "Answer in one sentence."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "What is the capital of France?"}]}
    ]
    assert "tools" not in body and "toolConfig" not in body
    assert gen_config(body) == {}
    assert replay.requests[0].headers["x-goog-api-key"] == "test-key"
    assert replay.requests[0].url.path == f"/v1beta/models/{GEMINI}:generateContent"


async def test_system_messages_join_the_system_instruction() -> None:
    llm, replay = wired("text")
    request = ModelRequest(
        messages=[
            Message(role="system", parts=[TextPart(text="Answer in one sentence.")]),
            Message.user("What is the capital of France?"),
        ]
    )
    await llm.respond(request)
    replay.assert_done()
    assert replay.bodies[0]["systemInstruction"] == {"parts": [{"text": "Answer in one sentence."}]}


async def test_usage_counts_cached_and_reasoning_tokens() -> None:
    llm, replay = wired("thinking", include_thoughts=True)
    response = await llm.respond(ModelRequest(messages=[Message.user(TQ)]))
    replay.assert_done()
    assert response.usage == Usage(
        requests=1,
        input_tokens=2110,
        output_tokens=9 + 164,
        cache_read_tokens=2048,
        reasoning_tokens=164,
    )


# -- thinking -------------------------------------------------------------------------------------

THOUGHT = (
    "**Comparing decimals**\n\nI line up the decimal places: 9.90 against 9.11. "
    "Nine tenths beat one tenth."
)


async def test_thinking_is_kept_with_its_signature() -> None:
    llm, replay = wired("thinking", include_thoughts=True)
    response = await llm.respond(ModelRequest(messages=[Message.user(TQ)]))
    replay.assert_done()
    assert response.message.parts == [
        ThinkingPart(text=THOUGHT, provider_details={"provider": "google", "carrier": "thought"}),
        TextPart(text="9.9 is larger than 9.11."),
        ThinkingPart(
            text="",
            signature=SIG_TEXT,
            provider_details={"provider": "google", "carrier": "text"},
        ),
    ]
    assert gen_config(replay.bodies[0])["thinkingConfig"] == {"include_thoughts": True}


async def test_thinking_and_signatures_are_sent_back() -> None:
    llm, replay = wired("thinking_roundtrip", include_thoughts=True)
    history = [Message.user(TQ)]
    first = await llm.respond(ModelRequest(messages=history))
    history += [first.message, Message.user("And 9.99?")]
    second = await llm.respond(ModelRequest(messages=history))
    replay.assert_done()
    model_turn = replay.bodies[1]["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"text": THOUGHT, "thought": True},
            # the signature goes back on the text part it came with (URL-safe base64, same bytes)
            {"text": "9.9 is larger than 9.11.", "thoughtSignature": "CvvvEjT__n0h"},
        ],
    }
    assert second.message.text == "9.99 is larger still."


async def test_thinking_of_other_providers_is_not_sent() -> None:
    llm, replay = loose("text")
    foreign = Message(
        role="assistant",
        parts=[ThinkingPart(text="hmm", signature="anthropic-sig"), TextPart(text="Earlier.")],
    )
    request = ModelRequest(
        instructions="Answer in one sentence.",
        messages=[foreign, Message.user("What is the capital of France?")],
    )
    await llm.respond(request)
    assert replay.bodies[0]["contents"][0] == {"role": "model", "parts": [{"text": "Earlier."}]}


# -- tool calls and results -----------------------------------------------------------------------

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather in a city.",
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
WQ = "Weather in Paris and London, in celsius?"


async def test_parallel_tool_calls_and_their_results() -> None:
    llm, replay = wired("tool_calls")
    history = [Message.user(WQ)]
    first = await llm.respond(ModelRequest(messages=history, tools=[WEATHER]))
    assert first.finish_reason == "tool_calls"
    assert first.message.parts == [
        ToolCallPart(
            call_id="call_0",
            name="get_weather",
            arguments='{"city":"Paris","unit":"celsius"}',
            provider_details={
                "provider": "google",
                "generated_id": True,
                "thought_signature": SIG_CALL,
            },
        ),
        ToolCallPart(
            call_id="call_1",
            name="get_weather",
            arguments='{"unit":"celsius","city":"London"}',  # key order as the model wrote it
            provider_details={"provider": "google", "generated_id": True},
        ),
    ]
    assert first.usage.reasoning_tokens == 75
    results = Message(
        role="tool",
        parts=[
            ToolResultPart(call_id="call_0", name="get_weather", content="18°C, sunny"),
            ToolResultPart(call_id="call_1", name="get_weather", content="12°C, rain"),
        ],
    )
    history += [first.message, results]
    second = await llm.respond(ModelRequest(messages=history, tools=[WEATHER]))
    replay.assert_done()
    assert second.message.text == "Paris: 18°C and sunny. London: 12°C with rain."
    assert second.finish_reason == "stop"
    sent = replay.bodies[1]["contents"]
    # ids Gemini did not give are never sent back
    assert all("id" not in p["functionCall"] for p in sent[1]["parts"])
    assert all("id" not in p["functionResponse"] for p in sent[2]["parts"])
    assert replay.bodies[0]["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Get the current weather in a city.",
                    "parameters_json_schema": WEATHER.parameters,
                }
            ]
        }
    ]


async def test_a_call_id_from_gemini_goes_back_and_errors_are_marked() -> None:
    llm, replay = wired("tool_call_id", model="gemini-3-pro-preview")
    history = [Message.user("Weather in Atlantis?")]
    first = await llm.respond(ModelRequest(messages=history))
    call = first.message.tool_calls[0]
    assert (call.call_id, call.arguments) == ("fc-7s2k", '{"city":"Atlantis"}')
    assert call.provider_details == {"provider": "google", "thought_signature": SIG_CALL}
    assert first.model_name == "gemini-3-pro-preview"
    result = ToolResultPart(
        call_id="fc-7s2k", name="get_weather", content="unknown city: Atlantis", is_error=True
    )
    history += [first.message, Message(role="tool", parts=[result])]
    second = await llm.respond(ModelRequest(messages=history))
    replay.assert_done()
    assert second.message.text == "I could not find Atlantis."
    assert replay.bodies[1]["contents"][2]["parts"][0]["functionResponse"] == {
        "id": "fc-7s2k",
        "name": "get_weather",
        "response": {"error": "unknown city: Atlantis"},
    }


# -- media ----------------------------------------------------------------------------------------

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01"
    b"\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
STORE = {"img/1": PNG, "doc/1": PDF}


read_media = media_reader(STORE)


def ref(key: str, mime: str) -> MediaRef:
    return media_ref(key, mime, STORE[key])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


async def test_image_and_pdf_from_the_media_reader() -> None:
    llm, replay = wired("media", media_reader=read_media)
    message = Message(
        role="user",
        parts=[
            TextPart(text="Describe the image and summarise the PDF."),
            MediaPart(ref=ref("img/1", "image/png")),
            MediaPart(ref=ref("doc/1", "application/pdf")),
        ],
    )
    response = await llm.respond(ModelRequest(messages=[message]))
    assert response.message.text == "A single transparent pixel; the PDF is empty."
    assert replay.bodies[0]["contents"][0]["parts"][1:] == [
        {"inlineData": {"data": b64(PNG), "mime_type": "image/png"}},
        {"inlineData": {"data": b64(PDF), "mime_type": "application/pdf"}},
    ]
    # media of a tool result follows the function responses of that turn
    call = ToolCallPart(
        call_id="call_0",
        name="screenshot",
        provider_details={"provider": "google", "generated_id": True},
    )
    result = ToolResultPart(
        call_id="call_0",
        name="screenshot",
        content="screenshot attached",
        media=[ref("img/1", "image/png")],
    )
    history = [
        Message.user("Take a screenshot."),
        Message(role="assistant", parts=[call]),
        Message(role="tool", parts=[result]),
    ]
    await llm.respond(ModelRequest(messages=history))
    replay.assert_done()


async def test_media_url_is_tried_first() -> None:
    uri = "https://generativelanguage.googleapis.com/v1beta/files/3n7k2x9q1w"

    async def url_of(media: MediaRef) -> str | None:
        return uri

    async def never(media: MediaRef) -> bytes:
        raise AssertionError("the reader is not needed when there is a URL")

    llm, replay = wired("media_url", media_url=url_of, media_reader=never)
    message = Message(
        role="user",
        parts=[
            TextPart(text="What does this document say?"),
            MediaPart(ref=ref("doc/1", "application/pdf")),
        ],
    )
    response = await llm.respond(ModelRequest(messages=[message]))
    replay.assert_done()
    assert response.message.text == "It is an empty PDF."
    assert replay.bodies[0]["contents"][0]["parts"][1] == {
        "fileData": {"file_uri": uri, "mime_type": "application/pdf"}
    }


@pytest.mark.parametrize(
    ("options", "mime", "problem"),
    [
        ({}, "image/png", "media_reader"),
        ({"media_reader": read_media}, "audio/wav", "image/*"),
    ],
)
async def test_media_that_cannot_be_sent(options: dict[str, Any], mime: str, problem: str) -> None:
    llm = GoogleModel(GEMINI, api_key="k", **options)
    media = MediaRef(key="img/1", mime=mime, size=len(PNG))
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=media)])])
    with pytest.raises(UsageError, match=problem):
        await llm.respond(request)


async def test_media_whose_bytes_do_not_match_the_digest() -> None:
    llm = GoogleModel(GEMINI, api_key="k", media_reader=read_media)
    media = MediaRef(key="img/1", mime="image/png", size=len(PNG), sha256="00" * 32)
    request = ModelRequest(messages=[Message(role="user", parts=[MediaPart(ref=media)])])
    with pytest.raises(UsageError, match="sha256"):
        await llm.respond(request)


# -- tool definitions, strict, tool_choice --------------------------------------------------------


def order_tools(*, strict: bool) -> list[ToolDefinition]:
    lookup = ToolDefinition(
        name="lookup_order",
        description="Find an order by id.",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        strict=True,
    )
    refund = ToolDefinition(
        name="refund",
        description="Refund part of an order.",
        parameters={
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount_cents": {"type": "integer", "minimum": 1},
            },
            "required": ["order_id", "amount_cents"],
            "additionalProperties": False,
        },
        strict=strict,
    )
    return [lookup, refund]


OQ = Message.user("Refund 5 euros on order A-17.")


async def test_strict_tools_ask_for_validated_calls() -> None:
    llm, replay = wired("tools_strict")
    first = await llm.respond(ModelRequest(messages=[OQ], tools=order_tools(strict=True)))
    second = await llm.respond(ModelRequest(messages=[OQ], tools=order_tools(strict=False)))
    replay.assert_done()
    assert first.message.tool_calls[0].arguments == '{"order_id":"A-17","amount_cents":500}'
    assert second.finish_reason == "tool_calls"
    assert "toolConfig" not in replay.bodies[1]  # not every tool is strict: the model decides
    declarations = replay.bodies[0]["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["lookup_order", "refund"]
    assert declarations[1]["parameters_json_schema"]["properties"]["amount_cents"] == {
        "type": "integer",
        "minimum": 1,
    }


async def test_tool_choice_variants() -> None:
    llm, replay = wired("tool_choice")
    tools = order_tools(strict=False)
    answers = []
    for choice in ("auto", "none", "required", "lookup_order"):
        settings = ModelSettings(tool_choice=choice)
        answers.append(
            await llm.respond(ModelRequest(messages=[OQ], tools=tools, settings=settings))
        )
    replay.assert_done()
    assert [r.finish_reason for r in answers] == ["tool_calls", "stop", "tool_calls", "tool_calls"]
    assert [b["toolConfig"]["functionCallingConfig"] for b in replay.bodies] == [
        {"mode": "AUTO"},
        {"mode": "NONE"},
        {"mode": "ANY"},
        {"mode": "ANY", "allowedFunctionNames": ["lookup_order"]},
    ]


async def test_tool_choice_must_name_a_tool() -> None:
    llm = GoogleModel(GEMINI, api_key="k")
    request = ModelRequest(
        messages=[OQ], tools=order_tools(strict=False), settings=ModelSettings(tool_choice="nope")
    )
    with pytest.raises(UsageError, match="nope"):
        await llm.respond(request)


# -- generation settings --------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


async def test_settings_response_format_and_extra() -> None:
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    llm, replay = wired("settings", temperature=0.2, max_tokens=1024)
    settings = ModelSettings(
        max_tokens=256,  # the request's settings win over the model's defaults
        stop=["\n\n"],
        response_format=ResponseFormat(name="capital", schema=SCHEMA),
        extra={"topK": 20, "safety_settings": safety},
    )
    response = await llm.respond(
        ModelRequest(messages=[Message.user("Name a capital.")], settings=settings)
    )
    replay.assert_done()
    assert response.message.text == '{"city": "Paris", "country": "France"}'
    assert gen_config(replay.bodies[0]) == {
        "temperature": 0.2,
        "topK": 20.0,
        "maxOutputTokens": 256,
        "stopSequences": ["\n\n"],
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    }
    assert GoogleModel.supports_response_format is True


async def test_unknown_extra_options_are_a_usage_error() -> None:
    llm = GoogleModel(GEMINI, api_key="k")
    settings = ModelSettings(extra={"no_such_option": 1})
    with pytest.raises(UsageError, match="GenerateContentConfig"):
        await llm.respond(ModelRequest(messages=[Message.user("hi")], settings=settings))


# -- finish reasons -------------------------------------------------------------------------------


async def test_every_finish_reason() -> None:
    llm, replay = wired("finish")
    request = ModelRequest(messages=[Message.user("Go on.")])
    got = [await llm.respond(request) for _ in range(9)]
    replay.assert_done()
    assert [r.finish_reason for r in got] == [
        "length",  # MAX_TOKENS
        "content_filter",  # SAFETY
        "content_filter",  # RECITATION
        "content_filter",  # PROHIBITED_CONTENT
        "error",  # MALFORMED_FUNCTION_CALL
        "error",  # OTHER
        "length",  # MAX_TOKENS inside a tool call
        "content_filter",  # SPII
        "content_filter",  # promptFeedback.blockReason
    ]
    assert got[0].message.text == "Once upon a time there was a"
    assert got[6].message.tool_calls[0].name == "write_story"
    assert got[1].provider_details == {
        "response_id": "fr-2",
        "request_id": "fr-2",
        "finish_reason": "SAFETY",
    }
    assert got[8].message.parts == []
    assert got[8].provider_details == {
        "response_id": "fr-9",
        "request_id": "fr-9",
        "block_reason": "PROHIBITED_CONTENT",
    }


# -- streaming parity -----------------------------------------------------------------------------


async def parity(name: str, request: ModelRequest, **options: Any) -> ModelResponse:
    llm, replay = wired(name, **options)
    streamed_llm, streamed_replay = wired(f"{name}_stream", **options)
    response = await llm.respond(request)
    deltas = [d async for d in streamed_llm.stream(request)]
    assert not replay.problems  # (a fixture may hold a follow-up exchange for other tests)
    streamed_replay.assert_done()
    assert deltas[-1].part == "finish"
    assert len(deltas) > 2
    assert await accumulate_async(_aiter(deltas)) == response
    assert streamed_replay.requests[0].url.params["alt"] == "sse"
    assert streamed_replay.bodies[0] == replay.bodies[0]
    return response


async def _aiter(items: list[Any]) -> Any:
    for item in items:
        yield item


async def test_stream_parity_text() -> None:
    response = await parity("text", TEXT_REQUEST)
    assert response.message.text == "The capital of France is Paris."


async def test_stream_parity_thinking_and_text() -> None:
    request = ModelRequest(messages=[Message.user(TQ)])
    response = await parity("thinking", request, include_thoughts=True)
    assert [p.kind for p in response.message.parts] == ["thinking", "text", "thinking"]


async def test_stream_parity_parallel_tool_calls() -> None:
    request = ModelRequest(messages=[Message.user(WQ)], tools=[WEATHER])
    response = await parity("tool_calls", request)
    assert [c.call_id for c in response.message.tool_calls] == ["call_0", "call_1"]
    assert response.finish_reason == "tool_calls"
