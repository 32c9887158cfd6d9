"""Provider-neutral chat types, their versioned JSON codec and stream accumulation."""

from __future__ import annotations

from typing import Any, TypeVar

from steadyrun._codec import FORMAT, decode, encode
from steadyrun.chat._messages import (
    FinishReason,
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Part,
    ResponseDelta,
    ResponseFormat,
    Role,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolChoice,
    ToolDefinition,
    ToolResultPart,
    Usage,
)
from steadyrun.chat._stream import ResponseAccumulator, accumulate, accumulate_async, deltas_of

__all__ = [
    "FORMAT",
    "FinishReason",
    "MediaPart",
    "MediaRef",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Part",
    "ResponseAccumulator",
    "ResponseDelta",
    "ResponseFormat",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolChoice",
    "ToolDefinition",
    "ToolResultPart",
    "Usage",
    "accumulate",
    "accumulate_async",
    "deltas_of",
    "dumps",
    "loads",
]

T = TypeVar("T")


def dumps(obj: Any, tp: Any | None = None) -> bytes:
    """Encode a chat value (message, request, response, delta, list of them) as versioned JSON."""
    return encode(obj, tp)


def loads(raw: bytes | str, tp: type[T]) -> T:
    """Decode versioned JSON written by ``dumps``; unknown format versions are refused."""
    return decode(raw, tp)
