"""Accumulating streamed deltas into the response a non-streaming call returns."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass, field
from typing import Any

from steadyrun._errors import ModelError
from steadyrun.chat._messages import (
    FinishReason,
    Message,
    ModelResponse,
    Part,
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)

__all__ = ["ResponseAccumulator", "accumulate", "accumulate_async", "deltas_of"]


@dataclass(slots=True)
class _Slot:
    part: str
    text: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    signature: str | None = None
    call_id: str | None = None
    name: str | None = None
    details: dict[str, Any] | None = None


class ResponseAccumulator:
    """Collects deltas by index; ``response()`` gives the finished ``ModelResponse``."""

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}
        self._finish: FinishReason | None = None
        self._usage = Usage()
        self._model_name: str | None = None
        self._details: dict[str, Any] | None = None

    def add(self, delta: ResponseDelta) -> None:
        """Take one delta."""
        if delta.part == "finish":
            if delta.finish_reason is not None:
                self._finish = delta.finish_reason
            if delta.usage is not None:
                self._usage = delta.usage
            if delta.model_name is not None:
                self._model_name = delta.model_name
            if delta.provider_details is not None:
                self._details = {**(self._details or {}), **delta.provider_details}
            return
        slot = self._slots.get(delta.index)
        if slot is None:
            slot = self._slots[delta.index] = _Slot(part=delta.part)
        elif slot.part != delta.part:
            raise ModelError(
                f"stream delta at index {delta.index} switched from {slot.part} to {delta.part}"
            )
        slot.text.append(delta.text)
        slot.arguments.append(delta.arguments)
        if delta.signature is not None:
            slot.signature = delta.signature
        if delta.provider_details is not None:
            slot.details = {**(slot.details or {}), **delta.provider_details}
        slot.call_id = delta.call_id or slot.call_id
        slot.name = delta.name or slot.name

    def response(self) -> ModelResponse:
        """The response the deltas add up to."""
        if self._finish is None:
            raise ModelError("stream ended without a finish delta")
        parts: list[Part] = []
        for index in sorted(self._slots):
            slot = self._slots[index]
            if slot.part == "text":
                parts.append(TextPart(text="".join(slot.text)))
            elif slot.part == "thinking":
                parts.append(
                    ThinkingPart(
                        text="".join(slot.text),
                        signature=slot.signature,
                        provider_details=slot.details,
                    )
                )
            else:
                if not slot.call_id or not slot.name:
                    raise ModelError(f"streamed tool call at index {index} has no id or name")
                parts.append(
                    ToolCallPart(
                        call_id=slot.call_id,
                        name=slot.name,
                        arguments="".join(slot.arguments) or "{}",
                        provider_details=slot.details,
                    )
                )
        return ModelResponse(
            message=Message(role="assistant", parts=parts),
            finish_reason=self._finish,
            usage=self._usage,
            model_name=self._model_name,
            provider_details=self._details,
        )


def accumulate(deltas: Iterable[ResponseDelta]) -> ModelResponse:
    """Add up a finished stream of deltas."""
    acc = ResponseAccumulator()
    for delta in deltas:
        acc.add(delta)
    return acc.response()


async def accumulate_async(deltas: AsyncIterable[ResponseDelta]) -> ModelResponse:
    """Add up an async stream of deltas."""
    acc = ResponseAccumulator()
    async for delta in deltas:
        acc.add(delta)
    return acc.response()


def deltas_of(response: ModelResponse, *, chunk: int = 0) -> list[ResponseDelta]:
    """Split a response into deltas that accumulate back to it.

    Args:
        response: The response to split.
        chunk: Characters per text/arguments fragment; 0 keeps each part whole.
    """

    def pieces(s: str) -> list[str]:
        if chunk <= 0 or not s:
            return [s]
        return [s[i : i + chunk] for i in range(0, len(s), chunk)]

    out: list[ResponseDelta] = []
    for index, part in enumerate(response.message.parts):
        if isinstance(part, TextPart):
            out += [ResponseDelta(part="text", index=index, text=p) for p in pieces(part.text)]
        elif isinstance(part, ThinkingPart):
            frags = pieces(part.text)
            out += [
                ResponseDelta(
                    part="thinking",
                    index=index,
                    text=p,
                    signature=part.signature if i == len(frags) - 1 else None,
                    provider_details=part.provider_details if i == len(frags) - 1 else None,
                )
                for i, p in enumerate(frags)
            ]
        elif isinstance(part, ToolCallPart):
            frags = pieces(part.arguments)
            out += [
                ResponseDelta(
                    part="tool_call",
                    index=index,
                    call_id=part.call_id if i == 0 else None,
                    name=part.name if i == 0 else None,
                    arguments=p,
                    provider_details=part.provider_details if i == 0 else None,
                )
                for i, p in enumerate(frags)
            ]
    out.append(
        ResponseDelta(
            part="finish",
            finish_reason=response.finish_reason,
            usage=response.usage,
            model_name=response.model_name,
            provider_details=response.provider_details,
        )
    )
    return out
