"""LocalModel with the real packaged model (Gemma 3 270M through llama.cpp, on the CPU).

Marked local_model: the plain test command leaves them out, `.ci/run` runs them in a step of
its own (`pytest -m local_model`) after installing the local extra. Without it they fail.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import steadyrun as sr
from e2e.local_support import (
    INSTRUCTIONS,
    QUESTION,
    WEATHER,
    ToolFirst,
    check_weather_call,
    require_llama,
    timed,
)
from steadyrun._errors import UsageError
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    accumulate_async,
)
from steadyrun.models import ContextOverflow, model_requests, resolve_model

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    require_llama()
    from steadyrun.models.local import LocalModel

    model = LocalModel(temperature=0)
    yield model
    model.close()


def _request(**settings: Any) -> ModelRequest:
    return ModelRequest(
        instructions=INSTRUCTIONS,
        messages=[Message(role="user", parts=[TextPart(text=QUESTION)])],
        tools=[WEATHER],
        settings=ModelSettings(**settings),
    )


async def test_a_forced_tool_call_is_schema_valid(local: Any) -> None:
    with timed("load the packaged model"):
        await local.load()
    with timed("forced tool call (respond)"):
        response = await local.respond(_request(tool_choice="get_weather"))
    assert response.finish_reason == "tool_calls"
    (call,) = response.message.parts
    assert isinstance(call, ToolCallPart)
    assert call.name == "get_weather"
    assert call.call_id == "call_0"
    check_weather_call(call.arguments)
    assert response.model_name == "gemma3-270m"
    assert response.usage.requests == 1
    assert response.usage.input_tokens > 50 and response.usage.output_tokens > 3
    assert response.provider_details is not None
    assert response.provider_details["request_id"].startswith("local-")


async def test_required_with_one_tool_forces_it(local: Any) -> None:
    response = await local.respond(_request(tool_choice="required"))
    assert response.finish_reason == "tool_calls"
    assert [c.name for c in response.message.tool_calls] == ["get_weather"]
    check_weather_call(response.message.tool_calls[0].arguments)


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"tool_choice": "get_weather"}, id="forced-tool-call"),
        pytest.param({"tool_choice": "none", "max_tokens": 24}, id="text"),
        pytest.param({"tool_choice": "auto", "max_tokens": 32}, id="auto-in-one-piece"),
    ],
)
async def test_stream_accumulates_to_what_respond_returns(
    local: Any, settings: dict[str, Any]
) -> None:
    request = _request(**settings)
    with timed(f"respond {settings}"):
        responded = await local.respond(request)
    with timed(f"stream {settings}"):
        streamed = await accumulate_async(local.stream(request))
    assert streamed == responded
    if settings["tool_choice"] == "none":
        assert responded.finish_reason in ("stop", "length")
        assert responded.message.tool_calls == []
        assert responded.usage.output_tokens <= 24


async def test_the_same_request_gives_the_same_answer(local: Any) -> None:
    request = _request(tool_choice="none", max_tokens=16, temperature=0.9)
    first = await local.respond(request)
    second = await local.respond(request)
    assert first == second  # seeded before every request


async def test_response_format_constrains_the_text(local: Any) -> None:
    request = ModelRequest(
        messages=[Message(role="user", parts=[TextPart(text="Give me a city as JSON.")])],
        settings=ModelSettings(
            response_format=sr.chat.ResponseFormat(
                name="city",
                schema={
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 20}},
                    "required": ["city"],
                },
            ),
            max_tokens=64,
        ),
    )
    response = await local.respond(request)
    assert isinstance(json.loads(response.message.text)["city"], str)


async def test_a_cancelled_stream_stops_and_the_model_stays_usable(local: Any) -> None:
    request = _request(tool_choice="none", max_tokens=200)
    seen: list[Any] = []
    first = asyncio.Event()

    async def consume() -> None:
        stream: AsyncIterator[Any] = local.stream(request)
        async for delta in stream:
            seen.append(delta)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(d.part != "finish" for d in seen)
    # The worker thread stopped at its next token: the next request runs normally.
    with timed("request after a cancelled stream"):
        response = await local.respond(_request(tool_choice="get_weather"))
    check_weather_call(response.message.tool_calls[0].arguments)


async def test_a_cancelled_respond_stops_and_the_model_stays_usable(local: Any) -> None:
    task = asyncio.create_task(local.respond(_request(tool_choice="none", max_tokens=200)))
    for _ in range(6000):  # until the worker thread runs the request (white-box)
        if local._engine._meter is not None:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    response = await local.respond(_request(tool_choice="get_weather"))
    check_weather_call(response.message.tool_calls[0].arguments)


async def test_an_agent_calls_its_tool_then_answers(local: Any) -> None:
    calls: list[dict[str, str]] = []

    @sr.tool(replayable=True)
    def get_weather(city: str, unit: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city.
            unit: celsius or fahrenheit.
        """
        calls.append({"city": city, "unit": unit})
        return f"18 degrees {unit}, light rain in {city}"

    agent = sr.Agent(
        name="weather",
        model=ToolFirst(local),
        instructions=INSTRUCTIONS,
        tools=[get_weather],
        settings=ModelSettings(tool_choice="get_weather", max_tokens=48, temperature=0),
    )
    with timed("agent run (2 model calls)"):
        result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="w-1", input=QUESTION)
    assert result.status == "completed", result.error
    assert len(calls) == 1
    (record,) = result.calls
    assert record.name == "get_weather" and record.status == "succeeded"
    check_weather_call(record.arguments)
    assert result.usage.requests == 2
    assert result.text is not None  # a base model's text: only its presence is asserted


async def test_tool_results_reach_the_model_as_user_messages(local: Any) -> None:
    request = ModelRequest(
        instructions=INSTRUCTIONS,
        messages=[
            Message(role="user", parts=[TextPart(text=QUESTION)]),
            Message(
                role="assistant",
                parts=[ToolCallPart(call_id="call_0", name="get_weather", arguments="{}")],
            ),
            Message(
                role="tool",
                parts=[
                    ToolResultPart(
                        call_id="call_0", name="get_weather", content="18 C", is_error=False
                    )
                ],
            ),
        ],
        tools=[WEATHER],
        settings=ModelSettings(tool_choice="none"),
    )
    params, request_id = await local._params(request)
    assert params["messages"][-1] == {
        "role": "user",
        "content": "Result of get_weather, call call_0:\n18 C",
    }
    assert params["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert params["tool_choice"] == "none"
    assert params["max_tokens"] == 256  # the default
    assert request_id == (await local._params(request))[1]


async def test_requests_it_cannot_map_raise_usage_errors(local: Any) -> None:
    two = [WEATHER, ToolDefinition(name="get_time", description="", parameters={})]
    with pytest.raises(UsageError, match="name one in tool_choice"):
        await local.respond(
            ModelRequest(
                messages=[Message(role="user", parts=[TextPart(text="hi")])],
                tools=two,
                settings=ModelSettings(tool_choice="required"),
            )
        )
    media = MediaPart(ref=MediaRef(key="a.png", mime="image/png", size=1))
    with pytest.raises(UsageError, match="text only"):
        await local.respond(ModelRequest(messages=[Message(role="user", parts=[media])]))
    with pytest.raises(UsageError, match="not arguments of llama.cpp"):
        await local.respond(_request(extra={"nope": 1}))


async def test_blocked_requests_are_refused() -> None:
    require_llama()
    from steadyrun.models.local import LocalModel

    with model_requests(False), pytest.raises(UsageError, match="real model requests"):
        await LocalModel().respond(_request())


async def test_a_prompt_longer_than_the_window_is_a_context_overflow() -> None:
    require_llama()
    from steadyrun.models.local import LocalModel

    small = LocalModel(n_ctx=128)
    try:
        long = ModelRequest(messages=[Message(role="user", parts=[TextPart(text="word " * 400)])])
        with pytest.raises(ContextOverflow):
            await small.respond(long)
    finally:
        small.close()


def test_specs_resolve_through_the_registry(tmp_path: Any) -> None:
    require_llama()
    from steadyrun.models.local import LocalModel, packaged_model_path

    model = resolve_model("local:gemma3-270m")
    assert isinstance(model, LocalModel) and model.model == "gemma3-270m"
    path = packaged_model_path()
    assert path.name == "gemma-3-270m-q4_k_m.gguf" and path.stat().st_size > 200_000_000
    by_path = resolve_model(f"local:{path}")
    assert isinstance(by_path, LocalModel) and by_path.model_path == path
    assert by_path.model == "gemma-3-270m-q4_k_m"
    assert sr.Agent(name="a", model="local:gemma3-270m").client is not None
    with pytest.raises(UsageError, match="does not exist"):
        resolve_model(f"local:{tmp_path / 'missing.gguf'}")
    with pytest.raises(UsageError, match="neither a packaged model"):
        resolve_model("local:llama-70b")
