"""Token counting through the providers' count endpoints: Anthropic and Google.

Each test replays ``tests/providers/wire/{anthropic,google}_count_*.json`` (written from the
providers' API references: ``POST /v1/messages/count_tokens`` answering ``{"input_tokens": N}``,
``POST /v1beta/models/{model}:countTokens`` answering ``{"totalTokens": N}``) through the SDK's
own HTTP client. The end-to-end tests run an agent whose ``ContextPolicy`` counts with
``CachedCounter(ProviderCounter(model))``: the runtime counts before each model call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types

import steadyrun as sr
from providerkit import (
    GEMINI,
    ORDER,
    anthropic_model,
    google_model,
    media_ref,
    order_tool,
    replay_of,
    waits,
)
from steadyrun import UsageError
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from steadyrun.context import CachedCounter, ProviderCounter, estimate_request
from steadyrun.models import (
    BadRequest,
    Overloaded,
    ProviderError,
    RateLimited,
    RetryPolicy,
    model_requests,
)
from steadyrun.models.anthropic import AnthropicModel
from steadyrun.models.google import GoogleModel
from wirekit import WireReplay, load

INSTRUCTIONS = "You help customers track their orders."
QUESTION = "Where is order 4711?"


PNG = b"\x89PNG\r\n\x1a\n"
PHOTO = media_ref("photo.png", "image/png", PNG)


async def read_media(ref: MediaRef) -> bytes:
    assert ref == PHOTO
    return PNG


def claude(name: str, **options: Any) -> tuple[AnthropicModel, WireReplay]:
    options.setdefault("retry", RetryPolicy(jitter=0.0))
    replay = replay_of(f"anthropic_count_{name}")
    return anthropic_model(replay, **options), replay


def gemini(name: str, *, model: str = GEMINI, **options: Any) -> tuple[GoogleModel, WireReplay]:
    replay = WireReplay(load(f"google_count_{name}") if name else [])
    return google_model(replay, model, **options), replay


lookup_order = order_tool("order {order_id}: shipped")


def counting_agent(model: Any) -> tuple[sr.Agent, CachedCounter]:
    counter = CachedCounter(ProviderCounter(model))
    agent = sr.Agent(
        name="orders",
        model=model,
        instructions=INSTRUCTIONS,
        tools=[lookup_order],
        context=sr.ContextPolicy(window=200_000, counter=counter),
    )
    return agent, counter


def paths(replay: WireReplay) -> list[str]:
    return [request.url.path for request in replay.requests]


# -- Anthropic ------------------------------------------------------------------------------

ANTHROPIC_HISTORY = [
    Message.user(QUESTION),
    Message(
        role="assistant",
        parts=[
            ThinkingPart(
                text="The customer wants the status of order 4711.",
                signature="EqQBCkYIBxgCKkBcountSig4711",
            ),
            TextPart(text="Let me look that up."),
            ToolCallPart(
                call_id="toolu_01CountLookup4711",
                name="lookup_order",
                arguments='{"order_id": "4711"}',
            ),
        ],
    ),
    Message(
        role="tool",
        parts=[
            ToolResultPart(
                call_id="toolu_01CountLookup4711",
                name="lookup_order",
                content="order 4711: shipped",
            )
        ],
    ),
]


async def test_anthropic_counts_the_message_request_less_generation_options() -> None:
    model, replay = claude(
        "request",
        extra={
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "metadata": {"user_id": "customer-17"},
            "service_tier": "auto",
        },
    )
    request = ModelRequest(
        instructions=INSTRUCTIONS,
        messages=ANTHROPIC_HISTORY,
        tools=[dataclasses.replace(ORDER, strict=True)],
        settings=ModelSettings(
            tool_choice="auto",
            parallel_tool_calls=False,
            max_tokens=1024,
            stop=["END"],
            temperature=0.3,  # refused by respond(), but it does not change the input
        ),
    )

    tokens = await model.count_tokens(request)

    replay.assert_done()
    assert tokens == 1187
    assert paths(replay) == ["/v1/messages/count_tokens"]
    # Exactly the message request's input fields: no max_tokens, stop_sequences, temperature,
    # metadata or service_tier.
    assert replay.bodies[0] == load("anthropic_count_request")[0]["request"]["json"]
    assert replay.requests[0].headers["x-stainless-retry-count"] == "0"


async def test_anthropic_count_is_retried_like_respond() -> None:
    model, replay = claude("retry")

    tokens = await model.count_tokens(ModelRequest(messages=[Message.user("hi")]))

    replay.assert_done()
    assert tokens == 8
    assert waits(model) == [3.0, 1.0]  # the retry-after of the 429, then backoff after the 529
    assert paths(replay) == ["/v1/messages/count_tokens"] * 3


async def test_anthropic_count_error_is_typed_and_not_retried() -> None:
    model, replay = claude("error", extra={"thinking": {"type": "enabled", "budget_tokens": 2048}})
    request = ModelRequest(
        messages=[
            Message.user(QUESTION),
            Message(role="assistant", parts=[TextPart(text="Let me look that up.")]),
        ]
    )

    with pytest.raises(BadRequest) as caught:
        await model.count_tokens(request)

    replay.assert_done()
    error = caught.value
    assert error.provider == "anthropic"
    assert error.status == 400
    assert error.code == "invalid_request_error"
    assert error.request_id == "req_011CCountBad0001"
    assert isinstance(error.body, dict) and error.body["type"] == "error"
    assert "must start with a thinking block" in str(error)
    assert waits(model) == []


async def test_anthropic_retries_exhausted_give_the_last_typed_error() -> None:
    model, replay = claude("retry", retry=RetryPolicy(max_attempts=2, jitter=0.0))
    replay.exchanges = replay.exchanges[:2]

    with pytest.raises(Overloaded) as caught:
        await model.count_tokens(ModelRequest(messages=[Message.user("hi")]))

    replay.assert_done()
    assert caught.value.status == 529
    assert caught.value.request_id == "req_011CCountOver001"
    assert waits(model) == [3.0]


async def test_anthropic_count_is_blocked_when_model_requests_are_off() -> None:
    model, replay = claude("retry")
    with model_requests(False), pytest.raises(UsageError, match="blocked"):
        await model.count_tokens(ModelRequest(messages=[Message.user("hi")]))
    assert replay.requests == []


async def test_anthropic_agent_counts_before_its_model_call_and_caches_identical_requests() -> None:
    model, replay = claude("agent")
    agent, counter = counting_agent(model)
    runtime = sr.Runtime(sr.MemoryStore())
    question = Message.user(QUESTION, id="ticket-4711")  # the same host message, asked twice

    first = await runtime.run(agent, run_id="ticket-4711-a", input=question)
    second = await runtime.run(agent, run_id="ticket-4711-b", input=question)

    replay.assert_done()
    assert first.status == second.status == "completed", (first.error, second.error)
    assert (
        first.text
        == second.text
        == "Which order do you mean? I need the full order id, e.g. ORD-4711."
    )
    # One count, then the model call; the second run's identical request is counted from cache.
    assert paths(replay) == ["/v1/messages/count_tokens", "/v1/messages", "/v1/messages"]
    assert (counter.misses, counter.hits) == (1, 1)
    count_body, message_body = replay.bodies[0], replay.bodies[1]
    assert {k: v for k, v in message_body.items() if k != "max_tokens"} == count_body
    assert first.usage.requests == 1  # counting is not a model call in the run's usage


# -- Google ---------------------------------------------------------------------------------

GOOGLE_HISTORY = [
    Message(
        role="user",
        parts=[TextPart(text="Is the parcel in this photo order 4711?"), MediaPart(ref=PHOTO)],
    ),
    Message(
        role="assistant",
        parts=[
            ToolCallPart(
                call_id="gemini-call-1",
                name="lookup_order",
                arguments='{"order_id": "4711"}',
                provider_details={
                    "provider": "google",
                    "generated_id": True,
                    "thought_signature": "Er/8VQH6Pg==",
                },
            )
        ],
    ),
    Message(
        role="tool",
        parts=[
            ToolResultPart(
                call_id="gemini-call-1", name="lookup_order", content="order 4711: shipped"
            )
        ],
    ),
]


async def test_google_developer_api_counts_the_contents_and_estimates_the_rest() -> None:
    llm, replay = gemini("request", media_reader=read_media)
    request = ModelRequest(
        instructions=INSTRUCTIONS,
        messages=GOOGLE_HISTORY,
        tools=[ORDER],
        settings=ModelSettings(temperature=0.2, max_tokens=256, tool_choice="auto"),
    )

    tokens = await llm.count_tokens(request)

    replay.assert_done()
    assert paths(replay) == [f"/v1beta/models/{GEMINI}:countTokens"]
    # The SDK sends only contents to the Developer API: no systemInstruction, tools or
    # generationConfig (it refuses them in a count call).
    assert replay.bodies[0] == load("google_count_request")[0]["request"]["json"]
    uncounted = estimate_request(ModelRequest(instructions=INSTRUCTIONS, tools=[ORDER]))
    assert uncounted > 0
    assert tokens == 316 + uncounted


async def test_google_vertex_counts_system_instruction_and_tools_too() -> None:
    replay = WireReplay(load("google_count_vertex"))
    client = genai.Client(
        vertexai=True,
        api_key="vertex-express-key",
        http_options=types.HttpOptions(
            httpx_async_client=httpx.AsyncClient(transport=replay.transport)
        ),
    )
    llm = GoogleModel(GEMINI, client=client)
    request = ModelRequest(
        instructions=INSTRUCTIONS, messages=[Message.user(QUESTION)], tools=[ORDER]
    )

    tokens = await llm.count_tokens(request)

    replay.assert_done()
    assert tokens == 61  # all of it counted by the API: nothing estimated
    body = replay.bodies[0]
    assert body["systemInstruction"] == {"parts": [{"text": INSTRUCTIONS}]}
    assert [d["name"] for d in body["tools"][0]["functionDeclarations"]] == ["lookup_order"]
    assert "generationConfig" not in body


async def test_google_count_is_retried_like_respond() -> None:
    llm, replay = gemini("retry")

    tokens = await llm.count_tokens(ModelRequest(messages=[Message.user("Hello")]))

    replay.assert_done()
    assert tokens == 2  # no system instruction or tools: nothing is estimated
    assert waits(llm) == [2.0, 1.0]  # RetryInfo of the 429, then backoff after the 503
    assert len(replay.requests) == 3


async def test_google_count_error_is_typed_and_not_retried() -> None:
    llm, replay = gemini("error", model="gemini-9-flash")

    with pytest.raises(BadRequest) as caught:
        await llm.count_tokens(ModelRequest(messages=[Message.user("Hello")]))

    replay.assert_done()
    error = caught.value
    assert error.provider == "google"
    assert error.status == 404
    assert error.code == "NOT_FOUND"
    assert isinstance(error.body, dict)
    assert "not supported for countTokens" in str(error)
    assert waits(llm) == []


async def test_google_rate_limit_exhausted_gives_the_typed_error() -> None:
    llm, replay = gemini("retry", retry=RetryPolicy(max_attempts=1))
    replay.exchanges = replay.exchanges[:1]

    with pytest.raises(RateLimited) as caught:
        await llm.count_tokens(ModelRequest(messages=[Message.user("Hello")]))

    replay.assert_done()
    assert isinstance(caught.value, ProviderError)
    assert caught.value.code == "RESOURCE_EXHAUSTED"
    assert caught.value.retry_after == 2.0


async def test_google_request_without_contents_is_estimated_without_a_call() -> None:
    llm, replay = gemini("")
    request = ModelRequest(instructions=INSTRUCTIONS, tools=[ORDER])

    assert await llm.count_tokens(request) == estimate_request(request)
    assert replay.requests == []


async def test_google_count_is_blocked_when_model_requests_are_off() -> None:
    llm, replay = gemini("")
    with model_requests(False), pytest.raises(UsageError, match="blocked"):
        await llm.count_tokens(ModelRequest(messages=[Message.user("Hello")]))
    assert replay.requests == []


async def test_google_agent_counts_before_its_model_call_and_caches_identical_requests() -> None:
    llm, replay = gemini("agent")
    agent, counter = counting_agent(llm)
    runtime = sr.Runtime(sr.MemoryStore())
    question = Message.user(QUESTION, id="ticket-4711")

    first = await runtime.run(agent, run_id="ticket-4711-a", input=question)
    second = await runtime.run(agent, run_id="ticket-4711-b", input=question)

    replay.assert_done()
    assert first.status == second.status == "completed", (first.error, second.error)
    assert first.text == "Which order do you mean? I need the full order id, e.g. ORD-4711."
    assert paths(replay) == [
        f"/v1beta/models/{GEMINI}:countTokens",
        f"/v1beta/models/{GEMINI}:generateContent",
        f"/v1beta/models/{GEMINI}:generateContent",
    ]
    assert (counter.misses, counter.hits) == (1, 1)
    assert replay.bodies[0]["contents"] == replay.bodies[1]["contents"]
