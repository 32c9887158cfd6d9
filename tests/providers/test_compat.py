"""CompatModel against wire fixtures of Ollama, vLLM, llama.cpp and OpenRouter answers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import steadyrun as sr
from providerkit import (
    HangingStream,
    Sleeps,
    ask,
    cancel_midway,
    collect,
    http_client,
    order_tool,
    waits,
)
from steadyrun.chat import (
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    accumulate,
)
from steadyrun.models import BadRequest, ContextOverflow, ProviderConnectionError, RetryPolicy
from steadyrun.models.compat import CompatModel
from steadyrun.models.openai import OpenAIChatModel
from wirekit import WireReplay, load

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPAT_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def compat(
    replay: WireReplay | httpx.AsyncBaseTransport,
    spec: str = "http://localhost:8000/v1#Qwen/Qwen3-8B",
    **options: Any,
) -> CompatModel:
    model = CompatModel(spec, http_client=http_client(replay), **options)
    model.sleep = Sleeps()
    return model


# -- the spec, keys, the registry ----------------------------------------------------------


def test_spec_splits_base_url_and_model() -> None:
    model = CompatModel("http://localhost:11434/v1#llama3.2")
    assert (model.base_url, model.model) == ("http://localhost:11434/v1", "llama3.2")
    assert str(model.sdk_client().base_url) == "http://localhost:11434/v1/"
    # model names may hold slashes and colons
    tagged = CompatModel("http://gpu-box:8000/v1#Qwen/Qwen3-8B:q4")
    assert tagged.model == "Qwen/Qwen3-8B:q4"


@pytest.mark.parametrize(
    ("spec", "options", "match"),
    [
        ("llama3.2", {}, "needs the server's URL"),
        ("http://localhost:11434/v1#", {}, "not '<base url>#<model>'"),
        ("localhost:11434/v1#llama3.2", {}, "http://"),
        ("http://a:1/v1#m", {"base_url": "http://b:2/v1"}, "give one"),
    ],
)
def test_bad_specs(spec: str, options: dict[str, Any], match: str) -> None:
    with pytest.raises(sr.UsageError, match=match):
        CompatModel(spec, **options)


def test_model_name_with_base_url() -> None:
    model = CompatModel("llama3.2", base_url="http://localhost:11434/v1")
    assert (model.base_url, model.model) == ("http://localhost:11434/v1", "llama3.2")


def test_registry_resolves_compat() -> None:
    agent = sr.Agent(name="a", model="compat:http://localhost:11434/v1#llama3.2")
    assert isinstance(agent.client, CompatModel)
    assert isinstance(agent.client, OpenAIChatModel)  # the Chat Completions mapping, reused
    assert agent.client.model == "llama3.2"
    assert agent.client.base_url == "http://localhost:11434/v1"


@pytest.mark.parametrize(
    ("env", "given", "sent"),
    [
        ({}, None, "Bearer not-needed"),
        ({"OPENAI_API_KEY": "sk-openai"}, None, "Bearer sk-openai"),
        ({"OPENAI_API_KEY": "sk-openai", "COMPAT_API_KEY": "sk-compat"}, None, "Bearer sk-compat"),
        ({"COMPAT_API_KEY": "sk-compat"}, "sk-given", "Bearer sk-given"),
    ],
)
async def test_api_key_sources(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], given: str | None, sent: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    replay = WireReplay(load("compat_text"))
    model = compat(replay, "http://localhost:8080/v1#qwen2.5-7b-instruct", api_key=given)
    await model.respond(ask("Say hello.", instructions="Answer in one sentence."))
    replay.assert_done()
    assert replay.requests[0].headers["authorization"] == sent
    assert str(replay.requests[0].url) == "http://localhost:8080/v1/chat/completions"


# -- quirks --------------------------------------------------------------------------------


async def test_answer_without_id_or_usage() -> None:
    replay = WireReplay(load("compat_text"))
    model = compat(replay, "http://localhost:8080/v1#qwen2.5-7b-instruct")
    response = await model.respond(ask("Say hello.", instructions="Answer in one sentence."))
    replay.assert_done()
    assert response.message.parts == [TextPart(text="Hello! How can I help you today?")]
    assert response.finish_reason == "stop"
    assert response.usage == Usage(requests=1)
    assert response.model_name == "qwen2.5-7b-instruct"
    assert response.provider_details is None


async def test_reasoning_content_is_thinking() -> None:
    replay = WireReplay(load("compat_reasoning"))
    response = await compat(replay).respond(ask("What is 17 * 23?"))
    replay.assert_done()
    thinking, text = response.message.parts
    assert thinking == ThinkingPart(
        text="The user asks for 17 * 23. 17 * 20 = 340, 17 * 3 = 51, so 391.",
        provider_details={"field": "reasoning_content"},
    )
    assert text == TextPart(text="17 × 23 = 391.")
    assert response.usage == Usage(requests=1, input_tokens=16, output_tokens=58)
    assert response.provider_details == {
        "request_id": "chatcmpl-3f1c9a2b7e5d4f60",
        "response_id": "chatcmpl-3f1c9a2b7e5d4f60",
    }


async def test_stream_parity_thinking_and_text() -> None:
    plain = WireReplay(load("compat_reasoning"))
    streamed = WireReplay(load("compat_reasoning_stream"))
    response = await compat(plain).respond(ask("What is 17 * 23?"))
    deltas = await collect(compat(streamed).stream(ask("What is 17 * 23?")))
    plain.assert_done()
    streamed.assert_done()
    assert [d.part for d in deltas].count("thinking") == 3
    assert accumulate(deltas) == response


async def test_thinking_is_sent_back_in_its_field() -> None:
    replay = WireReplay(load("compat_reasoning_tools"))
    model = compat(replay)
    question = Message.user("What's the weather in Paris?")
    first = await model.respond(ModelRequest(messages=[question]))
    assert first.finish_reason == "tool_calls"
    assert [p.kind for p in first.message.parts] == ["thinking", "tool_call"]
    results = Message(
        role="tool",
        parts=[
            ToolResultPart(
                call_id="chatcmpl-tool-5c2f0e8d", name="get_weather", content="18°C, light rain"
            )
        ],
    )
    second = await model.respond(ModelRequest(messages=[question, first.message, results]))
    replay.assert_done()
    assert replay.bodies[1]["messages"][1]["reasoning_content"] == (
        "I should call get_weather for Paris in Celsius."
    )
    assert second.message.text == "18°C with light rain."


async def test_openrouter_reasoning_field_and_usage() -> None:
    replay = WireReplay(load("compat_openrouter"))
    model = compat(replay, "https://openrouter.ai/api/v1#deepseek/deepseek-r1")
    question = Message.user("Name a prime between 20 and 30.")
    first = await model.respond(ModelRequest(messages=[question]))
    assert first.message.parts[0] == ThinkingPart(
        text="Primes between 20 and 30: 23 and 29.", provider_details={"field": "reasoning"}
    )
    assert first.usage == Usage(
        requests=1, input_tokens=900, output_tokens=340, cache_read_tokens=512, reasoning_tokens=300
    )
    assert first.provider_details == {
        "request_id": "gen-1735689600-AbCdEfGhIjKlMnOp",
        "response_id": "gen-1735689600-AbCdEfGhIjKlMnOp",
    }
    second = await model.respond(
        ModelRequest(messages=[question, first.message, Message.user("Another one?")])
    )
    replay.assert_done()  # the follow-up carries "reasoning" on the assistant message
    assert second.message.text == "29."


async def test_tool_calls_without_ids_or_indexes_and_finish_stop() -> None:
    plain = WireReplay(load("compat_tools_no_ids"))
    streamed = WireReplay(load("compat_tools_no_ids_stream"))
    spec = "http://localhost:8080/v1#llama3.2"
    request = ModelRequest(
        messages=[Message.user("Compare the weather in Paris and Tokyo.")], tools=[WEATHER]
    )
    response = await compat(plain, spec).respond(request)
    deltas = await collect(compat(streamed, spec).stream(request))
    plain.assert_done()
    streamed.assert_done()
    assert response.finish_reason == "tool_calls"  # the server said "stop"
    assert response.message.tool_calls == [
        ToolCallPart(
            call_id="call_0", name="get_weather", arguments='{"city": "Paris", "unit": "c"}'
        ),
        ToolCallPart(
            call_id="call_1", name="get_weather", arguments='{"city": "Tokyo", "unit": "c"}'
        ),
    ]
    assert accumulate(deltas) == response


async def test_max_tokens_and_server_extras() -> None:
    replay = WireReplay(load("compat_settings"))
    model = compat(replay, max_tokens=64, extra={"top_k": 20})
    request = ask(
        "Answer briefly: why is the sky blue?",
        temperature=0.2,
        stop=["</answer>"],
        extra={"repetition_penalty": 1.05},
    )
    response = await model.respond(request)
    replay.assert_done()
    assert "max_completion_tokens" not in replay.bodies[0]
    assert response.message.parts == [TextPart(text="Rayleigh scattering.")]


# -- errors --------------------------------------------------------------------------------


async def test_llama_cpp_context_overflow() -> None:
    replay = WireReplay(load("compat_error_context"))
    model = compat(replay, "http://localhost:8080/v1#qwen2.5-7b-instruct")
    with pytest.raises(ContextOverflow) as caught:
        await model.respond(ask("long"))
    replay.assert_done()
    assert caught.value.status == 400
    assert caught.value.code == "exceed_context_size_error"
    assert caught.value.body["error"]["n_ctx"] == 8192


async def test_unknown_model_is_a_bad_request() -> None:
    replay = WireReplay(load("compat_error_not_found"))
    model = compat(replay, "http://localhost:11434/v1#llama3.3")
    with pytest.raises(BadRequest, match="not found"):
        await model.respond(ask("hi"))
    replay.assert_done()
    assert waits(model) == []


async def test_error_chunk_before_the_first_delta_is_retried() -> None:
    replay = WireReplay(load("compat_error_stream"))
    model = compat(replay, "https://openrouter.ai/api/v1#deepseek/deepseek-r1")
    deltas = await collect(model.stream(ModelRequest(messages=[])))
    replay.assert_done()
    assert len(waits(model)) == 1
    response = accumulate(deltas)
    assert response.message.text == "23."
    assert response.message.parts[0] == ThinkingPart(
        text="Primes between 20 and 30: 23 and 29.", provider_details={"field": "reasoning"}
    )


async def test_server_down_is_a_connection_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    model = compat(httpx.MockTransport(refuse), retry=RetryPolicy(max_attempts=2))
    with pytest.raises(ProviderConnectionError, match="Connection refused"):
        await model.respond(ask("hi"))
    assert len(waits(model)) == 1


async def test_cancellation_stops_a_stream() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"reasoning_content": "Let"}}]}
    transport = HangingStream(f"data: {json.dumps(chunk)}\n\n".encode())
    await cancel_midway(compat(transport), ask("hi"), transport)


# -- a run ---------------------------------------------------------------------------------


lookup_order = order_tool("Order {order_id}: shipped on Monday")


async def test_agent_run_through_the_runtime() -> None:
    replay = WireReplay(load("compat_agent"))
    agent = sr.Agent(
        name="support",
        instructions="You help customers with their orders.",
        model=compat(replay, "http://localhost:11434/v1#llama3.2"),
        tools=[lookup_order],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="t-1", input="Where is order 42?")
    replay.assert_done()
    assert result.status == "completed"
    assert result.text == "Order 42 shipped on Monday."
    assert [(c.provider_call_id, c.status) for c in result.calls] == [
        ("call_x1y2z3w4", "succeeded")
    ]


async def test_an_error_in_a_200_body_is_typed_and_retried() -> None:
    error = {"error": {"code": 503, "message": "upstream model is loading"}}
    answer = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi."},
                "finish_reason": "stop",
            }
        ]
    }
    replay = WireReplay(
        [
            {"request": {"path": "/v1/chat/completions"}, "response": {"json": error}},
            {"request": {"path": "/v1/chat/completions"}, "response": {"json": answer}},
        ]
    )
    model = compat(replay, "http://localhost:8080/v1#m")
    response = await model.respond(ask("hi"))
    replay.assert_done()
    assert response.message.text == "Hi."
    assert len(waits(model)) == 1


async def test_foreign_thinking_alone_is_left_out() -> None:
    exchange = load("compat_openrouter")[1]
    exchange["request"]["json"]["messages"] = [
        {"role": "user", "content": "Name a prime between 20 and 30."},
        {"role": "user", "content": "Another one?"},
    ]
    replay = WireReplay([exchange])
    history = [
        Message.user("Name a prime between 20 and 30."),
        Message(role="assistant", parts=[ThinkingPart(text="hmm", signature="sig-from-claude")]),
        Message.user("Another one?"),
    ]
    model = compat(replay, "https://openrouter.ai/api/v1#deepseek/deepseek-r1")
    await model.respond(ModelRequest(messages=history))
    replay.assert_done()
