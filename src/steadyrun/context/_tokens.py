"""Counting the tokens of a model request.

The default is an estimate with a documented rule (``steadyrun.chat._estimate``), good enough
to keep a run inside its window with the margins ``ContextPolicy`` leaves; exact counters plug
in per model.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from steadyrun._errors import UsageError
from steadyrun.chat import (
    MediaPart,
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from steadyrun.chat._estimate import (
    MESSAGE_OVERHEAD,
    TOOL_OVERHEAD,
    estimate_message,
    estimate_request,
    media_tokens,
    text_tokens,
    tool_tokens,
)

__all__ = [
    "CachedCounter",
    "EstimateCounter",
    "ProviderCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_tokens",
    "estimate_message",
    "estimate_request",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a request (sync or async)."""

    def count(self, request: ModelRequest) -> int | Awaitable[int]:
        """Tokens the request takes in the model's window."""
        ...


class EstimateCounter:
    """The default counter: the documented estimate.

    Messages in a run's context do not change once added, so their counts are remembered
    between calls (only for the messages of the last request, which bounds the memory).
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Message, int]] = {}

    def count(self, request: ModelRequest) -> int:
        """The estimate of ``request``."""
        known: dict[int, tuple[Message, int]] = {}
        total = text_tokens(request.instructions) + sum(tool_tokens(t) for t in request.tools)
        for message in request.messages:
            # Keyed by identity, holding the message so its id cannot be reused meanwhile.
            hit = self._known.get(id(message))
            n = hit[1] if hit is not None and hit[0] is message else estimate_message(message)
            known[id(message)] = (message, n)
            total += n
        self._known = known
        return total


class TiktokenCounter:
    """Exact text counts with ``tiktoken`` for OpenAI models (media and framing estimated).

    Args:
        model: An OpenAI model name (its encoding is looked up; tiktoken fetches it once and
            caches it, so the first use needs network access or a warm ``TIKTOKEN_CACHE_DIR``).
        encoding: A ``tiktoken.Encoding`` to use instead.
    """

    def __init__(self, model: str | None = None, *, encoding: Any = None) -> None:
        try:
            import tiktoken
        except ImportError as exc:
            raise UsageError("TiktokenCounter needs tiktoken: pip install tiktoken") from exc
        if encoding is None:
            if model is None:
                raise UsageError("TiktokenCounter needs a model name or an encoding")
            encoding = tiktoken.encoding_for_model(model)
        self.encoding = encoding

    def _text(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))

    def count(self, request: ModelRequest) -> int:
        """Tokens of ``request``: exact for text, estimated for media and framing."""
        total = self._text(request.instructions)
        for message in request.messages:
            total += MESSAGE_OVERHEAD
            for part in message.parts:
                if isinstance(part, TextPart | ThinkingPart):
                    total += self._text(part.text)
                elif isinstance(part, ToolCallPart):
                    total += self._text(part.name) + self._text(part.arguments) + 4
                elif isinstance(part, ToolResultPart):
                    total += self._text(part.content) + 4
                    total += sum(media_tokens(m) for m in part.media)
                elif isinstance(part, MediaPart):
                    total += media_tokens(part.ref)
        for tool in request.tools:
            total += TOOL_OVERHEAD + self._text(
                tool.name + tool.description + json.dumps(tool.parameters)
            )
        return total


class ProviderCounter:
    """Counts through a provider's count endpoint: ``client.count_tokens(request)``.

    Falls back to the estimate when the client has no such method.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    async def count(self, request: ModelRequest) -> int:
        """The provider's count, or the estimate."""
        counter: Callable[[ModelRequest], Awaitable[int]] | None = getattr(
            self.client, "count_tokens", None
        )
        if counter is None:
            return estimate_request(request)
        return int(await counter(request))


class CachedCounter:
    """Remembers counts of identical requests (a provider's count endpoint costs a request).

    Args:
        inner: The counter to ask on a miss.
        size: How many counts to keep (least recently used go first).
    """

    def __init__(self, inner: TokenCounter, *, size: int = 256) -> None:
        self.inner = inner
        self.size = size
        self._cache: OrderedDict[str, int] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def count(self, request: ModelRequest) -> int:
        """The cached count of ``request``, asking ``inner`` on a miss."""
        from dataclasses import replace

        from steadyrun._codec import encode

        # What the provider counts: ids, revisions and host meta of messages are not sent.
        bare = replace(
            request,
            messages=[replace(m, id=None, revision=None, meta=None) for m in request.messages],
        )
        key = hashlib.sha256(encode(bare)).hexdigest()
        if key in self._cache:
            self.hits += 1
            self._cache.move_to_end(key)
            return self._cache[key]
        self.misses += 1
        value = await count_tokens(self.inner, request)
        self._cache[key] = value
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return value


async def count_tokens(counter: TokenCounter, request: ModelRequest) -> int:
    """Ask a sync or async counter."""
    out = counter.count(request)
    if inspect.isawaitable(out):
        out = await out
    return int(out)
