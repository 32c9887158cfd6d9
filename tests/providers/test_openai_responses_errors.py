"""OpenAIResponsesModel (Responses API): errors, retries and cancellation, from wire fixtures."""

from __future__ import annotations

import json

import pytest

from providerkit import (
    ANSWER,
    SYSTEM,
    HangingStream,
    ask,
    cancel_midway,
    collect,
    openai_responses,
    waits,
)
from steadyrun.chat import accumulate
from steadyrun.models import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    RateLimited,
    RetryPolicy,
    ServerError,
)
from wirekit import WireReplay, load

# -- errors and retries --------------------------------------------------------------------


async def test_429_is_retried_after_retry_after_ms() -> None:
    replay = WireReplay(load("openai_responses_error_429"))
    model = openai_responses(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert waits(model) == [0.12]  # retry-after-ms wins over retry-after
    assert response.message.text == ANSWER


@pytest.mark.parametrize("name", ["openai_responses_error_500", "openai_responses_error_503"])
async def test_server_errors_and_overload_are_retried(name: str) -> None:
    replay = WireReplay(load(name))
    model = openai_responses(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert len(waits(model)) == 1
    assert response.message.text == ANSWER


@pytest.mark.parametrize(
    ("name", "cls", "code"),
    [
        ("openai_responses_error_401", AuthenticationFailed, "invalid_api_key"),
        ("openai_responses_error_400", BadRequest, "unsupported_parameter"),
        ("openai_responses_error_context", ContextOverflow, "context_length_exceeded"),
    ],
)
async def test_client_errors_are_not_retried(name: str, cls: type[Exception], code: str) -> None:
    replay = WireReplay(load(name))
    model = openai_responses(replay)
    with pytest.raises(cls) as caught:
        await model.respond(ask())
    replay.assert_done()
    assert type(caught.value) is cls
    assert caught.value.code == code  # type: ignore[attr-defined]
    assert waits(model) == []


async def test_retries_exhausted_raise_the_last_error() -> None:
    replay = WireReplay(load("openai_responses_error_exhausted"))
    model = openai_responses(replay, retry=RetryPolicy(max_attempts=3))
    with pytest.raises(Overloaded) as caught:
        await model.respond(ask())
    replay.assert_done()
    assert (caught.value.status, caught.value.request_id) == (503, "req_r_ex3")
    assert caught.value.body == {
        "error": {
            "message": "The engine is currently overloaded, please try again later.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


async def test_stream_errors_before_the_first_delta_are_retried() -> None:
    replay = WireReplay(load("openai_responses_error_stream"))
    model = openai_responses(replay)
    deltas = await collect(model.stream(ask(instructions=SYSTEM)))
    replay.assert_done()  # an error event, then response.failed, then the answer
    assert len(waits(model)) == 2
    assert accumulate(deltas).message.text == ANSWER


async def test_stream_error_event_is_typed() -> None:
    replay = WireReplay(load("openai_responses_error_stream")[:1])
    with pytest.raises(RateLimited):
        await collect(openai_responses(replay, retry=RetryPolicy(max_attempts=1)).stream(ask()))
    replay = WireReplay(load("openai_responses_error_stream")[1:2])
    with pytest.raises(ServerError, match="failed to generate"):
        await collect(openai_responses(replay, retry=RetryPolicy(max_attempts=1)).stream(ask()))


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancellation_stops_a_stream() -> None:
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 3,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "The",
        "logprobs": [],
    }
    transport = HangingStream(f"event: {delta['type']}\ndata: {json.dumps(delta)}\n\n".encode())
    await cancel_midway(openai_responses(transport), ask(), transport)
