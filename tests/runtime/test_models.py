from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun.chat import ModelRequest, accumulate_async
from steadyrun.models import (
    StreamingModelClient,
    check_model_requests_allowed,
    model_requests_allowed,
    stream_response,
)
from steadyrun.testing import FunctionModel, ScriptedModel, call, text, tool_calls


async def test_scripted_model_records_requests_and_fails_clearly_when_exhausted() -> None:
    model = ScriptedModel([text("one")])
    req = ModelRequest(messages=[sr.Message.user("hello")])
    assert (await model.respond(req)).message.text == "one"
    assert model.requests == [req]
    model.assert_complete()
    with pytest.raises(sr.ScriptExhaustedError, match="asked for response 2"):
        await model.respond(req)


async def test_assert_complete_fails_when_steps_are_left() -> None:
    model = ScriptedModel([text("one"), text("two")])
    with pytest.raises(AssertionError, match="1 of 2"):
        await model.respond(ModelRequest())
        model.assert_complete()


async def test_scripted_exception_and_function_steps() -> None:
    model = ScriptedModel([ValueError("boom"), lambda r: text(f"{len(r.messages)} messages")])
    with pytest.raises(ValueError):
        await model.respond(ModelRequest())
    assert (await model.respond(ModelRequest())).message.text == "0 messages"


async def test_streams_accumulate_to_the_same_response() -> None:
    response = tool_calls(call("lookup", {"id": "x" * 20}), content="Looking it up")
    scripted = ScriptedModel([response, response])
    assert isinstance(scripted, StreamingModelClient)
    streamed = await accumulate_async(scripted.stream(ModelRequest()))
    assert streamed == await scripted.respond(ModelRequest())
    fn = FunctionModel(lambda r: response)
    assert await stream_response(fn, ModelRequest()) == response


async def test_a_run_on_function_model_with_async_function() -> None:
    async def answer(request: ModelRequest) -> sr.ModelResponse:
        return text(f"you said {request.messages[-1].text}")

    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=FunctionModel(answer)), run_id="r", input="hi"
    )
    assert result.text == "you said hi"


def test_real_model_requests_are_blocked_in_the_test_suite() -> None:
    assert not model_requests_allowed()
    with pytest.raises(sr.UsageError, match="blocked"):
        check_model_requests_allowed("openai")


def test_network_beyond_loopback_is_blocked() -> None:
    import socket

    with socket.socket() as s, pytest.raises(RuntimeError, match="network"):
        s.connect(("192.0.2.1", 80))
