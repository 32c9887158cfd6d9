"""Test doubles for the model port. They are fakes and named as such: never use them in prod."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from steadyrun._errors import ScriptExhaustedError
from steadyrun.chat import (
    FinishReason,
    MediaPart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    deltas_of,
)
from steadyrun.media._supply import current_supply, supplied_bytes, supplied_url

__all__ = ["FunctionModel", "ScriptedModel", "call", "text", "tool_calls"]

Respond = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
ScriptStep = ModelResponse | BaseException | Respond


def text(
    content: str, *, thinking: str | None = None, finish: FinishReason = "stop"
) -> ModelResponse:
    """A response of plain text (optionally with thinking before it)."""
    parts: list[Part] = []
    if thinking is not None:
        parts.append(ThinkingPart(text=thinking))
    parts.append(TextPart(text=content))
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        finish_reason=finish,
        usage=Usage(requests=1, input_tokens=10, output_tokens=max(1, len(content) // 4)),
    )


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCallPart:
    """One tool call; dict arguments are JSON-encoded, a string is sent as is (even malformed)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCallPart(call_id=id or "", name=name, arguments=args)


def tool_calls(
    *calls: ToolCallPart | tuple[str, dict[str, Any]],
    content: str | None = None,
    finish: FinishReason = "tool_calls",
) -> ModelResponse:
    """A response asking for tool calls (ids ``call_1``, ``call_2``... unless given)."""
    parts: list[Part] = []
    if content:
        parts.append(TextPart(text=content))
    for i, c in enumerate(calls, start=1):
        part = call(c[0], c[1]) if isinstance(c, tuple) else c
        if not part.call_id:
            part = ToolCallPart(call_id=f"call_{i}", name=part.name, arguments=part.arguments)
        parts.append(part)
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        finish_reason=finish,
        usage=Usage(requests=1, input_tokens=10, output_tokens=5 * len(calls)),
    )


class ScriptedModel:
    """A fake model that answers with a fixed script, for tests.

    Each step is a ``ModelResponse``, an exception to raise, or a function of the request.
    Every request is recorded in ``requests``. Asking for more steps than scripted raises
    ``ScriptExhaustedError`` (it never cycles); ``assert_complete()`` checks every step was used.

    ``input_modalities`` and ``media_in_tool_results`` declare what media it takes, like a
    provider model; ``media`` records, per request, the media the runtime supplied (bytes or
    a URL, by key).

    Not resume-safe across processes: the script's position lives in this object, so a run
    resumed by another process (or another ``ScriptedModel``) starts the script over, however
    far the run had come. For runs that crash and resume elsewhere, use ``FunctionModel``,
    whose answer is a function of the request (the context the run has).

    Example:
        ``ScriptedModel([tool_calls(("lookup", {"id": "7"})), text("Done.")])``
    """

    def __init__(
        self,
        steps: Iterable[ScriptStep],
        *,
        name: str = "scripted",
        input_modalities: Iterable[str] | None = None,
        media_in_tool_results: bool = True,
    ) -> None:
        self._steps: list[ScriptStep] = list(steps)
        self._next = 0
        self.name = name
        self.requests: list[ModelRequest] = []
        self.media: list[dict[str, bytes | str]] = []
        self.input_modalities = (
            frozenset(input_modalities) if input_modalities is not None else None
        )
        self.media_in_tool_results = media_in_tool_results

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self._steps) - self._next

    def extend(self, steps: Iterable[ScriptStep]) -> None:
        """Add steps to the end of the script."""
        self._steps.extend(steps)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next scripted step."""
        self.requests.append(request)
        self.media.append(_received_media(request))
        if self._next >= len(self._steps):
            raise ScriptExhaustedError(
                f"{self.name}: asked for response {self._next + 1} but the script has "
                f"{len(self._steps)}; the last request ended with "
                f"{_describe_last(request.messages)}"
            )
        step = self._steps[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step
        out = step(request)
        return await out if inspect.isawaitable(out) else out

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Stream the next step in small fragments; they accumulate to ``respond``'s answer."""
        response = await self.respond(request)
        for delta in deltas_of(response, chunk=3):
            yield delta

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` unless every scripted step was used."""
        if self._next != len(self._steps):
            raise AssertionError(
                f"{self.name}: {len(self._steps) - self._next} of {len(self._steps)} scripted "
                "responses were never requested"
            )


class FunctionModel:
    """A fake model whose answers come from a function of the request, for tests.

    Args:
        fn: Called with each request; returns a ``ModelResponse`` (or an awaitable of one).
        stream_fn: Optional; returns the deltas of a response. Without it ``stream`` splits
            ``fn``'s answer into deltas.
        name: A name for messages.
        input_modalities: Media kinds it takes natively (``None``: whatever it is given).
        media_in_tool_results: Whether tool results may carry media.

    ``media`` records, per request, the media the runtime supplied (bytes or URL, by key).
    """

    def __init__(
        self,
        fn: Respond,
        *,
        stream_fn: Callable[[ModelRequest], Sequence[ResponseDelta]] | None = None,
        name: str = "function",
        input_modalities: Iterable[str] | None = None,
        media_in_tool_results: bool = True,
    ) -> None:
        self._fn = fn
        self._stream_fn = stream_fn
        self.name = name
        self.requests: list[ModelRequest] = []
        self.media: list[dict[str, bytes | str]] = []
        self.input_modalities = (
            frozenset(input_modalities) if input_modalities is not None else None
        )
        self.media_in_tool_results = media_in_tool_results

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer with ``fn(request)``."""
        self.requests.append(request)
        self.media.append(_received_media(request))
        out = self._fn(request)
        return await out if inspect.isawaitable(out) else out

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Stream ``stream_fn(request)``, or ``fn``'s answer split into fragments."""
        if self._stream_fn is None:
            response = await self.respond(request)
            deltas: Sequence[ResponseDelta] = deltas_of(response, chunk=3)
        else:
            self.requests.append(request)
            deltas = self._stream_fn(request)
        for delta in deltas:
            yield delta


def _describe_last(messages: list[Message]) -> str:
    if not messages:
        return "no messages"
    last = messages[-1]
    return f"a {last.role} message: {(last.text or str(last.parts))[:120]!r}"


def _received_media(request: ModelRequest) -> dict[str, bytes | str]:
    """What the runtime supplied for each media reference of a request: bytes, or a URL."""
    out: dict[str, bytes | str] = {}
    if current_supply() is None:
        # Nothing supplied to this call: no walk of the whole history (O(N) per model call).
        return out
    for message in request.messages:
        for part in message.parts:
            refs = [part.ref] if isinstance(part, MediaPart) else []
            refs += part.media if isinstance(part, ToolResultPart) else []
            for ref in refs:
                got = supplied_bytes(ref) or supplied_url(ref)
                if got is not None:
                    out[ref.key] = got
    return out
