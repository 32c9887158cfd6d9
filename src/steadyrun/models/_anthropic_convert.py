"""Mapping steadyrun requests to Anthropic Messages API requests, and responses back."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any

from anthropic.types import (
    Message as AnthropicMessage,
)
from anthropic.types import (
    RedactedThinkingBlock,
    RefusalStopDetails,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

from steadyrun._errors import UsageError
from steadyrun.chat import (
    FinishReason,
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
)
from steadyrun.media._supply import supplied_bytes, supplied_url
from steadyrun.models._errors import reading_response

__all__ = [
    "COUNT_FIELDS",
    "DEFAULT_MAX_TOKENS",
    "MediaAccess",
    "arguments_text",
    "build_params",
    "check_settings",
    "count_params",
    "finish_reason",
    "merge_settings",
    "provider_details",
    "response_from_message",
    "usage_from",
]

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the call nor the model's defaults set it (the API requires one)."""

ADAPTIVE_THINKING_MAX_TOKENS = 16384
"""``max_tokens`` by default with ``thinking={"type": "adaptive"}``: thinking counts against it."""

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_MIME_ALIASES = {"image/jpg": "image/jpeg"}
PDF = "application/pdf"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    # A server-side tool loop was paused: the answer is unfinished and must be sent back to
    # continue. steadyrun treats it like a cut answer ("length"); the raw reason stays in
    # provider_details["stop_reason"].
    "pause_turn": "length",
    "refusal": "content_filter",
}


@dataclass(frozen=True, slots=True)
class MediaAccess:
    """How media bytes or URLs are obtained for a request.

    Attributes:
        reader: Returns the bytes of a ``MediaRef`` (sent base64-encoded).
        url: Returns a URL the provider can fetch, or ``None``; tried before ``reader``.
    """

    reader: Callable[[MediaRef], Awaitable[bytes]] | None = None
    url: Callable[[MediaRef], Awaitable[str | None]] | None = None


# -- settings -------------------------------------------------------------------------------


def merge_settings(defaults: ModelSettings, given: ModelSettings) -> ModelSettings:
    """``given`` over ``defaults``: a field set in the call wins; ``extra`` dicts are merged."""
    values: dict[str, Any] = {}
    for f in fields(ModelSettings):
        value = getattr(given, f.name)
        values[f.name] = value if value is not None else getattr(defaults, f.name)
    if defaults.extra and given.extra:
        values["extra"] = {**defaults.extra, **given.extra}
    return ModelSettings(**values)


def _default_max_tokens(extra: dict[str, Any]) -> int:
    thinking = extra.get("thinking")
    if isinstance(thinking, dict):
        budget = thinking.get("budget_tokens")
        if thinking.get("type") == "enabled" and isinstance(budget, int):
            return budget + DEFAULT_MAX_TOKENS
        if thinking.get("type") == "adaptive":
            return ADAPTIVE_THINKING_MAX_TOKENS
    return DEFAULT_MAX_TOKENS


def check_settings(settings: ModelSettings) -> None:
    """Raise ``UsageError`` for settings the Messages API cannot take.

    ``response_format`` is not mapped (``supports_response_format`` is ``False``), and API
    version 2026-10-21 has no ``temperature``.
    """
    if settings.response_format is not None:
        raise UsageError(
            "AnthropicModel does not support ModelSettings.response_format "
            "(supports_response_format is False): use generate_object(), which falls back to a "
            "forced tool call, or pass the API's own option through "
            "extra={'output_config': {'format': {'type': 'json_schema', 'schema': ...}}}"
        )
    if settings.temperature is not None:
        raise UsageError(
            "the Anthropic Messages API (anthropic-version 2026-10-21, sent by the anthropic SDK "
            "2.x) has no sampling parameters and answers 400 to 'temperature'; remove "
            "ModelSettings.temperature, or pass extra={'temperature': ...} to an endpoint that "
            "still takes it"
        )


async def build_params(
    model: str, request: ModelRequest, settings: ModelSettings, media: MediaAccess
) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream``).

    Raises:
        UsageError: For settings the Messages API cannot take (``response_format``,
            ``temperature``), a ``tool_choice`` naming no given tool, parts a role cannot hold,
            and media that cannot be sent.
    """
    check_settings(settings)
    extra = dict(settings.extra or {})
    system, turns = await _messages(request.messages, media)
    if request.instructions:
        system.insert(0, request.instructions)
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": settings.max_tokens
        if settings.max_tokens is not None
        else _default_max_tokens(extra),
        "messages": turns,
    }
    if len(system) == 1:
        params["system"] = system[0]
    elif system:
        params["system"] = [{"type": "text", "text": text} for text in system]
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
    choice = _tool_choice(settings.tool_choice, settings.parallel_tool_calls, request.tools)
    if choice is not None:
        params["tool_choice"] = choice
    if settings.stop:
        params["stop_sequences"] = list(settings.stop)
    if extra:
        params["extra_body"] = extra
    return params


COUNT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "cache_control",
        "speed",
    }
)
"""The body fields ``POST /v1/messages/count_tokens`` takes (the SDK's ``count_tokens``)."""


def count_params(params: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.count_tokens`` from those of ``build_params``.

    Keeps what the count endpoint takes (``COUNT_FIELDS``), from the mapped request and from
    ``extra`` alike (``thinking``, ``output_config``...), and drops what only generation takes:
    ``max_tokens``, ``stop_sequences``, ``stream`` and ``extra`` options such as ``metadata``,
    ``service_tier`` or sampling parameters.
    """
    out = {key: value for key, value in params.items() if key in COUNT_FIELDS}
    extra: dict[str, Any] = params.get("extra_body") or {}
    kept = {key: value for key, value in extra.items() if key in COUNT_FIELDS}
    if kept:
        out["extra_body"] = kept
    return out


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    param: dict[str, Any] = {
        "name": tool.name,
        "input_schema": tool.parameters or {"type": "object", "properties": {}},
    }
    if tool.description:
        param["description"] = tool.description
    if tool.strict:
        param["strict"] = True
    return param


def _tool_choice(
    choice: str | None, parallel: bool | None, tools: list[ToolDefinition]
) -> dict[str, Any] | None:
    if not tools:
        if choice in (None, "auto", "none"):
            return None  # the API takes no tool_choice without tools
        raise UsageError(f"tool_choice={choice!r} needs tools, but the request has none")
    if choice is None and parallel is not False:
        return None
    if choice == "none":
        return {"type": "none"}
    result: dict[str, Any]
    if choice is None or choice == "auto":
        result = {"type": "auto"}
    elif choice == "required":
        result = {"type": "any"}
    else:
        names = sorted(t.name for t in tools)
        if choice not in names:
            raise UsageError(f"tool_choice {choice!r} names no tool of the request; tools: {names}")
        result = {"type": "tool", "name": choice}
    if parallel is False:
        result["disable_parallel_tool_use"] = True
    return result


# -- messages -------------------------------------------------------------------------------


async def _messages(
    messages: list[Message], media: MediaAccess
) -> tuple[list[str], list[dict[str, Any]]]:
    """System texts that lead the conversation, and the turns with same-role runs merged."""
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        role: str
        if message.role == "system":
            texts = _system_texts(message)
            if not turns:
                system += texts
                continue
            role, blocks = "system", [{"type": "text", "text": t} for t in texts]
        elif message.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(message)
        else:  # user, and tool results (which the API takes in a user turn)
            role, blocks = "user", await _user_blocks(message, media)
        if not blocks:
            continue  # the API refuses empty turns
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out = []
    for role, blocks in turns:
        if role == "user":  # tool results must open the user turn that answers the calls
            blocks = [b for b in blocks if b["type"] == "tool_result"] + [
                b for b in blocks if b["type"] != "tool_result"
            ]
        out.append({"role": role, "content": blocks})
    return system, out


def _system_texts(message: Message) -> list[str]:
    texts = []
    for part in message.parts:
        if not isinstance(part, TextPart):
            raise UsageError(f"a system message may hold only text for Anthropic, got {part.kind}")
        if part.text:
            texts.append(part.text)
    return texts


def _wrong_part(role: str, part: Part) -> UsageError:
    return UsageError(f"a {role} message cannot hold a {part.kind} part for Anthropic")


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            block = _thinking_block(part)
            if block is not None:
                blocks.append(block)
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.call_id,
                    "name": part.name,
                    "input": _arguments_object(part.arguments),
                }
            )
        else:
            raise _wrong_part("assistant", part)
    return blocks


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    """The block to send back unchanged; ``None`` for thinking the API cannot verify."""
    redacted = (part.provider_details or {}).get("redacted")
    if isinstance(redacted, str):
        return {"type": "redacted_thinking", "data": redacted}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None  # unsigned (another provider's, or cut off): the API would refuse it


def _arguments_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    # tool_use input must be an object; keep what the model wrote so it can see its mistake.
    return {"_raw_arguments": arguments}


async def _user_blocks(message: Message, media: MediaAccess) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, MediaPart):
            blocks.append(await _media_block(part.ref, media))
        elif isinstance(part, ToolResultPart):
            blocks.append(await _tool_result_block(part, media))
        else:
            raise _wrong_part(message.role, part)
    return blocks


async def _tool_result_block(part: ToolResultPart, media: MediaAccess) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
    if part.media:
        content: list[dict[str, Any]] = []
        if part.content:
            content.append({"type": "text", "text": part.content})
        for ref in part.media:
            content.append(await _media_block(ref, media))
        block["content"] = content
    elif part.content:
        block["content"] = part.content
    if part.is_error:
        block["is_error"] = True
    return block


async def _media_block(ref: MediaRef, media: MediaAccess) -> dict[str, Any]:
    mime = _MIME_ALIASES.get(ref.mime.lower(), ref.mime.lower())
    if mime in IMAGE_TYPES:
        kind = "image"
    elif mime == PDF:
        kind = "document"
    else:
        raise UsageError(
            f"media {ref.key!r} has MIME type {ref.mime!r}; Anthropic takes images "
            f"({', '.join(IMAGE_TYPES)}) and PDFs ({PDF})"
        )
    supplied = supplied_url(ref)
    if supplied:
        return {"type": kind, "source": {"type": "url", "url": supplied}}
    if media.url is not None:
        url = await media.url(ref)
        if url:
            return {"type": kind, "source": {"type": "url", "url": url}}
    data = supplied_bytes(ref)  # read and checked by the runtime for this call
    if data is not None:
        encoded = base64.b64encode(data).decode("ascii")
        return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": encoded}}
    if media.reader is None:
        raise UsageError(
            f"the request holds media ({ref.key!r}) but AnthropicModel has no way to read it: "
            "pass media_reader=async (MediaRef) -> bytes (or media_url=async (MediaRef) -> URL)"
        )
    data = await media.reader(ref)
    if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256.lower():
        raise UsageError(
            f"media {ref.key!r}: the bytes the media_reader returned do not match the "
            "MediaRef's sha256; refusing to send them to the model"
        )
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": encoded}}


# -- responses ------------------------------------------------------------------------------


def arguments_text(arguments: object) -> str:
    """Tool-call arguments as JSON text, the same for a whole response and a stream."""
    return json.dumps(arguments, ensure_ascii=False)


def finish_reason(stop_reason: str | None, has_tool_calls: bool) -> FinishReason:
    """Our finish reason for Anthropic's ``stop_reason``."""
    if stop_reason is None or stop_reason == "end_turn":
        # tool_use blocks always come with stop_reason "tool_use"; be safe if they do not.
        return "tool_calls" if has_tool_calls else "stop"
    return _FINISH.get(stop_reason, "error")


def usage_from(
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_write: int | None,
    thinking: int | None,
) -> Usage:
    """Our usage: ``input_tokens`` includes the cached prompt tokens, read and written."""
    read, write = cache_read or 0, cache_write or 0
    return Usage(
        requests=1,
        input_tokens=(input_tokens or 0) + read + write,
        output_tokens=output_tokens or 0,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=thinking or 0,
    )


def provider_details(
    *,
    request_id: str | None,
    response_id: str | None,
    stop_reason: str | None,
    stop_sequence: str | None,
    stop_details: RefusalStopDetails | None,
    unmapped: list[str],
) -> dict[str, Any]:
    """The response's ``provider_details`` (the same for a whole response and a stream)."""
    details: dict[str, Any] = {}
    if request_id:
        details["request_id"] = request_id
    if response_id:
        details["response_id"] = response_id
    details["stop_reason"] = stop_reason
    if stop_sequence is not None:
        details["stop_sequence"] = stop_sequence
    if stop_details is not None:
        details["stop_details"] = stop_details.model_dump(mode="json", exclude_none=True)
    if unmapped:
        details["unmapped_blocks"] = unmapped
    return details


def _response_from_message(message: AnthropicMessage, request_id: str | None) -> ModelResponse:
    """The ``ModelResponse`` of a whole Messages API response."""
    parts: list[Part] = []
    unmapped: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ThinkingBlock):
            parts.append(ThinkingPart(text=block.thinking, signature=block.signature or None))
        elif isinstance(block, RedactedThinkingBlock):
            parts.append(ThinkingPart(text="", provider_details={"redacted": block.data}))
        elif isinstance(block, ToolUseBlock):
            arguments = arguments_text(block.input)
            parts.append(ToolCallPart(call_id=block.id, name=block.name, arguments=arguments))
        else:
            unmapped.append(str(getattr(block, "type", type(block).__name__)))
    has_calls = any(isinstance(p, ToolCallPart) for p in parts)
    usage = message.usage
    details = usage.output_tokens_details
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        finish_reason=finish_reason(message.stop_reason, has_calls),
        usage=usage_from(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read=usage.cache_read_input_tokens,
            cache_write=usage.cache_creation_input_tokens,
            thinking=details.thinking_tokens if details is not None else None,
        ),
        model_name=message.model,
        provider_details=provider_details(
            request_id=request_id,
            response_id=message.id,
            stop_reason=message.stop_reason,
            stop_sequence=message.stop_sequence,
            stop_details=message.stop_details,
            unmapped=unmapped,
        ),
    )


def response_from_message(message: AnthropicMessage, request_id: str | None) -> ModelResponse:
    """Our ``ModelResponse`` of a Messages API message; ``MalformedResponse`` when it is broken."""
    with reading_response("anthropic", request_id):
        return _response_from_message(message, request_id)
