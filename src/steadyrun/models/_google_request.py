"""steadyrun requests to Gemini ``contents`` and ``GenerateContentConfig``.

- ``instructions`` and any ``system`` messages become ``systemInstruction`` parts, in order;
- ``assistant`` messages become ``model`` contents, ``user`` and ``tool`` messages ``user``
  contents; consecutive contents of one role are joined (tool results, then the next user
  text, form one ``user`` turn, function responses first);
- thinking, text signatures and tool-call signatures this adapter produced go back on the parts
  they came with; thinking from other providers is dropped (Gemini cannot verify it);
- tool results become ``functionResponse`` parts (``{"output": ...}``, or ``{"error": ...}`` when
  ``is_error``), with the call's id only when Gemini gave the call one;
- media: a URL from ``media_url`` becomes ``fileData``, bytes from ``media_reader`` ``inlineData``;
  images and PDFs only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from google.genai import types
from pydantic.alias_generators import to_snake

from steadyrun._errors import UsageError
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from steadyrun.media._supply import supplied_bytes, supplied_url
from steadyrun.models._google_response import PROVIDER, decode_signature

__all__ = ["GoogleCall", "MediaReader", "MediaUrl", "build_call", "count_config"]

MediaReader = Callable[[MediaRef], Awaitable[bytes]]
"""Gives the bytes of a media reference."""

MediaUrl = Callable[[MediaRef], Awaitable[str | None]]
"""Gives a URL Gemini can fetch for a media reference (``None``: send the bytes instead)."""


@dataclass(kw_only=True, slots=True)
class GoogleCall:
    """The arguments of one ``generate_content`` call.

    Attributes:
        contents: The conversation as Gemini contents.
        config: Everything else: system instruction, tools, generation options.
        system: The texts of the system instruction, in order.
    """

    contents: list[types.Content]
    config: types.GenerateContentConfig
    system: list[str] = field(default_factory=list)


def _ours(details: dict[str, Any] | None) -> bool:
    return bool(details) and details is not None and details.get("provider") == PROVIDER


def _args(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class _Contents:
    media_reader: MediaReader | None
    media_url: MediaUrl | None
    contents: list[types.Content] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    calls: dict[str, ToolCallPart] = field(default_factory=dict)

    async def add(self, message: Message) -> None:
        if message.role == "system":
            if message.text:
                self.system.append(message.text)
            return
        if message.role == "assistant":
            role, parts = "model", await self._model_parts(message)
        else:
            role, parts = "user", await self._user_parts(message)
        if not parts:
            return
        last = self.contents[-1] if self.contents else None
        if last is not None and last.role == role and last.parts is not None:
            last.parts.extend(parts)
        else:
            self.contents.append(types.Content(role=role, parts=parts))

    async def _model_parts(self, message: Message) -> list[types.Part]:
        parts: list[types.Part] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:
                    parts.append(types.Part(text=part.text))
            elif isinstance(part, ThinkingPart):
                self._thinking(part, parts)
            elif isinstance(part, ToolCallPart):
                parts.append(self._call(part))
            elif isinstance(part, MediaPart):
                parts.append(await self._media(part.ref))
            else:
                parts.append(self._result(part))
        return parts

    def _thinking(self, part: ThinkingPart, parts: list[types.Part]) -> None:
        details = part.provider_details
        if not _ours(details):
            return
        signature = decode_signature(part.signature) if part.signature else None
        if details is not None and details.get("carrier") == "text":
            if signature is None:
                return
            last = parts[-1] if parts else None
            if (
                last is not None
                and last.text is not None
                and not last.thought
                and last.thought_signature is None
            ):
                last.thought_signature = signature
            else:
                parts.append(types.Part(text="", thought_signature=signature))
            return
        if part.text or signature is not None:
            parts.append(types.Part(text=part.text, thought=True, thought_signature=signature))

    def _call(self, part: ToolCallPart) -> types.Part:
        self.calls[part.call_id] = part
        details = part.provider_details if _ours(part.provider_details) else None
        generated = bool(details and details.get("generated_id"))
        signature = details.get("thought_signature") if details else None
        call = types.FunctionCall(
            name=part.name, args=_args(part.arguments), id=None if generated else part.call_id
        )
        return types.Part(
            function_call=call,
            thought_signature=decode_signature(signature) if signature else None,
        )

    def _result(self, part: ToolResultPart) -> types.Part:
        call = self.calls.get(part.call_id)
        generated = (
            call is not None
            and _ours(call.provider_details)
            and bool(call.provider_details and call.provider_details.get("generated_id"))
        )
        response = {"error": part.content} if part.is_error else {"output": part.content}
        return types.Part(
            function_response=types.FunctionResponse(
                name=part.name, response=response, id=None if generated else part.call_id
            )
        )

    async def _user_parts(self, message: Message) -> list[types.Part]:
        results: list[types.Part] = []
        rest: list[types.Part] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                results.append(self._result(part))
                for ref in part.media:
                    rest.append(await self._media(ref))
            elif isinstance(part, TextPart):
                if part.text:
                    rest.append(types.Part(text=part.text))
            elif isinstance(part, MediaPart):
                rest.append(await self._media(part.ref))
            # thinking and tool calls in user/tool messages have no Gemini form: dropped
        return results + rest

    async def _media(self, ref: MediaRef) -> types.Part:
        if not (ref.mime.startswith("image/") or ref.mime == "application/pdf"):
            raise UsageError(
                f"media {ref.key!r} has MIME type {ref.mime!r}; the google adapter sends "
                "images (image/*) and PDFs (application/pdf) only"
            )
        supplied = supplied_url(ref)
        if supplied:
            return types.Part(file_data=types.FileData(file_uri=supplied, mime_type=ref.mime))
        if self.media_url is not None:
            url = await self.media_url(ref)
            if url:
                return types.Part(file_data=types.FileData(file_uri=url, mime_type=ref.mime))
        data = supplied_bytes(ref)  # read and checked by the runtime for this call
        if data is not None:
            return types.Part(inline_data=types.Blob(data=data, mime_type=ref.mime))
        if self.media_reader is None:
            raise UsageError(
                f"the request holds media {ref.key!r}: pass media_reader= (a coroutine giving "
                "the bytes of a MediaRef) or media_url= to GoogleModel"
            )
        data = await self.media_reader(ref)
        if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256.lower():
            raise UsageError(f"media {ref.key!r}: the bytes read do not match its sha256")
        return types.Part(inline_data=types.Blob(data=data, mime_type=ref.mime))


def _tool_config(tools: list[ToolDefinition], choice: str | None) -> dict[str, Any] | None:
    names = [t.name for t in tools]
    if not tools:
        if choice in (None, "auto", "none"):
            return None
        raise UsageError(f"tool_choice {choice!r} needs tools, and the request has none")
    strict = all(t.strict for t in tools)
    if choice is None:
        return {"function_calling_config": {"mode": "VALIDATED"}} if strict else None
    if choice == "auto":
        return {"function_calling_config": {"mode": "VALIDATED" if strict else "AUTO"}}
    if choice == "none":
        return {"function_calling_config": {"mode": "NONE"}}
    if choice == "required":
        return {"function_calling_config": {"mode": "ANY"}}
    if choice not in names:
        raise UsageError(f"tool_choice names {choice!r}, which is not among the tools {names}")
    return {"function_calling_config": {"mode": "ANY", "allowed_function_names": [choice]}}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif key == "tools" and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = [*out[key], *value]  # e.g. built-in tools next to our functions
        else:
            out[key] = value
    return out


def _config(
    request: ModelRequest,
    settings: ModelSettings,
    system: list[str],
    *,
    include_thoughts: bool | None,
    timeout: float | None,
) -> types.GenerateContentConfig:
    http: dict[str, Any] = {"retry_options": {"attempts": 1}}  # steadyrun retries, not the SDK
    if timeout is not None:
        http["timeout"] = max(1, round(timeout * 1000))
    config: dict[str, Any] = {
        "http_options": http,
        "automatic_function_calling": {"disable": True},
    }
    if system:
        config["system_instruction"] = {"parts": [{"text": text} for text in system]}
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters}
            for t in request.tools
        ]
        config["tools"] = [{"function_declarations": declarations}]
    tool_config = _tool_config(request.tools, settings.tool_choice)
    if tool_config is not None:
        config["tool_config"] = tool_config
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        config["max_output_tokens"] = settings.max_tokens
    if settings.stop:
        config["stop_sequences"] = list(settings.stop)
    if settings.response_format is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = settings.response_format.schema
    if include_thoughts is not None:
        config["thinking_config"] = {"include_thoughts": include_thoughts}
    extra = {to_snake(k): v for k, v in (settings.extra or {}).items()}
    try:
        return types.GenerateContentConfig.model_validate(_merge(config, extra))
    except pydantic.ValidationError as exc:
        raise UsageError(
            f"ModelSettings.extra does not fit google-genai's GenerateContentConfig: {exc}"
        ) from exc


async def build_call(
    request: ModelRequest,
    settings: ModelSettings,
    *,
    media_reader: MediaReader | None,
    media_url: MediaUrl | None,
    include_thoughts: bool | None,
    http_timeout: float | None,
) -> GoogleCall:
    """Map ``request`` (with the merged ``settings``) to the arguments of one Gemini call.

    Raises:
        UsageError: Media without a reader, an unsupported MIME type, a ``tool_choice`` naming
            no tool, or ``extra`` options the SDK does not know.
    """
    builder = _Contents(media_reader=media_reader, media_url=media_url)
    if request.instructions:
        builder.system.append(request.instructions)
    for message in request.messages:
        await builder.add(message)
    config = _config(
        request, settings, builder.system, include_thoughts=include_thoughts, timeout=http_timeout
    )
    return GoogleCall(contents=builder.contents, config=config, system=builder.system)


def count_config(call: GoogleCall, *, vertex: bool) -> types.CountTokensConfig:
    """The ``count_tokens`` config for the request of ``call``.

    The SDK sends a ``CountTokensConfig``'s ``system_instruction`` and ``tools`` on Vertex AI
    only: with the Gemini Developer API it refuses them (``ValueError``) and counts ``contents``
    alone, so they are set only when ``vertex``. The HTTP options (no SDK retries, the timeout)
    are those of the generation call.
    """
    config = types.CountTokensConfig(http_options=call.config.http_options)
    if vertex:
        config.system_instruction = call.config.system_instruction
        tools = [tool for tool in call.config.tools or [] if isinstance(tool, types.Tool)]
        config.tools = tools or None
    return config
