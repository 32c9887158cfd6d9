"""The Responses API mapping (``POST /responses``), stateless: ``store: false``.

Reasoning is kept as ``ThinkingPart``s: the summary as text, ``encrypted_content`` as the
signature, the item id and summary parts in ``provider_details``; they go back as ``reasoning``
input items, so the model gets its reasoning back without the server storing anything. Every
output item is one part at its ``output_index``, streamed or not.
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
from steadyrun.models._errors import ProviderConnectionError, reading_response
from steadyrun.models._openai_common import (
    MediaResolver,
    body_error,
    details,
    strict_compatible,
    text_of_arguments,
)

__all__ = [
    "ResponsesStream",
    "encrypted_reasoning_model",
    "responses_params",
    "responses_response",
    "responses_usage",
]

SOURCE = "openai-responses"
"""``provider_details["source"]`` of the reasoning this mapping made (and sends back)."""

_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "codex")


def encrypted_reasoning_model(model: str) -> bool:
    """Whether ``model`` is a reasoning model (its reasoning comes back encrypted)."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_PREFIXES) and "-chat" not in name


# -- request --------------------------------------------------------------------------------


async def responses_params(
    request: ModelRequest,
    settings: ModelSettings,
    *,
    model: str,
    media: MediaResolver,
    stream: bool,
) -> dict[str, Any]:
    """The request body for a ``ModelRequest`` (``extra`` is merged by the caller)."""
    if settings.stop:
        raise UsageError(
            "the Responses API has no stop sequences: drop ModelSettings.stop or use the "
            "Chat Completions adapter ('openai:<model>')"
        )
    items: list[dict[str, Any]] = []
    for message in request.messages:
        items += await _items(message, media)
    params: dict[str, Any] = {"model": model, "input": items, "store": False}
    if request.instructions:
        params["instructions"] = request.instructions
    if encrypted_reasoning_model(model):
        params["include"] = ["reasoning.encrypted_content"]
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
        if settings.tool_choice is not None:
            params["tool_choice"] = _tool_choice(settings.tool_choice, request.tools)
        if settings.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        params["max_output_tokens"] = settings.max_tokens
    if settings.response_format is not None:
        rf = settings.response_format
        params["text"] = {
            "format": {
                "type": "json_schema",
                "name": rf.name,
                "schema": rf.schema,
                "strict": bool(rf.strict and strict_compatible(rf.schema)),
            }
        }
    if stream:
        params["stream"] = True
    return params


async def _items(message: Message, media: MediaResolver) -> list[dict[str, Any]]:
    if message.role == "system":
        return [{"role": "system", "content": message.text}]
    if message.role == "user":
        return [{"role": "user", "content": await _user_content(message, media)}]
    if message.role == "tool":
        return [
            await _tool_output(p, media) for p in message.parts if isinstance(p, ToolResultPart)
        ]
    out: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            out.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for part in message.parts:
        if isinstance(part, TextPart):
            text.append(part.text)
        elif isinstance(part, ThinkingPart):
            item = _reasoning_item(part)
            if item is not None:
                flush()
                out.append(item)
        elif isinstance(part, ToolCallPart):
            flush()
            out.append(
                {
                    "type": "function_call",
                    "call_id": part.call_id,
                    "name": part.name,
                    "arguments": part.arguments,
                }
            )
    flush()
    return out


def _reasoning_item(part: ThinkingPart) -> dict[str, Any] | None:
    # Only reasoning this API produced goes back, and only with its encrypted content: with
    # store=false an item id alone refers to nothing.
    info = part.provider_details or {}
    if info.get("source") != SOURCE or not info.get("id") or not part.signature:
        return None
    summary = info.get("summary")
    if not isinstance(summary, list):
        summary = [part.text] if part.text else []
    return {
        "type": "reasoning",
        "id": info["id"],
        "summary": [{"type": "summary_text", "text": str(t)} for t in summary],
        "encrypted_content": part.signature,
    }


async def _user_content(message: Message, media: MediaResolver) -> str | list[dict[str, Any]]:
    parts = message.parts
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, MediaPart):
            content.append(await _media(part.ref, media))
    return content or ""


async def _media(ref: MediaRef, media: MediaResolver) -> dict[str, Any]:
    found = await media.resolve(ref, remote_kinds=("image", "pdf"))
    if found.kind == "image":
        return {"type": "input_image", "image_url": found.url, "detail": "auto"}
    if found.is_remote:
        return {"type": "input_file", "file_url": found.url}
    return {"type": "input_file", "filename": found.filename, "file_data": found.url}


async def _tool_output(part: ToolResultPart, media: MediaResolver) -> dict[str, Any]:
    output: Any = part.content
    if part.media:
        output = [{"type": "input_text", "text": part.content}]
        output += [await _media(ref, media) for ref in part.media]
    return {"type": "function_call_output", "call_id": part.call_id, "output": output}


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = tool.parameters
    # Always explicit: the Responses API treats a missing strict as true.
    out["strict"] = bool(tool.strict and strict_compatible(tool.parameters))
    return out


def _tool_choice(choice: str, tools: list[ToolDefinition]) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if choice not in {t.name for t in tools}:
        raise UsageError(
            f"tool_choice {choice!r} is not one of the request's tools "
            f"({sorted(t.name for t in tools)}), nor auto/none/required"
        )
    return {"type": "function", "name": choice}


# -- response -------------------------------------------------------------------------------


def responses_usage(usage: Any) -> Usage:
    """Our ``Usage`` of a Responses ``usage`` object (missing: only ``requests=1``)."""
    if not isinstance(usage, dict):
        return Usage(requests=1)
    given = usage.get("input_tokens_details") or {}
    made = usage.get("output_tokens_details") or {}
    return Usage(
        requests=1,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(given.get("cached_tokens") or 0),
        cache_write_tokens=int(given.get("cache_write_tokens") or 0),
        reasoning_tokens=int(made.get("reasoning_tokens") or 0),
    )


def _join(texts: list[str]) -> str:
    return "\n\n".join(t for t in texts if t)


def _reasoning_texts(item: dict[str, Any]) -> tuple[list[str], str]:
    summary = [str(s.get("text") or "") for s in item.get("summary") or [] if isinstance(s, dict)]
    text = _join(summary)
    if not text:  # raw reasoning text (open-weight models on compatible servers)
        text = _join([str(c.get("text") or "") for c in item.get("content") or []])
    return summary, text


def _reasoning_details(item: dict[str, Any], summary: list[str]) -> dict[str, Any]:
    return {"source": SOURCE, "id": item.get("id"), "summary": summary}


def _message_text(item: dict[str, Any]) -> tuple[str, bool]:
    text, refused = [], False
    for content in item.get("content") or []:
        if not isinstance(content, dict):
            continue
        if content.get("type") == "refusal":
            refused = True
            text.append(str(content.get("refusal") or ""))
        else:
            text.append(str(content.get("text") or ""))
    return "".join(text), refused


def _call_part(item: dict[str, Any], arguments: str) -> ToolCallPart:
    return ToolCallPart(
        call_id=item.get("call_id") or item.get("id") or "",
        name=item.get("name") or "",
        arguments=arguments or "{}",
        provider_details={"id": item["id"]} if item.get("id") else None,
    )


def _finish(data: dict[str, Any], *, has_calls: bool, refused: bool) -> FinishReason:
    if data.get("status") == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    if refused:
        return "content_filter"
    return "tool_calls" if has_calls else "stop"


def _check_failed(data: dict[str, Any], provider: str, request_id: str | None) -> None:
    if data.get("status") == "failed" or (data.get("error") and not data.get("output")):
        error = data.get("error") or {"message": "the response failed"}
        raise body_error(error, provider=provider, request_id=request_id or data.get("id"))


def _end(
    data: dict[str, Any], *, request_id: str | None, model: str, has_calls: bool, refused: bool
) -> ResponseDelta:
    reason = (data.get("incomplete_details") or {}).get("reason")
    return ResponseDelta(
        part="finish",
        finish_reason=_finish(data, has_calls=has_calls, refused=refused),
        usage=responses_usage(data.get("usage")),
        model_name=data.get("model") or model,
        provider_details=details(request_id, data.get("id"), incomplete_reason=reason),
    )


def _responses_response(
    data: dict[str, Any], *, request_id: str | None, model: str, provider: str
) -> ModelResponse:
    """Our ``ModelResponse`` of a Responses API response object.

    Args:
        data: The response as a dict.
        request_id: The request id from the response headers.
        model: The requested model, used when the response names none.
        provider: The provider name for errors.

    Raises:
        ProviderError: The response failed.
    """
    _check_failed(data, provider, request_id)
    parts: list[Part] = []
    refused = False
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            summary, text = _reasoning_texts(item)
            if text or item.get("encrypted_content"):
                parts.append(
                    ThinkingPart(
                        text=text,
                        signature=item.get("encrypted_content") or None,
                        provider_details=_reasoning_details(item, summary),
                    )
                )
        elif kind == "message":
            text, refusal = _message_text(item)
            refused = refused or refusal
            if text:
                parts.append(TextPart(text=text))
        elif kind == "function_call":
            parts.append(_call_part(item, text_of_arguments(item.get("arguments"))))
    end = _end(
        data,
        request_id=request_id,
        model=model,
        has_calls=any(isinstance(p, ToolCallPart) for p in parts),
        refused=refused,
    )
    assert end.finish_reason is not None
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        finish_reason=end.finish_reason,
        usage=end.usage or Usage(requests=1),
        model_name=end.model_name,
        provider_details=end.provider_details,
    )


@dataclass(slots=True)
class _Item:
    kind: str
    emitted: bool = False  # text or arguments sent for this item
    started: bool = False  # a tool call's id and name sent
    summary_key: Any = None


@dataclass(slots=True)
class ResponsesStream:
    """Turns Responses API stream events into deltas (part index = ``output_index``).

    Attributes:
        request_id: The request id from the response headers.
        model: The requested model, used when the response names none.
        provider: The provider name for errors.
    """

    request_id: str | None
    model: str
    provider: str
    _items: dict[int, _Item] = field(default_factory=dict)
    _terminal: dict[str, Any] | None = None
    _has_calls: bool = False
    _refused: bool = False

    def _item(self, index: int, kind: str) -> _Item:
        item = self._items.get(index)
        if item is None:
            item = self._items[index] = _Item(kind)
        return item

    def feed(self, event: dict[str, Any]) -> list[ResponseDelta]:
        """The deltas of one event.

        Raises:
            ProviderError: An ``error`` or ``response.failed`` event.
        """
        kind = event.get("type")
        index = event.get("output_index", 0)
        delta = event.get("delta")
        if kind == "error":
            raise body_error(event.get("error") or event, provider=self.provider)
        if kind == "response.failed":
            _check_failed(
                {**(event.get("response") or {}), "status": "failed"},
                self.provider,
                self.request_id,
            )
        if kind in ("response.completed", "response.incomplete"):
            self._terminal = event.get("response") or {}
            return []
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            slot = self._item(index, str(item.get("type")))
            if slot.kind == "function_call":
                return self._start_call(index, slot, item)
            return []
        if kind == "response.output_item.done":
            return self._done(index, event.get("item") or {})
        if not isinstance(delta, str) or not delta:
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._refused = self._refused or kind == "response.refusal.delta"
            self._item(index, "message").emitted = True
            return [ResponseDelta(part="text", index=index, text=delta)]
        if kind == "response.function_call_arguments.delta":
            slot = self._item(index, "function_call")
            slot.emitted = True
            return [ResponseDelta(part="tool_call", index=index, arguments=delta)]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            slot = self._item(index, "reasoning")
            key = (kind, event.get("summary_index", event.get("content_index", 0)))
            text = delta
            if slot.emitted and slot.summary_key != key:
                text = "\n\n" + delta  # a new summary part
            slot.summary_key = key
            slot.emitted = True
            return [ResponseDelta(part="thinking", index=index, text=text)]
        return []

    def _start_call(self, index: int, slot: _Item, item: dict[str, Any]) -> list[ResponseDelta]:
        self._has_calls = True
        slot.started = True
        part = _call_part(item, "")
        return [
            ResponseDelta(
                part="tool_call",
                index=index,
                call_id=part.call_id,
                name=part.name,
                provider_details=part.provider_details,
            )
        ]

    def _done(self, index: int, item: dict[str, Any]) -> list[ResponseDelta]:
        kind = str(item.get("type"))
        slot = self._item(index, kind)
        out: list[ResponseDelta] = []
        if kind == "reasoning":
            summary, text = _reasoning_texts(item)
            signature = item.get("encrypted_content") or None
            if slot.emitted or text or signature:
                out.append(
                    ResponseDelta(
                        part="thinking",
                        index=index,
                        text="" if slot.emitted else text,
                        signature=signature,
                        provider_details=_reasoning_details(item, summary),
                    )
                )
        elif kind == "message":
            text, refused = _message_text(item)
            self._refused = self._refused or refused
            if text and not slot.emitted:
                out.append(ResponseDelta(part="text", index=index, text=text))
        elif kind == "function_call":
            if not slot.started:
                out += self._start_call(index, slot, item)
            arguments = text_of_arguments(item.get("arguments"))
            if arguments and not slot.emitted:
                out.append(ResponseDelta(part="tool_call", index=index, arguments=arguments))
        slot.emitted = slot.emitted or bool(out)
        return out

    def finish(self) -> ResponseDelta:
        """The ``finish`` delta, from the ``response.completed``/``incomplete`` event.

        Raises:
            ProviderConnectionError: The stream ended before the response did.
        """
        if self._terminal is None:
            raise ProviderConnectionError(
                "the stream ended before response.completed", provider=self.provider
            )
        output = [i for i in self._terminal.get("output") or [] if isinstance(i, dict)]
        has_calls = self._has_calls or any(i.get("type") == "function_call" for i in output)
        refused = self._refused or any(
            _message_text(i)[1] for i in output if i.get("type") == "message"
        )
        return _end(
            self._terminal,
            request_id=self.request_id,
            model=self.model,
            has_calls=has_calls,
            refused=refused,
        )


def responses_response(
    data: dict[str, Any], *, request_id: str | None, model: str, provider: str
) -> ModelResponse:
    """Our ``ModelResponse`` of a Responses API body; ``MalformedResponse`` when it is broken."""
    with reading_response(provider, request_id):
        return _responses_response(data, request_id=request_id, model=model, provider=provider)
