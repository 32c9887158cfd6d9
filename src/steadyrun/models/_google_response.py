"""Gemini responses to steadyrun deltas: one mapper for streamed chunks and whole responses.

A non-streaming ``GenerateContentResponse`` is fed to the same ``ResponseMapper`` as the chunks
of a stream and the deltas are accumulated, so ``stream()`` adds up to exactly what
``respond()`` returns for the same answer. Rules, the same in both modes:

- consecutive text parts (or thought parts) join into one ``TextPart`` (``ThinkingPart``);
- a thought part that carries a ``thoughtSignature`` ends its ``ThinkingPart``, which keeps the
  signature (base64);
- a signature on a plain text part (Gemini puts it on the answer's last part, or on an empty
  text part at the end of a stream) becomes an empty ``ThinkingPart`` after the text, marked
  ``carrier="text"``, so the request mapping puts it back on that text part;
- a ``functionCall`` becomes a ``ToolCallPart`` with its ``args`` object as compact JSON text
  (key order as received); a call without an id gets ``call_<n>`` (n counts the response's
  calls) and ``generated_id=True``, so the id is never sent back to Gemini; its signature is kept
  in ``provider_details["thought_signature"]``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Literal

from google.genai import types

from steadyrun.chat import FinishReason, ModelResponse, ResponseDelta, Usage, accumulate

__all__ = [
    "PROVIDER",
    "ResponseMapper",
    "decode_signature",
    "encode_signature",
    "response_from",
]

PROVIDER = "google"
"""The ``provider`` value in ``provider_details`` of parts this adapter produced."""

_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "LANGUAGE",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id")


def encode_signature(signature: bytes) -> str:
    """A thought signature as the base64 text kept in steadyrun parts."""
    return base64.b64encode(signature).decode("ascii")


def decode_signature(text: str) -> bytes:
    """The bytes of a kept thought signature (standard or URL-safe base64)."""
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_")


def _enum_text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def finish_reason_for(raw: str | None, *, has_calls: bool, blocked: bool) -> FinishReason:
    """Our finish reason for Gemini's ``finishReason`` (``None``: the candidate gave none)."""
    if raw is None:
        return "content_filter" if blocked else ("tool_calls" if has_calls else "stop")
    if raw == "STOP":
        return "tool_calls" if has_calls else "stop"
    if raw in ("MAX_TOKENS", "CONTINUATION"):
        return "length"
    if raw in _CONTENT_FILTER:
        return "content_filter"
    return "error"  # MALFORMED_FUNCTION_CALL, OTHER, UNEXPECTED_TOOL_CALL, unknown reasons...


def usage_from(meta: types.GenerateContentResponseUsageMetadata | None) -> Usage:
    """Our usage for Gemini's ``usageMetadata`` (output includes thinking tokens)."""
    if meta is None:
        return Usage(requests=1)
    thoughts = meta.thoughts_token_count or 0
    return Usage(
        requests=1,
        input_tokens=(meta.prompt_token_count or 0) + (meta.tool_use_prompt_token_count or 0),
        output_tokens=(meta.candidates_token_count or 0) + thoughts,
        cache_read_tokens=meta.cached_content_token_count or 0,
        reasoning_tokens=thoughts,
    )


def request_id_from(headers: Mapping[str, str] | None) -> str | None:
    """The request id among response headers, if the service sent one."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in _REQUEST_ID_HEADERS:
        if lowered.get(name):
            return lowered[name]
    return None


class ResponseMapper:
    """Turns Gemini responses (whole, or stream chunks in order) into ``ResponseDelta``s."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._next_index = 0
        self._open: Literal["text", "thinking"] | None = None
        self._open_index = 0
        self._calls = 0
        self._saw_candidate = False
        self._finish_raw: str | None = None
        self._finish_message: str | None = None
        self._block_reason: str | None = None
        self._block_message: str | None = None
        self._usage: types.GenerateContentResponseUsageMetadata | None = None
        self._model_version: str | None = None
        self._response_id: str | None = None
        self._request_id: str | None = None

    def feed(self, chunk: types.GenerateContentResponse) -> list[ResponseDelta]:
        """The deltas of one response or stream chunk."""
        if chunk.sdk_http_response is not None:
            self._request_id = request_id_from(chunk.sdk_http_response.headers) or self._request_id
        self._response_id = chunk.response_id or self._response_id
        self._model_version = chunk.model_version or self._model_version
        if chunk.usage_metadata is not None:
            self._usage = chunk.usage_metadata
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self._block_reason = _enum_text(feedback.block_reason)
            self._block_message = feedback.block_reason_message
        if not chunk.candidates:
            return []
        candidate = chunk.candidates[0]
        self._saw_candidate = True
        if candidate.finish_reason is not None:
            self._finish_raw = _enum_text(candidate.finish_reason)
        if candidate.finish_message:
            self._finish_message = candidate.finish_message
        out: list[ResponseDelta] = []
        if candidate.content is not None:
            for part in candidate.content.parts or []:
                out += self._part(part)
        return out

    def _new_index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _part(self, part: types.Part) -> list[ResponseDelta]:
        signature = encode_signature(part.thought_signature) if part.thought_signature else None
        if part.function_call is not None:
            return [self._call(part.function_call, signature)]
        if part.text is None and not part.thought:
            self._open = None  # code execution, inline data...: not mapped; ends the open part
            return []
        text = part.text or ""
        if part.thought:
            if not text and signature is None:
                return []
            details: dict[str, Any] | None = None
            if self._open != "thinking":
                self._open, self._open_index = "thinking", self._new_index()
                details = {"provider": PROVIDER, "carrier": "thought"}
            delta = ResponseDelta(
                part="thinking",
                index=self._open_index,
                text=text,
                signature=signature,
                provider_details=details,
            )
            if signature is not None:
                self._open = None
            return [delta]
        out: list[ResponseDelta] = []
        if text:
            if self._open != "text":
                self._open, self._open_index = "text", self._new_index()
            out.append(ResponseDelta(part="text", index=self._open_index, text=text))
        if signature is not None:
            out.append(
                ResponseDelta(
                    part="thinking",
                    index=self._new_index(),
                    signature=signature,
                    provider_details={"provider": PROVIDER, "carrier": "text"},
                )
            )
            self._open = None
        return out

    def _call(self, call: types.FunctionCall, signature: str | None) -> ResponseDelta:
        self._open = None
        details: dict[str, Any] = {"provider": PROVIDER}
        if call.id:
            call_id = call.id
        else:
            call_id = f"call_{self._calls}"
            details["generated_id"] = True
        if signature is not None:
            details["thought_signature"] = signature
        self._calls += 1
        arguments = json.dumps(call.args or {}, ensure_ascii=False, separators=(",", ":"))
        return ResponseDelta(
            part="tool_call",
            index=self._new_index(),
            call_id=call_id,
            name=call.name or "",
            arguments=arguments,
            provider_details=details,
        )

    def finish(self) -> ResponseDelta:
        """The closing ``finish`` delta: finish reason, usage, model and details."""
        blocked = self._block_reason is not None
        if not self._saw_candidate and not blocked:
            reason: FinishReason = "error"
        else:
            reason = finish_reason_for(self._finish_raw, has_calls=self._calls > 0, blocked=blocked)
        details: dict[str, Any] = {
            "response_id": self._response_id,
            "request_id": self._request_id or self._response_id,
            "finish_reason": self._finish_raw,
            "finish_message": self._finish_message,
            "block_reason": self._block_reason,
            "block_reason_message": self._block_message,
        }
        return ResponseDelta(
            part="finish",
            finish_reason=reason,
            usage=usage_from(self._usage),
            model_name=self._model_version or self._model,
            provider_details={k: v for k, v in details.items() if v is not None},
        )


def response_from(response: types.GenerateContentResponse, model: str) -> ModelResponse:
    """The ``ModelResponse`` for a whole (non-streamed) Gemini response."""
    mapper = ResponseMapper(model)
    deltas = mapper.feed(response)
    deltas.append(mapper.finish())
    return accumulate(deltas)
