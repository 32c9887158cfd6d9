from __future__ import annotations

import json
from enum import StrEnum

import pytest
from pydantic import BaseModel, Field

import steadyrun as sr
from steadyrun.chat import Message, ModelRequest, TextPart
from steadyrun.testing import FunctionModel, ScriptedModel, call, text, tool_calls


class Priority(StrEnum):
    low = "low"
    high = "high"


class Ticket(BaseModel):
    title: str
    priority: Priority
    tags: list[str] = Field(default_factory=list)


class NativeModel(ScriptedModel):
    """A fake model that claims native structured output."""

    supports_response_format = True


async def test_tool_path_validates_and_shows_errors_to_the_model() -> None:
    model = ScriptedModel(
        [
            tool_calls(call("final_result", {"title": "Refund", "priority": "urgent"})),
            tool_calls(call("final_result", {"title": "Refund", "priority": "high"})),
        ]
    )
    result = await sr.generate_object(model, Ticket, "Make a ticket.", "I was charged twice")
    assert result.value == Ticket(title="Refund", priority=Priority.high)
    assert (result.attempts, result.native, result.usage.requests) == (2, False, 2)
    first = model.requests[0]
    assert [t.name for t in first.tools] == ["final_result"]
    assert first.settings.tool_choice == "final_result"
    assert first.tools[0].parameters["properties"]["priority"]["$ref"]
    retry = model.requests[1].messages
    assert retry[-1].role == "tool" and "priority" in retry[-1].parts[0].content  # type: ignore[union-attr]


async def test_native_path_uses_response_format_and_parses_text() -> None:
    model = NativeModel(
        [text("not json"), text(json.dumps({"title": "Late", "priority": "low", "tags": ["x"]}))]
    )
    result = await sr.generate_object(model, Ticket, "Make a ticket.", "Where is my parcel?")
    assert result.value.tags == ["x"] and result.native and result.attempts == 2
    fmt = model.requests[0].settings.response_format
    assert fmt is not None and fmt.name == "Ticket" and fmt.schema["type"] == "object"
    assert model.requests[0].tools == []
    assert "not valid JSON" in model.requests[1].messages[-1].text


async def test_non_object_types_are_wrapped_for_the_tool() -> None:
    model = ScriptedModel([tool_calls(call("final_result", {"value": [3, 1, 2]}))])
    result = await sr.generate_object(model, list[int], "Numbers.", "three numbers")
    assert result.value == [3, 1, 2]
    assert model.requests[0].tools[0].parameters["required"] == ["value"]


async def test_bounded_retries_end_in_a_typed_error_with_usage() -> None:
    model = FunctionModel(lambda r: text("I refuse to call tools"))
    with pytest.raises(sr.StructuredOutputError) as err:
        await sr.generate_object(model, Ticket, "Make a ticket.", "x", retries=1)
    assert err.value.attempts == 2 and err.value.usage.requests == 2
    assert "final_result" in err.value.last_error
    with pytest.raises(sr.UsageError):
        await sr.generate_object(model, Ticket, "x", "y", retries=-1)


async def test_a_conversation_can_be_the_input() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> sr.ModelResponse:
        seen.append(request)
        return tool_calls(call("final_result", {"title": "t", "priority": "low"}))

    convo = [Message.user("hi"), Message(role="assistant", parts=[TextPart(text="hello")])]
    await sr.generate_object(FunctionModel(respond), Ticket, "Summarize as a ticket.", convo)
    assert [m.text for m in seen[0].messages] == ["hi", "hello"]
    assert seen[0].instructions == "Summarize as a ticket."
