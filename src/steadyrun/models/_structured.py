"""``generate_object``: a validated pydantic object from one model, without a run.

Where the model's client supports native structured output (``supports_response_format``), the
schema goes in ``ModelSettings.response_format`` and the answer text is parsed; otherwise the
model is made to call one tool whose parameters are the schema. A value that fails validation
is shown to the model with the error, a bounded number of times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from steadyrun._errors import ModelError, UsageError
from steadyrun.chat import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ResponseFormat,
    TextPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
)
from steadyrun.models._client import ModelClient
from steadyrun.models._registry import resolve_model

__all__ = ["StructuredOutputError", "StructuredResult", "generate_object"]

T = TypeVar("T")

TOOL_NAME = "final_result"


class StructuredOutputError(ModelError):
    """The model did not produce a valid value within the allowed attempts.

    Attributes:
        attempts: How many answers the model gave.
        last_error: What was wrong with the last one.
        usage: Tokens spent on all attempts.
    """

    def __init__(self, message: str, *, attempts: int, last_error: str, usage: Usage) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error
        self.usage = usage


@dataclass(kw_only=True, slots=True)
class StructuredResult(Generic[T]):
    """A validated value and what it cost.

    Attributes:
        value: The validated object.
        usage: Tokens of every attempt together.
        attempts: Model calls made (1 when the first answer was valid).
        native: Whether the provider's native structured output was used (else a tool call).
    """

    value: T
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    native: bool = False


async def generate_object(
    model: str | ModelClient,
    output_type: type[T],
    instruction: str,
    input: str | list[Message],
    *,
    retries: int = 2,
    settings: ModelSettings | None = None,
) -> StructuredResult[T]:
    """Ask ``model`` for one value of ``output_type`` and validate it.

    Args:
        model: A ``"provider:model"`` spec or a client.
        output_type: A pydantic model, dataclass, or any type pydantic can validate.
        instruction: The system instruction (what to produce).
        input: The user's text, or a conversation.
        retries: Extra attempts after an invalid answer (each shows the model the error).
        settings: Other call options (temperature, max tokens...).

    Raises:
        StructuredOutputError: No valid value after ``1 + retries`` answers.
    """
    if retries < 0:
        raise UsageError("retries must be 0 or more")
    client = resolve_model(model)
    adapter: TypeAdapter[T] = TypeAdapter(output_type)
    schema = adapter.json_schema()
    wrapped = schema.get("type") != "object"  # tools take objects: wrap other types
    tool_schema = (
        {"type": "object", "properties": {"value": schema}, "required": ["value"]}
        if wrapped
        else schema
    )
    name = getattr(output_type, "__name__", "output")
    native = bool(getattr(client, "supports_response_format", False))
    base = settings or ModelSettings()
    if native:
        call_settings = _with(base, response_format=ResponseFormat(name=name, schema=schema))
        tools: list[ToolDefinition] = []
    else:
        call_settings = _with(base, tool_choice=TOOL_NAME)
        tools = [
            ToolDefinition(
                name=TOOL_NAME,
                description=f"Give the final result: one {name}.",
                parameters=tool_schema,
            )
        ]
    messages = [Message.user(input)] if isinstance(input, str) else list(input)
    usage = Usage()
    error = ""
    for attempt in range(1, retries + 2):
        request = ModelRequest(
            instructions=instruction, messages=list(messages), tools=tools, settings=call_settings
        )
        response = await client.respond(request)
        usage = usage + response.usage
        try:
            raw = _raw_value(response, native=native, wrapped=wrapped)
            value = adapter.validate_python(raw)
        except (ValueError, ValidationError) as exc:
            error = str(exc)
            messages += _feedback(response, error, native=native)
            continue
        return StructuredResult(value=value, usage=usage, attempts=attempt, native=native)
    raise StructuredOutputError(
        f"no valid {name} after {retries + 1} answer(s); last problem: {error}",
        attempts=retries + 1,
        last_error=error,
        usage=usage,
    )


def _with(settings: ModelSettings, **changes: Any) -> ModelSettings:
    return replace(settings, **changes)


def _raw_value(response: ModelResponse, *, native: bool, wrapped: bool) -> Any:
    if native:
        text = response.message.text.strip()
        if not text:
            raise ValueError("the answer was empty; answer with the JSON value only")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the answer is not valid JSON: {exc}") from exc
    calls = [c for c in response.message.tool_calls if c.name == TOOL_NAME]
    if not calls:
        raise ValueError(f"no call to {TOOL_NAME}; call it with the result")
    try:
        args = json.loads(calls[0].arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not valid JSON: {exc}") from exc
    if wrapped:
        if not isinstance(args, dict) or "value" not in args:
            raise ValueError('the arguments must be {"value": ...}')
        return args["value"]
    return args


def _feedback(response: ModelResponse, error: str, *, native: bool) -> list[Message]:
    """The model's invalid answer and what was wrong with it, for the next attempt."""
    problem = f"That was not valid: {error}. Answer again, fixing it."
    calls = response.message.tool_calls
    if native or not calls:
        return [response.message, Message(role="user", parts=[TextPart(text=problem)])]
    results = [
        ToolResultPart(call_id=c.call_id, name=c.name, content=problem, is_error=True)
        for c in calls
    ]
    return [response.message, Message(role="tool", parts=list(results))]
