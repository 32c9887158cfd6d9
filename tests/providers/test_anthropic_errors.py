"""The Anthropic adapter's errors and retries, replayed from wire fixtures."""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import httpx
import pytest

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
    model_requests,
)
from steadyrun.models._anthropic_errors import retry_after
from steadyrun.models.anthropic import AnthropicModel
from wirekit import WireReplay, load

MODEL = "claude-sonnet-4-6"
REQUEST = ModelRequest(messages=[Message.user("hi")])


@pytest.fixture(autouse=True)
def _allow_model_requests() -> Iterator[None]:
    with model_requests(True):
        yield


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def model_for(transport: httpx.AsyncBaseTransport, **options: Any) -> tuple[AnthropicModel, Sleeps]:
    http_client = httpx.AsyncClient(transport=transport)
    model = AnthropicModel(MODEL, api_key="sk-ant-test", http_client=http_client, **options)
    model.sleep = sleeps = Sleeps()
    return model, sleeps


def replay_of(name: str) -> WireReplay:
    return WireReplay(load(name))


async def test_429_is_retried_after_the_retry_after_header() -> None:
    replay = replay_of("anthropic_error_429")
    model, sleeps = model_for(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert sleeps.waits == [7.0]
    assert response.message.text == "Recovered."
    assert response.provider_details is not None
    assert response.provider_details["request_id"] == "req_011CErrRate00002"


async def test_500_is_retried_with_backoff() -> None:
    replay = replay_of("anthropic_error_500")
    model, sleeps = model_for(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert len(sleeps.waits) == 1
    assert 0.4 <= sleeps.waits[0] <= 0.6  # RetryPolicy(): 0.5 s with 20% jitter
    assert response.message.text == "Recovered."


@pytest.mark.parametrize(
    ("fixture", "waits"), [("anthropic_error_529", None), ("anthropic_error_503", [0.25])]
)
async def test_overloaded_529_and_503_are_retried(fixture: str, waits: list[float] | None) -> None:
    replay = replay_of(fixture)
    model, sleeps = model_for(replay.transport)

    response = await model.respond(REQUEST)

    replay.assert_done()
    assert len(sleeps.waits) == 1
    if waits is not None:  # retry-after-ms
        assert sleeps.waits == waits
    assert response.message.text == "Recovered."


async def test_401_is_not_retried() -> None:
    replay = replay_of("anthropic_error_401")
    model, sleeps = model_for(replay.transport)

    with pytest.raises(AuthenticationFailed) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert sleeps.waits == []
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
    model, sleeps = model_for(replay.transport)

    with pytest.raises(BadRequest) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert sleeps.waits == []
    assert type(caught.value) is BadRequest
    assert caught.value.code == "invalid_request_error"
    assert caught.value.body == load("anthropic_error_400")[0]["response"]["json"]


async def test_a_prompt_too_long_is_a_context_overflow() -> None:
    replay = replay_of("anthropic_error_overflow")
    model, sleeps = model_for(replay.transport)

    with pytest.raises(ContextOverflow) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert sleeps.waits == []
    assert caught.value.status == 400
    assert "prompt is too long" in str(caught.value)


async def test_exhausted_retries_raise_the_last_typed_error() -> None:
    exchanges = load("anthropic_error_exhausted")
    replay = WireReplay(exchanges)
    model, sleeps = model_for(replay.transport, retry=RetryPolicy(max_attempts=3))

    with pytest.raises(Overloaded) as caught:
        await model.respond(REQUEST)

    replay.assert_done()
    assert len(sleeps.waits) == 2
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

    model, sleeps = model_for(httpx.MockTransport(handler))
    response = await model.respond(REQUEST)
    assert len(sleeps.waits) == 1
    assert response.message.text == "Recovered."

    def always_failing(request: httpx.Request) -> httpx.Response:
        raise failure

    model, _ = model_for(httpx.MockTransport(always_failing), retry=RetryPolicy(max_attempts=1))
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
    model, _ = model_for(replay.transport, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(RateLimited) as caught:
        await model.respond(REQUEST)
    assert caught.value.retry_after == 7.0
    assert caught.value.code == "rate_limit_error"
    assert caught.value.request_id == "req_011CErrRate00001"


async def test_server_error_fields() -> None:
    replay = replay_of("anthropic_error_500")
    model, _ = model_for(replay.transport, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError) as caught:
        await model.respond(REQUEST)
    assert (caught.value.status, caught.value.code) == (500, "api_error")
