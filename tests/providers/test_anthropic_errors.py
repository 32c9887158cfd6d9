"""The Anthropic adapter's errors and retries, replayed from wire fixtures."""

from __future__ import annotations

import time
from email.utils import formatdate

import httpx
import pytest

from providerkit import anthropic_model, replay_of, waits
from steadyrun.chat import Message, ModelRequest
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
from steadyrun.models._anthropic_errors import retry_after
from wirekit import WireReplay, load

REQUEST = ModelRequest(messages=[Message.user("hi")])


async def test_429_is_retried_after_the_retry_after_header() -> None:
    replay = replay_of("anthropic_error_429")
    model = anthropic_model(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert waits(model) == [7.0]
    assert response.message.text == "Recovered."
    assert response.provider_details is not None
    assert response.provider_details["request_id"] == "req_011CErrRate00002"


async def test_500_is_retried_with_backoff() -> None:
    replay = replay_of("anthropic_error_500")
    model = anthropic_model(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert len(waits(model)) == 1
    assert 0.4 <= waits(model)[0] <= 0.6  # RetryPolicy(): 0.5 s with 20% jitter
    assert response.message.text == "Recovered."


@pytest.mark.parametrize(
    ("fixture", "expected"), [("anthropic_error_529", None), ("anthropic_error_503", [0.25])]
)
async def test_overloaded_529_and_503_are_retried(
    fixture: str, expected: list[float] | None
) -> None:
    replay = replay_of(fixture)
    model = anthropic_model(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert len(waits(model)) == 1
    if expected is not None:  # retry-after-ms
        assert waits(model) == expected
    assert response.message.text == "Recovered."


async def test_401_is_not_retried() -> None:
    replay = replay_of("anthropic_error_401")
    model = anthropic_model(replay.transport)

    with pytest.raises(AuthenticationFailed) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert waits(model) == []
    error = caught.value
    assert (error.status, error.code, error.request_id) == (
        401,
        "authentication_error",
        "req_011CErrAuth00001",
    )
    assert not error.retryable
    assert "invalid x-api-key" in str(error)


async def test_400_is_not_retried() -> None:
    replay = replay_of("anthropic_error_400")
    model = anthropic_model(replay.transport)

    with pytest.raises(BadRequest) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert waits(model) == []
    assert type(caught.value) is BadRequest
    assert caught.value.code == "invalid_request_error"
    assert caught.value.body == load("anthropic_error_400")[0]["response"]["json"]


async def test_a_prompt_too_long_is_a_context_overflow() -> None:
    replay = replay_of("anthropic_error_overflow")
    model = anthropic_model(replay.transport)

    with pytest.raises(ContextOverflow) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert waits(model) == []
    assert caught.value.status == 400
    assert "prompt is too long" in str(caught.value)


async def test_exhausted_retries_raise_the_last_typed_error() -> None:
    exchanges = load("anthropic_error_exhausted")
    replay = WireReplay(exchanges)
    model = anthropic_model(replay.transport, retry=RetryPolicy(max_attempts=3))

    with pytest.raises(Overloaded) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert len(waits(model)) == 2
    error = caught.value
    assert error.provider == "anthropic"
    assert error.status == 529
    assert error.code == "overloaded_error"
    assert error.request_id == "req_011CErrExh00003"
    assert error.body == exchanges[2]["response"]["json"]


@pytest.mark.parametrize(
    ("failure", "error_type"),
    [
        (httpx.ReadTimeout("read timed out"), ProviderTimeout),
        (httpx.ConnectError("connection refused"), ProviderConnectionError),
    ],
)
async def test_timeouts_and_connection_failures_are_typed_and_retried(
    failure: Exception, error_type: type[Exception]
) -> None:
    replay = WireReplay(load("anthropic_error_500")[1:])
    failures = [failure]

    def handler(request: httpx.Request) -> httpx.Response:
        if failures:
            raise failures.pop()
        return replay.transport.handler(request)  # type: ignore[no-any-return]

    model = anthropic_model(httpx.MockTransport(handler))
    response = await model.respond(REQUEST)
    assert len(waits(model)) == 1
    assert response.message.text == "Recovered."

    def always_failing(request: httpx.Request) -> httpx.Response:
        raise failure

    model = anthropic_model(httpx.MockTransport(always_failing), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(error_type):
        await model.respond(REQUEST)


def test_retry_after_headers() -> None:
    assert retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    later = retry_after(httpx.Headers({"retry-after": formatdate(time.time() + 30, usegmt=True)}))
    assert later is not None and 25 <= later <= 30
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


async def test_rate_limit_error_fields() -> None:
    replay = replay_of("anthropic_error_429")
    model = anthropic_model(replay.transport, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(RateLimited) as caught:
        await model.respond(REQUEST)
    assert caught.value.retry_after == 7.0
    assert caught.value.code == "rate_limit_error"
    assert caught.value.request_id == "req_011CErrRate00001"


async def test_server_error_fields() -> None:
    replay = replay_of("anthropic_error_500")
    model = anthropic_model(replay.transport, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError) as caught:
        await model.respond(REQUEST)
    assert (caught.value.status, caught.value.code) == (500, "api_error")
