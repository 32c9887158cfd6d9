"""The Anthropic adapter's streaming: parity with ``respond``, retries, errors, cancellation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from providerkit import ANTHROPIC_WEATHER, CLAUDE, HangingStream, anthropic_model, waits
from steadyrun.chat import (
    Message,
    ModelRequest,
    ModelResponse,
    ResponseDelta,
    accumulate,
    accumulate_async,
)
from steadyrun.models import Overloaded, ProviderConnectionError, RetryPolicy, StreamingModelClient
from steadyrun.models.anthropic import AnthropicModel
from wirekit import WireReplay, load

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 10000}}


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ResponseDelta]:
    return [delta async for delta in model.stream(request)]


async def respond_and_stream(
    json_fixture: str, sse_fixture: str, request: ModelRequest, **options: Any
) -> tuple[ModelResponse, list[ResponseDelta]]:
    whole = WireReplay(load(json_fixture)[:1])
    streamed = WireReplay(load(sse_fixture))
    response = await anthropic_model(whole.transport, **options).respond(request)
    deltas = await collect(anthropic_model(streamed.transport, **options), request)
    whole.assert_done()
    streamed.assert_done()
    assert streamed.bodies[0] == {**whole.bodies[0], "stream": True}
    return response, deltas


def test_the_model_is_a_streaming_client() -> None:
    assert isinstance(AnthropicModel(CLAUDE, api_key="k"), StreamingModelClient)


# -- parity ----------------------------------------------------------------------------------


async def test_streamed_text_accumulates_to_the_response() -> None:
    request = ModelRequest(
        instructions="You are a terse assistant.", messages=[Message.user("Say hello.")]
    )
    response, deltas = await respond_and_stream("anthropic_text", "anthropic_text_stream", request)

    assert accumulate(deltas) == response
    assert [d.text for d in deltas if d.part == "text"] == [
        "",
        "Hello!",
        " How can I",
        " help you today?",
    ]
    finish = deltas[-1]
    assert finish.part == "finish"
    assert finish.provider_details is not None
    assert finish.provider_details["request_id"] == "req_011CTextHello0001"


async def test_streamed_thinking_text_and_tool_call_accumulate_to_the_response() -> None:
    request = ModelRequest(
        instructions="You answer weather questions with the get_weather tool.",
        messages=[Message.user("What's the weather in Paris?")],
        tools=[ANTHROPIC_WEATHER],
    )
    response, deltas = await respond_and_stream(
        "anthropic_thinking", "anthropic_thinking_stream", request, extra=THINKING
    )

    assert accumulate(deltas) == response
    assert response.usage.reasoning_tokens == 96
    assert response.usage.cache_read_tokens == 2048
    signatures = [d.signature for d in deltas if d.part == "thinking" and d.signature]
    assert len(signatures) == 1  # the signature_delta, given whole
    calls = [d for d in deltas if d.part == "tool_call"]
    # announced when the block starts, the arguments as they are typed
    assert (calls[0].call_id, calls[0].name, calls[0].arguments) == (
        "toolu_01A09q90qw90lq917835lq9",
        "get_weather",
        "",
    )
    assert [c.arguments for c in calls[1:]] == ['{"city": "Par', 'is", "unit": "cel', 'sius"}']


async def test_streamed_parallel_tool_calls_accumulate_to_the_response() -> None:
    request = ModelRequest(
        messages=[Message.user("Compare the weather in Paris and Berlin, with the radar map.")],
        tools=[ANTHROPIC_WEATHER],
    )
    response, deltas = await respond_and_stream(
        "anthropic_tool_parallel", "anthropic_tool_parallel_stream", request
    )

    assert accumulate(deltas) == response
    assert response.finish_reason == "tool_calls"
    # The streamed JSON text differs in spacing and escapes; both give the same arguments.
    assert [c.arguments for c in response.message.tool_calls] == [
        '{"city": "Paris", "radar": true}',
        '{"city": "Berlin", "note": "Café Müller"}',
    ]


# -- retries and errors ----------------------------------------------------------------------


async def test_a_stream_that_fails_before_its_first_part_is_retried() -> None:
    replay = WireReplay(load("anthropic_error_stream_retry"))
    model = anthropic_model(replay.transport)

    response = await accumulate_async(model.stream(ModelRequest(messages=[Message.user("hi")])))

    replay.assert_done()
    assert len(waits(model)) == 2  # after the 529, and after the error event before any part
    assert response.message.text == "Recovered."
    assert response.provider_details is not None
    assert response.provider_details["request_id"] == "req_011CStreamRetry03"


async def test_an_error_event_after_the_first_part_ends_the_stream_with_a_typed_error() -> None:
    replay = WireReplay(load("anthropic_error_stream_midway"))
    model = anthropic_model(replay.transport)
    seen: list[ResponseDelta] = []

    with pytest.raises(Overloaded) as caught:
        async for delta in model.stream(ModelRequest(messages=[Message.user("hi")])):
            seen.append(delta)

    replay.assert_done()  # one request: no retry once a part was given
    assert waits(model) == []
    assert "".join(d.text for d in seen) == "Here is the first half"
    error = caught.value
    assert error.status == 529  # the status of its error type (the stream itself was a 200)
    assert error.code == "overloaded_error"
    assert error.request_id == "req_011CStreamMidway1"
    assert error.retryable


async def test_a_stream_cut_before_message_stop_is_a_connection_error() -> None:
    replay = WireReplay(load("anthropic_error_stream_cut"))
    model = anthropic_model(replay.transport)
    with pytest.raises(ProviderConnectionError, match="before message_stop") as caught:
        await accumulate_async(model.stream(ModelRequest(messages=[Message.user("hi")])))
    replay.assert_done()  # not retried: a part had been given
    assert caught.value.request_id == "req_011CStreamCut0001"


async def test_stream_retries_exhausted_raise_the_last_error() -> None:
    exchanges = load("anthropic_error_exhausted")
    replay = WireReplay(exchanges)
    model = anthropic_model(replay.transport, retry=RetryPolicy(max_attempts=3))
    with pytest.raises(Overloaded) as caught:
        await collect(model, ModelRequest(messages=[Message.user("hi")]))
    replay.assert_done()
    assert caught.value.request_id == "req_011CErrExh00003"


# -- cancellation ----------------------------------------------------------------------------


def hanging_events() -> bytes:
    """The first events of a streamed answer; the stream then sends nothing more."""
    message = {
        "id": "msg_01Hanging",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Thinking about it"},
            },
        ),
    ]
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


async def test_cancelling_a_streaming_request_stops_it_and_closes_the_response() -> None:
    transport = HangingStream(hanging_events())
    model = anthropic_model(transport)
    first = asyncio.Event()
    deltas: list[ResponseDelta] = []

    async def consume() -> None:
        async for delta in model.stream(ModelRequest(messages=[Message.user("hi")])):
            deltas.append(delta)
            if delta.text:
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert len(transport.requests) == 1
    assert json.loads(transport.requests[0].content)["stream"] is True
    assert transport.closed.is_set()
    assert "".join(d.text for d in deltas) == "Thinking about it"


async def test_cancelling_respond_stops_the_request() -> None:
    started = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = anthropic_model(httpx.MockTransport(handler))
    task = asyncio.create_task(model.respond(ModelRequest(messages=[Message.user("hi")])))
    await asyncio.wait_for(started.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
