"""OpenAIChatModel (Chat Completions): errors, retries and cancellation, from wire fixtures."""

from __future__ import annotations

import json

import httpx
import pytest

from providerkit import ANSWER, HangingStream, ask, cancel_midway, collect, openai_chat, waits
from steadyrun.chat import ResponseDelta, accumulate
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
)
from steadyrun.models._openai_common import retry_after_seconds
from wirekit import WireReplay, load

# -- errors and retries --------------------------------------------------------------------


async def test_429_is_retried_after_retry_after() -> None:
    replay = WireReplay(load("openai_chat_error_429"))
    model = openai_chat(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert waits(model) == [1.0]
    assert response.message.text == ANSWER


@pytest.mark.parametrize("name", ["openai_chat_error_500", "openai_chat_error_503"])
async def test_server_errors_and_overload_are_retried(name: str) -> None:
    replay = WireReplay(load(name))
    model = openai_chat(replay)
    response = await model.respond(ask())
    replay.assert_done()
    assert len(waits(model)) == 1
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
    model = openai_chat(replay)
    with pytest.raises(cls) as caught:
        await model.respond(ask())
    replay.assert_done()
    error = caught.value
    assert type(error) is cls
    assert (error.status, error.code, error.request_id) == (status, code, request_id)  # type: ignore[attr-defined]
    assert error.body["error"]["code"] == code  # type: ignore[attr-defined]
    assert waits(model) == []


async def test_overload_is_typed() -> None:
    replay = WireReplay(load("openai_chat_error_503")[:1])
    with pytest.raises(Overloaded):
        await openai_chat(replay, retry=RetryPolicy(max_attempts=1)).respond(ask())


async def test_retries_exhausted_raise_the_last_error() -> None:
    replay = WireReplay(load("openai_chat_error_exhausted"))
    model = openai_chat(replay, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    with pytest.raises(ServerError) as caught:
        await model.respond(ask())
    replay.assert_done()
    error = caught.value
    assert (error.status, error.code, error.request_id) == (500, "server_error", "req_err_3")
    assert error.body["error"]["type"] == "server_error"
    assert len(waits(model)) == 2


async def test_stream_failing_before_the_first_event_is_retried() -> None:
    replay = WireReplay(load("openai_chat_error_stream_retry"))
    model = openai_chat(replay)
    deltas = await collect(model.stream(ask()))
    replay.assert_done()  # a 500, then an error event, then the answer
    assert len(waits(model)) == 2
    response = accumulate(deltas)
    assert response.message.text == ANSWER
    assert response.provider_details == {
        "request_id": "req_serr_3",
        "response_id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    }


async def test_stream_failing_after_a_delta_is_not_retried() -> None:
    replay = WireReplay(load("openai_chat_error_midstream"))
    model = openai_chat(replay)
    seen: list[ResponseDelta] = []
    with pytest.raises(ServerError):
        async for delta in model.stream(ask()):
            seen.append(delta)
    replay.assert_done()
    assert [d.text for d in seen] == ["The capital"]
    assert waits(model) == []


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

    model = openai_chat(httpx.MockTransport(fail), retry=RetryPolicy(max_attempts=2))
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
        await openai_chat(replay, retry=RetryPolicy(max_attempts=1)).respond(ask())
    assert caught.value.retry_after == 1.0
    assert caught.value.code == "rate_limit_exceeded"


# -- cancellation --------------------------------------------------------------------------


async def test_cancellation_stops_a_stream() -> None:
    chunk = {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": {"content": "The"}, "finish_reason": None}],
    }
    transport = HangingStream(f"data: {json.dumps(chunk)}\n\n".encode())
    await cancel_midway(openai_chat(transport), ask(), transport)
