"""The Chat Completions mapping (``POST /chat/completions``): OpenAI and compatible servers.

Part order of a response, streamed or not: thinking, text, then the tool calls. Streams put
thinking at index 0, text at 1 and tool call ``n`` at ``2 + n``, so they accumulate to the same
message as the non-streaming answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
)
from steadyrun.models._errors import reading_response
from steadyrun.models._openai_common import (
    MediaResolver,
    body_error,
    details,
    strict_compatible,
    text_of_arguments,
)

__all__ = ["ChatDialect", "ChatStream", "chat_params", "chat_response", "chat_usage"]

_THINKING, _TEXT, _TOOLS = 0, 1, 2
_REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True, slots=True)
class ChatDialect:
    """How one family of servers speaks Chat Completions.

    Attributes:
        provider: The provider name in errors.
        max_tokens_field: ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (most servers).
        send_reasoning: Send thinking back in the field it came in (``reasoning_content`` or
            ``reasoning``); OpenAI rejects unknown message fields and returns no reasoning text.
        null_content: An assistant turn of only tool calls has ``"content": null`` (OpenAI);
            otherwise ``""`` (llama.cpp's server rejects null there).
    """

    provider: str
    max_tokens_field: str = "max_completion_tokens"
    send_reasoning: bool = False
    null_content: bool = True


# -- request --------------------------------------------------------------------------------


async def chat_params(
    request: ModelRequest,
    settings: ModelSettings,
    *,
    model: str,
    dialect: ChatDialect,
    media: MediaResolver,
    stream: bool,
) -> dict[str, Any]:
    """The request body for a ``ModelRequest`` (``extra`` is merged by the caller)."""
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        messages += await _messages(message, dialect=dialect, media=media)
    params: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
        if settings.tool_choice is not None:
            params["tool_choice"] = _tool_choice(settings.tool_choice, request.tools)
        if settings.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        params[dialect.max_tokens_field] = settings.max_tokens
    if settings.stop:
        params["stop"] = list(settings.stop)
    if settings.response_format is not None:
        rf = settings.response_format
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": rf.name,
                "schema": rf.schema,
                "strict": bool(rf.strict and strict_compatible(rf.schema)),
            },
        }
    if stream:
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
    return params


async def _messages(
    message: Message, *, dialect: ChatDialect, media: MediaResolver
) -> list[dict[str, Any]]:
    if message.role == "system":
        return [{"role": "system", "content": message.text}]
    if message.role == "user":
        return [{"role": "user", "content": await _user_content(message.parts, media)}]
    if message.role == "assistant":
        assistant = _assistant(message, dialect)
        # Nothing this API can carry (e.g. only another provider's thinking): left out.
        return [assistant] if len(assistant) > 2 or assistant["content"] else []
    out: list[dict[str, Any]] = []
    attachments: list[Any] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            out.append({"role": "tool", "tool_call_id": part.call_id, "content": part.content})
            if part.media:
                # A tool message holds text only: its media follow in a user message.
                attachments.append(
                    TextPart(text=f"Attachments of the {part.name} result ({part.call_id}):")
                )
                attachments += [MediaPart(ref=ref) for ref in part.media]
    if attachments:
        out.append({"role": "user", "content": await _user_content(attachments, media)})
    return out


async def _user_content(parts: list[Any], media: MediaResolver) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, MediaPart):
            content.append(await _media(part.ref, media))
    return content or ""


async def _media(ref: MediaRef, media: MediaResolver) -> dict[str, Any]:
    # Chat Completions takes image URLs; PDFs only as file_data (or an uploaded file id).
    found = await media.resolve(ref, remote_kinds=("image",))
    if found.kind == "image":
        return {"type": "image_url", "image_url": {"url": found.url}}
    return {"type": "file", "file": {"filename": found.filename, "file_data": found.url}}


def _assistant(message: Message, dialect: ChatDialect) -> dict[str, Any]:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = message.tool_calls
    empty = None if dialect.null_content else ""
    out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else empty}
    if dialect.send_reasoning:
        for part in message.parts:
            if isinstance(part, ThinkingPart) and part.text:
                name = (part.provider_details or {}).get("field")
                if name in _REASONING_FIELDS:
                    out[name] = out.get(name, "") + part.text
    if calls:
        out["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in calls
        ]
    return out


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    if tool.strict and strict_compatible(tool.parameters):
        function["strict"] = True
    return {"type": "function", "function": function}


def _tool_choice(choice: str, tools: list[ToolDefinition]) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if choice not in {t.name for t in tools}:
        raise UsageError(
            f"tool_choice {choice!r} is not one of the request's tools "
            f"({sorted(t.name for t in tools)}), nor auto/none/required"
        )
    return {"type": "function", "function": {"name": choice}}


# -- response -------------------------------------------------------------------------------


def chat_usage(usage: Any) -> Usage:
    """Our ``Usage`` of a Chat Completions ``usage`` object (missing: only ``requests=1``)."""
    if not isinstance(usage, dict):
        return Usage(requests=1)
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return Usage(
        requests=1,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(prompt.get("cached_tokens") or 0),
        cache_write_tokens=int(prompt.get("cache_write_tokens") or 0),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0),
    )


def _finish(reason: Any, *, has_calls: bool, refused: bool) -> FinishReason:
    if reason == "length":
        return "length"
    if reason == "content_filter" or refused:
        return "content_filter"
    if reason == "error":
        return "error"
    # "tool_calls", "function_call", and "stop" with calls (a forced tool_choice on OpenAI;
    # many compatible servers always say "stop").
    return "tool_calls" if has_calls else "stop"


def _reasoning(fields: dict[str, Any]) -> tuple[str, str]:
    for name in _REASONING_FIELDS:
        value = fields.get(name)
        if isinstance(value, str) and value:
            return value, name
    return "", ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(
            str(p.get("text") or "") for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _check_error(data: dict[str, Any], provider: str, request_id: str | None) -> None:
    if data.get("error") and not data.get("choices"):
        raise body_error(data["error"], provider=provider, request_id=request_id)


def _chat_response(
    data: dict[str, Any], *, request_id: str | None, model: str, provider: str
) -> ModelResponse:
    """Our ``ModelResponse`` of a chat completion body.

    Args:
        data: The completion as a dict.
        request_id: The request id from the response headers.
        model: The requested model, used when the body names none.
        provider: The provider name for errors.
    """
    _check_error(data, provider, request_id)
    choices = data.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    parts: list[Part] = []
    reasoning, name = _reasoning(message)
    if reasoning:
        parts.append(ThinkingPart(text=reasoning, provider_details={"field": name}))
    refusal = message.get("refusal") or ""
    text = _text(message.get("content")) + refusal
    if text:
        parts.append(TextPart(text=text))
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    for i, call in enumerate(calls):
        function = call.get("function") or {}
        parts.append(
            ToolCallPart(
                call_id=call.get("id") or f"call_{i}",
                name=function.get("name") or "",
                arguments=text_of_arguments(function.get("arguments")) or "{}",
            )
        )
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        finish_reason=_finish(
            choice.get("finish_reason"), has_calls=bool(calls), refused=bool(refusal)
        ),
        usage=chat_usage(data.get("usage")),
        model_name=data.get("model") or model,
        provider_details=details(request_id, data.get("id")),
    )


@dataclass(slots=True)
class _Call:
    index: int
    call_id: str | None


@dataclass(slots=True)
class ChatStream:
    """Turns chat completion chunks into deltas.

    Tolerates what compatible servers do: chunks without ids, tool calls without an id or an
    index, usage in a chunk with choices or none at all, ``stop`` as the finish of tool calls.

    Attributes:
        request_id: The request id from the response headers.
        model: The requested model, used when the chunks name none.
        provider: The provider name for errors.
    """

    request_id: str | None
    model: str
    provider: str
    _id: str | None = None
    _model: str | None = None
    _usage: Any = None
    _reason: Any = None
    _refused: bool = False
    _thinking: bool = False
    _calls: list[_Call] = field(default_factory=list)
    _by_index: dict[int, _Call] = field(default_factory=dict)

    def feed(self, event: dict[str, Any]) -> list[ResponseDelta]:
        """The deltas of one chunk."""
        _check_error(event, self.provider, self.request_id)
        self._id = self._id or event.get("id") or None
        self._model = event.get("model") or self._model
        if event.get("usage"):
            self._usage = event["usage"]
        out: list[ResponseDelta] = []
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning, name = _reasoning(delta)
            if reasoning:
                first = not self._thinking
                self._thinking = True
                out.append(
                    ResponseDelta(
                        part="thinking",
                        index=_THINKING,
                        text=reasoning,
                        provider_details={"field": name} if first else None,
                    )
                )
            text = _text(delta.get("content"))
            refusal = delta.get("refusal") or ""
            self._refused = self._refused or bool(refusal)
            if text + refusal:
                out.append(ResponseDelta(part="text", index=_TEXT, text=text + refusal))
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    out.append(self._call(call))
            if choice.get("finish_reason"):
                self._reason = choice["finish_reason"]
        return out

    def _call(self, call: dict[str, Any]) -> ResponseDelta:
        key = call.get("index")
        call_id = call.get("id") or None
        function = call.get("function") or {}
        slot = self._by_index.get(key) if isinstance(key, int) else None
        if not isinstance(key, int) and self._calls:
            # No index: a fragment with an id or a name starts a call, others continue the last.
            last = self._calls[-1]
            same = call_id == last.call_id if call_id else not function.get("name")
            slot = last if same else None
        if slot is not None and call_id and slot.call_id and call_id != slot.call_id:
            slot = None  # a new call reusing an index
        first = slot is None
        if slot is None:
            slot = _Call(index=_TOOLS + len(self._calls), call_id=call_id)
            self._calls.append(slot)
            if isinstance(key, int):
                self._by_index[key] = slot
        slot.call_id = slot.call_id or call_id
        return ResponseDelta(
            part="tool_call",
            index=slot.index,
            call_id=call_id or (f"call_{slot.index - _TOOLS}" if first else None),
            name=function.get("name") or None,
            arguments=text_of_arguments(function.get("arguments")),
        )

    def finish(self) -> ResponseDelta:
        """The ``finish`` delta."""
        return ResponseDelta(
            part="finish",
            finish_reason=_finish(self._reason, has_calls=bool(self._calls), refused=self._refused),
            usage=chat_usage(self._usage),
            model_name=self._model or self.model,
            provider_details=details(self.request_id, self._id),
        )


def chat_response(
    data: dict[str, Any], *, request_id: str | None, model: str, provider: str
) -> ModelResponse:
    """Our ``ModelResponse`` of a chat completion body; ``MalformedResponse`` when it is broken."""
    with reading_response(provider, request_id):
        return _chat_response(data, request_id=request_id, model=model, provider=provider)
