"""Turning Messages API stream events into steadyrun deltas.

Each content block keeps its API ``index`` as the delta index, so the deltas accumulate to the
parts ``respond`` gives for the same answer. A tool call is announced (id and name) when its
block starts; its arguments come as they are typed, each piece re-written (``JsonRewriter``) so
that they join to the text a whole response gives (``json.dumps`` of the parsed input).
"""

from __future__ import annotations

from typing import Any

from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    RefusalStopDetails,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)

from steadyrun.chat import ResponseDelta
from steadyrun.models._anthropic_convert import (
    arguments_text,
    finish_reason,
    provider_details,
    usage_from,
)
from steadyrun.models._json_rewrite import JsonRewriter

__all__ = ["StreamState"]


class StreamState:
    """Follows one streamed answer; ``feed`` gives the deltas each event adds.

    Attributes:
        done: The ``message_stop`` event arrived (the finish delta has been given).
        request_id: The ``request-id`` header of the response.
    """

    def __init__(self, request_id: str | None) -> None:
        self.done = False
        self.request_id = request_id
        self._response_id: str | None = None
        self._model: str | None = None
        self._usage: dict[str, int | None] = {}
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._stop_details: RefusalStopDetails | None = None
        self._signatures: dict[int, str] = {}
        self._tool_input: dict[int, tuple[dict[str, Any], JsonRewriter]] = {}
        self._has_tool_calls = False
        self._unmapped: list[str] = []

    def feed(self, event: RawMessageStreamEvent) -> list[ResponseDelta]:
        """The deltas of one event (often none)."""
        if isinstance(event, RawMessageStartEvent):
            message = event.message
            self._response_id, self._model = message.id, message.model
            usage = message.usage
            details = usage.output_tokens_details
            self._usage = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read": usage.cache_read_input_tokens,
                "cache_write": usage.cache_creation_input_tokens,
                "thinking": details.thinking_tokens if details is not None else None,
            }
            return []
        if isinstance(event, RawContentBlockStartEvent):
            return self._start(event)
        if isinstance(event, RawContentBlockDeltaEvent):
            return self._delta(event)
        if isinstance(event, RawContentBlockStopEvent):
            return self._stop(event.index)
        if isinstance(event, RawMessageDeltaEvent):
            self._stop_reason = event.delta.stop_reason
            self._stop_sequence = event.delta.stop_sequence
            self._stop_details = event.delta.stop_details
            delta_usage = event.usage  # cumulative counts; absent ones keep message_start's
            delta_details = delta_usage.output_tokens_details
            for key, value in (
                ("input_tokens", delta_usage.input_tokens),
                ("output_tokens", delta_usage.output_tokens),
                ("cache_read", delta_usage.cache_read_input_tokens),
                ("cache_write", delta_usage.cache_creation_input_tokens),
                ("thinking", delta_details.thinking_tokens if delta_details else None),
            ):
                if value is not None:
                    self._usage[key] = value
            return []
        if isinstance(event, RawMessageStopEvent):
            self.done = True
            return [self._finish()]
        return []

    def _start(self, event: RawContentBlockStartEvent) -> list[ResponseDelta]:
        index, block = event.index, event.content_block
        if isinstance(block, TextBlock):
            return [ResponseDelta(part="text", index=index, text=block.text)]
        if isinstance(block, ThinkingBlock):
            self._signatures[index] = block.signature or ""
            return [
                ResponseDelta(
                    part="thinking",
                    index=index,
                    text=block.thinking,
                    signature=block.signature or None,
                )
            ]
        if isinstance(block, RedactedThinkingBlock):
            return [
                ResponseDelta(
                    part="thinking", index=index, provider_details={"redacted": block.data}
                )
            ]
        if isinstance(block, ToolUseBlock):
            self._has_tool_calls = True
            self._tool_input[index] = (dict(block.input), JsonRewriter())
            return [ResponseDelta(part="tool_call", index=index, call_id=block.id, name=block.name)]
        self._unmapped.append(str(getattr(block, "type", type(block).__name__)))
        return []

    def _delta(self, event: RawContentBlockDeltaEvent) -> list[ResponseDelta]:
        index, delta = event.index, event.delta
        if isinstance(delta, TextDelta):
            return [ResponseDelta(part="text", index=index, text=delta.text)]
        if isinstance(delta, ThinkingDelta):
            return [ResponseDelta(part="thinking", index=index, text=delta.thinking)]
        if isinstance(delta, SignatureDelta):
            signature = self._signatures.get(index, "") + delta.signature
            self._signatures[index] = signature
            return [ResponseDelta(part="thinking", index=index, signature=signature or None)]
        if isinstance(delta, InputJSONDelta) and index in self._tool_input:
            arguments = self._tool_input[index][1].feed(delta.partial_json)
            if arguments:
                return [ResponseDelta(part="tool_call", index=index, arguments=arguments)]
        return []  # citations are not mapped

    def _stop(self, index: int) -> list[ResponseDelta]:
        tool = self._tool_input.pop(index, None)
        if tool is None:
            return []
        start_input, rewriter = tool
        # Nothing typed: the input came whole with the block's start (or is empty).
        rest = rewriter.close() if rewriter.fed else arguments_text(start_input)
        return [ResponseDelta(part="tool_call", index=index, arguments=rest)] if rest else []

    def _finish(self) -> ResponseDelta:
        usage = self._usage
        return ResponseDelta(
            part="finish",
            finish_reason=finish_reason(self._stop_reason, self._has_tool_calls),
            usage=usage_from(
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                cache_read=usage.get("cache_read"),
                cache_write=usage.get("cache_write"),
                thinking=usage.get("thinking"),
            ),
            model_name=self._model,
            provider_details=provider_details(
                request_id=self.request_id,
                response_id=self._response_id,
                stop_reason=self._stop_reason,
                stop_sequence=self._stop_sequence,
                stop_details=self._stop_details,
                unmapped=self._unmapped,
            ),
        )
