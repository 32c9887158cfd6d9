"""GoogleModel: typed errors, retries, stream failures, cancellation, an agent run, the registry."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import steadyrun as sr
from providerkit import GEMINI, HangingStream, google_model, replay_of, waits
from steadyrun.chat import Message, ModelRequest
from steadyrun.models import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderConnectionError,
    ProviderTimeout,
    RetryPolicy,
    ServerError,
    model_requests,
    resolve_model,
)
from steadyrun.models.google import GoogleModel
from wirekit import WireReplay, load

HELLO = ModelRequest(messages=[Message.user("Hello")])


def wired(name: str, **options: Any) -> tuple[GoogleModel, WireReplay]:
    replay = replay_of(f"google_{name}")
    return google_model(replay, **options), replay


# -- retried --------------------------------------------------------------------------------------


async def test_rate_limits_are_retried_after_the_delay_google_asks_for() -> None:
    llm, replay = wired("error_429")
    response = await llm.respond(HELLO)
    replay.assert_done()
    assert response.message.text == "Hi!"
    # the retry-after header (3 s), then google.rpc.RetryInfo's retryDelay (2 s)
    assert waits(llm) == [3.0, 2.0]


@pytest.mark.parametrize("name", ["error_500", "error_503"])
async def test_server_errors_and_overload_are_retried(name: str) -> None:
    llm, replay = wired(name, retry=RetryPolicy(initial_delay=0.25, jitter=0.0))
    response = await llm.respond(HELLO)
    replay.assert_done()
    assert response.message.text == "Hi!"
    assert waits(llm) == [0.25]


async def test_retries_exhausted_raise_the_last_typed_error() -> None:
    llm, replay = wired("error_exhausted")
    with pytest.raises(Overloaded) as caught:
        await llm.respond(HELLO)
    replay.assert_done()
    error = caught.value
    assert len(replay.requests) == 4 and len(waits(llm)) == 3
    assert (error.status, error.code, error.request_id) == (503, "UNAVAILABLE", "gw-4")
    assert error.body == {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }
    assert error.provider == "google" and error.retryable


# -- not retried ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls", "status", "code"),
    [
        ("error_401", AuthenticationFailed, 401, "UNAUTHENTICATED"),
        ("error_api_key", AuthenticationFailed, 400, "INVALID_ARGUMENT"),
        ("error_400", BadRequest, 400, "INVALID_ARGUMENT"),
        ("error_context", ContextOverflow, 400, "INVALID_ARGUMENT"),
    ],
)
async def test_client_errors_are_not_retried(
    name: str, cls: type[Exception], status: int, code: str
) -> None:
    llm, replay = wired(name)
    with pytest.raises(cls) as caught:
        await llm.respond(HELLO)
    replay.assert_done()
    assert type(caught.value) is cls
    assert (caught.value.status, caught.value.code) == (status, code)  # type: ignore[attr-defined]
    assert waits(llm) == []


def test_retry_after_forms() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from steadyrun.models._google_errors import retry_after_from

    assert retry_after_from({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_from({"Retry-After": "7"}) == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (retry_after_from({"retry-after": later}) or 0) <= 30
    body = {
        "error": {
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]
        }
    }
    assert retry_after_from({}, body) == 1.5
    assert retry_after_from({}, {"error": {"details": [{"@type": "x.RetryInfo"}]}}) is None


async def test_timeouts_and_connection_failures_are_typed_and_retried() -> None:
    failures: list[Exception] = [
        httpx.ReadTimeout("read timed out"),
        httpx.ConnectError("connection refused"),
    ]
    seen: list[type[Exception]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if failures:
            error = failures.pop(0)
            seen.append(type(error))
            raise error
        body = load("google_error_500")[1]["response"]["json"]
        return httpx.Response(200, json=body)

    llm = google_model(
        httpx.MockTransport(handler), retry=RetryPolicy(initial_delay=0.0, jitter=0.0)
    )
    response = await llm.respond(HELLO)
    assert response.message.text == "Hi!"
    assert seen == [httpx.ReadTimeout, httpx.ConnectError]

    from steadyrun.models._google_errors import map_error

    assert type(map_error(httpx.ReadTimeout("x"))) is ProviderTimeout
    assert type(map_error(httpx.ConnectError("x"))) is ProviderConnectionError
    assert map_error(ValueError("not ours")) is None


# -- streaming failures ---------------------------------------------------------------------------


async def test_a_stream_failing_before_its_first_chunk_is_retried() -> None:
    llm, replay = wired("error_stream", retry=RetryPolicy(initial_delay=0.1, jitter=0.0))
    deltas = [d async for d in llm.stream(HELLO)]
    replay.assert_done()
    assert waits(llm) == [0.1]
    assert "".join(d.text for d in deltas if d.part == "text") == "Hi!"
    assert deltas[-1].finish_reason == "stop"


async def test_a_stream_failing_midway_is_raised_not_retried() -> None:
    llm, replay = wired("error_stream_midway")
    got = []
    with pytest.raises(ServerError) as caught:
        async for delta in llm.stream(HELLO):
            got.append(delta)
    replay.assert_done()
    assert [d.text for d in got] == ["Hi"]
    assert caught.value.code == "INTERNAL" and waits(llm) == []


async def test_cancelling_a_stream_stops_the_request() -> None:
    chunk = load("google_text_stream")[0]["response"]["sse"][0]["data"]
    transport = HangingStream(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
    llm = GoogleModel(GEMINI, api_key="k", http_client=httpx.AsyncClient(transport=transport))
    started = asyncio.Event()
    got = []

    async def consume() -> None:
        async for delta in llm.stream(HELLO):
            got.append(delta)
            started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(transport.requests) == 1
    assert transport.requests[0].url.path.endswith(":streamGenerateContent")
    assert [d.text for d in got] == ["The capital"]
    assert transport.closed.is_set()


async def test_cancelling_a_request_stops_it() -> None:
    entered = asyncio.Event()

    class Slow(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("never answered")

    llm = GoogleModel(GEMINI, api_key="k", http_client=httpx.AsyncClient(transport=Slow()))
    task = asyncio.create_task(llm.respond(HELLO))
    await asyncio.wait_for(entered.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


# -- keys, blocking, registry ---------------------------------------------------------------------


async def test_requests_are_blocked_unless_allowed() -> None:
    llm = GoogleModel(GEMINI, api_key="k")
    with model_requests(False), pytest.raises(sr.UsageError, match="blocked"):
        await llm.respond(HELLO)


async def test_a_missing_key_fails_at_the_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    llm = GoogleModel(GEMINI)  # constructing needs no key
    with pytest.raises(sr.UsageError, match="GOOGLE_API_KEY"):
        await llm.respond(HELLO)


def test_request_id_comes_from_a_header_when_there_is_one() -> None:
    from steadyrun.models._google_response import request_id_from

    assert request_id_from({"X-Request-Id": "req-1"}) == "req-1"
    assert request_id_from({"content-type": "application/json"}) is None


def test_unknown_default_settings_are_a_usage_error() -> None:
    with pytest.raises(sr.UsageError, match="temprature"):
        GoogleModel(GEMINI, api_key="k", temprature=0.5)


async def test_timeout_applies_to_each_request() -> None:
    llm, replay = wired("error_500", timeout=30)
    await llm.respond(HELLO)
    request = replay.requests[0]
    assert request.headers["x-server-timeout"] == "30"
    assert request.extensions["timeout"]["read"] == 30.0


def test_a_client_excludes_connection_options() -> None:
    from google import genai

    client = genai.Client(api_key="k")
    assert GoogleModel(GEMINI, client=client).model == GEMINI
    with pytest.raises(sr.UsageError, match="client"):
        GoogleModel(GEMINI, client=client, api_key="k")


def test_the_registry_resolves_google_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "env-key")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    agent = sr.Agent(name="a", model="google:gemini-2.5-flash")
    client = agent.client
    assert isinstance(client, GoogleModel) and client.model == "gemini-2.5-flash"
    resolved = resolve_model("google:gemini-2.5-pro", temperature=0.1)
    assert isinstance(resolved, GoogleModel) and resolved.defaults.temperature == 0.1


# -- an agent run ---------------------------------------------------------------------------------


async def test_an_agent_run_with_a_tool() -> None:
    replay = WireReplay(load("google_agent"))
    llm = GoogleModel(
        GEMINI, api_key="k", http_client=httpx.AsyncClient(transport=replay.transport)
    )

    @sr.tool
    async def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name.
        """
        assert city == "Paris"
        return "18°C and sunny"

    agent = sr.Agent(
        name="weather",
        model=llm,
        instructions="You are a weather assistant.",
        tools=[get_weather],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent, run_id="r1", input="What's the weather in Paris?"
    )
    replay.assert_done()
    assert result.status == "completed", result.error
    assert result.text == "It is 18°C and sunny in Paris."
    assert [c.status for c in result.calls] == ["succeeded"]
    assert result.calls[0].provider_call_id == "call_0"
    assert result.usage.requests == 2
    assert result.usage.reasoning_tokens == 48
