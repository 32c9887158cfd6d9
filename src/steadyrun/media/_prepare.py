"""Preparing the media of a model call: budget, modalities, integrity, where tool media go.

Records and the context hold only ``MediaRef``s. Before each model call the runtime decides,
for every reference in the request, what the model gets: the media itself (its bytes read and
checked against the SHA-256, or a URL), text from a host adapter (OCR, a transcript), or a note
saying why it is missing. The context is never changed: the same stored references give the
same request again after a resume.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from steadyrun._errors import UsageError
from steadyrun._texts import Texts, default_texts
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    Part,
    TextPart,
    ToolResultPart,
)
from steadyrun.media._supply import MediaSupply

__all__ = [
    "MediaAdapter",
    "MediaOptions",
    "MediaPreparer",
    "MediaWatch",
    "has_media",
    "media_kind",
    "model_media",
]

Problem = Literal["changed", "unreadable"]
"""Why media read for a model call cannot be shown."""

log = logging.getLogger("steadyrun.media")

MediaAdapter = Callable[[MediaRef, bytes], Awaitable[str] | str]
"""Turns media a model cannot take into text: ``(ref, data) -> text`` (sync or async)."""

ALL_KINDS = frozenset({"image", "pdf", "audio", "video"})


def media_kind(mime: str) -> str:
    """The modality of a MIME type: ``image``, ``pdf``, ``audio``, ``video`` or ``file``."""
    mime = mime.lower()
    if mime == "application/pdf":
        return "pdf"
    top = mime.split("/", 1)[0]
    return top if top in ("image", "audio", "video") else "file"


def model_media(client: Any) -> tuple[frozenset[str] | None, bool]:
    """What media a model takes: its ``input_modalities`` and ``media_in_tool_results``.

    A model that declares no ``input_modalities`` gets media passed through as they are
    (``None``); one that does not say ``media_in_tool_results`` is assumed to take them.
    """
    kinds = getattr(client, "input_modalities", None)
    in_results = bool(getattr(client, "media_in_tool_results", True))
    return (frozenset(kinds) if kinds is not None else None), in_results


@dataclass(kw_only=True, frozen=True)
class MediaOptions:
    """How a runtime reads media and how much of it a model call may carry.

    Attributes:
        reader: Returns the bytes of a reference from the host's storage.
        url: Returns a URL the provider can fetch the media from, or ``None``; tried first
            (the provider fetches it, so the runtime does not check its hash).
        adapters: Turn media of a kind (``image``, ``pdf``, ``audio``, ``video``, ``file``)
            into text, for models that cannot take that kind.
        max_items: Media items one model call may carry.
        max_bytes: Their total size (the sizes the references declare).
    """

    reader: Callable[[MediaRef], Awaitable[bytes]] | None = None
    url: Callable[[MediaRef], Awaitable[str | None]] | None = None
    adapters: Mapping[str, MediaAdapter] = field(default_factory=dict)
    max_items: int = 20
    max_bytes: int = 50 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_items < 0 or self.max_bytes < 0:
            raise UsageError("MediaOptions.max_items and max_bytes must be 0 or more")
        unknown = set(self.adapters) - (ALL_KINDS | {"file"})
        if unknown:
            raise UsageError(
                f"MediaOptions.adapters has unknown kinds {sorted(unknown)}; "
                "use image, pdf, audio, video or file"
            )


@dataclass(slots=True)
class _Spot:
    """Where a reference sits in the request."""

    message: int
    part: int
    ref: MediaRef
    tool: bool


def _english() -> Texts:
    return default_texts()


class MediaPreparer:
    """Prepares the media of one run's model calls (caching bytes and adapter text).

    Args:
        options: How media are read, and the budget of a model call.
        texts: The runtime's texts: the notes the model reads in place of media (``media_*``);
            default: English.
        cache_bytes: Verified bytes kept, at most.
        cache_texts: Adapter texts kept, at most.
    """

    def __init__(
        self,
        options: MediaOptions,
        texts: Texts | None = None,
        *,
        cache_bytes: int = 64 * 1024 * 1024,
        cache_texts: int = 512,
    ) -> None:
        self.options = options
        self.texts = texts if texts is not None else _english()
        # Shared by the runs of a runtime: verified bytes (bounded by size) and adapter text
        # (bounded by count), both keyed by key and SHA-256, so a reference that changed misses.
        self._bytes: OrderedDict[str, bytes] = OrderedDict()
        self._text: OrderedDict[str, str] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cache_texts = cache_texts

    async def prepare(self, request: ModelRequest, client: Any) -> tuple[ModelRequest, MediaSupply]:
        """The request as the model gets it, and the media supply for the call."""
        supply = MediaSupply()
        spots = _spots(request.messages)
        if not spots:
            return request, supply
        kinds, in_results = model_media(client)
        allowed = self._budget(spots)
        # What replaces each reference: None keeps it native; a string is text instead.
        out: dict[tuple[int, int, str], str | None] = {}
        for i, spot in enumerate(spots):
            ref = spot.ref
            kind = media_kind(ref.mime)
            slot = (spot.message, spot.part, _id(ref))
            if i not in allowed:
                out[slot] = self.texts.media_over_budget.format(kind=kind, key=ref.key)
            elif kinds is not None and kind not in kinds:
                out[slot] = await self._as_text(ref, kind)
            else:
                out[slot] = await self._native(ref, kind, supply)
        messages = _rewrite(request.messages, out, move_tool_media=not in_results, texts=self.texts)
        return replace(request, messages=messages), supply

    def _budget(self, spots: list[_Spot]) -> set[int]:
        """Indexes of the newest media that fit; from the first that does not, none older."""
        allowed: set[int] = set()
        size = 0
        for i in range(len(spots) - 1, -1, -1):
            ref = spots[i].ref
            if len(allowed) >= self.options.max_items or size + ref.size > self.options.max_bytes:
                break
            allowed.add(i)
            size += ref.size
        return allowed

    def _note(self, problem: Problem, ref: MediaRef, kind: str) -> str:
        """The note the model reads in place of media that cannot be shown."""
        texts = self.texts
        if problem == "changed":
            return texts.media_changed.format(kind=kind, key=ref.key)
        return texts.media_unreadable.format(kind=kind, key=ref.key)

    async def _native(self, ref: MediaRef, kind: str, supply: MediaSupply) -> str | None:
        opts = self.options
        if opts.url is not None:
            try:
                url = await opts.url(ref)
            except Exception:
                log.exception("media url function failed for %r; reading the bytes", ref.key)
                url = None
            if url:
                supply.add_url(ref, url)
                return None
        if opts.reader is None:
            return None  # the model's own media_reader (if any) reads it
        data, problem = await self._read(ref)
        if problem is not None:
            return self._note(problem, ref, kind)
        assert data is not None
        supply.add_bytes(ref, data)
        return None

    async def _as_text(self, ref: MediaRef, kind: str) -> str:
        texts = self.texts
        adapter = self.options.adapters.get(kind)
        if adapter is None:
            return texts.media_unavailable.format(kind=kind, key=ref.key, mime=ref.mime)
        cached = self._text.get(_id(ref))
        if cached is None:
            data, problem = await self._read(ref)
            if problem is not None:
                return self._note(problem, ref, kind)
            assert data is not None
            try:
                out = adapter(ref, data)
                cached = await out if inspect.isawaitable(out) else out
            except Exception:
                log.exception("media adapter for %s failed on %r", kind, ref.key)
                return self._note("unreadable", ref, kind)
            self._text[_id(ref)] = cached
            while len(self._text) > self._cache_texts:
                self._text.popitem(last=False)
        return texts.media_as_text.format(kind=kind, key=ref.key, text=cached)

    async def _read(self, ref: MediaRef) -> tuple[bytes | None, Problem | None]:
        """The verified bytes of ``ref``, or why it cannot be shown."""
        key = _id(ref)
        if key in self._bytes:
            self._bytes.move_to_end(key)
            return self._bytes[key], None
        reader = self.options.reader
        if reader is None:
            return None, "unreadable"
        try:
            data = await reader(ref)
        except Exception:
            log.exception("media reader failed for %r", ref.key)
            return None, "unreadable"
        if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256.lower():
            return None, "changed"
        if len(data) <= self._cache_bytes:
            self._bytes[key] = data
            total = sum(len(v) for v in self._bytes.values())
            while total > self._cache_bytes:
                _, dropped = self._bytes.popitem(last=False)
                total -= len(dropped)
        return data, None


def _id(ref: MediaRef) -> str:
    return f"{ref.key}\x00{ref.sha256 or ''}"


def has_media(message: Message) -> bool:
    """Whether a message refers to media (attached, or on a tool result)."""
    return any(
        isinstance(p, MediaPart) or (isinstance(p, ToolResultPart) and bool(p.media))
        for p in message.parts
    )


class MediaWatch:
    """Whether a run's requests refer to media, without rescanning the context's clean prefix.

    The context only grows between rewrites (``generation`` counts them), so the messages
    already found to hold no media need no second look.
    """

    def __init__(self) -> None:
        self._clean = (-1, 0)  # (context generation, leading messages without media)

    def needs(self, context: list[Message], generation: int, request: ModelRequest) -> bool:
        """Whether ``request`` (built on ``context``) refers to media."""
        start = self._clean[1] if self._clean[0] == generation else 0
        if _any_media(context, start):
            return True
        self._clean = (generation, len(context))
        return _any_media(request.messages, len(context))


def _any_media(messages: list[Message], start: int) -> bool:
    """``has_media`` of any message from ``start`` on, in plain loops.

    A resume scans its whole context once (N=400: 800 messages): a generator per message
    cost more than the test itself.
    """
    for i in range(start, len(messages)):
        for p in messages[i].parts:
            if isinstance(p, MediaPart) or (isinstance(p, ToolResultPart) and p.media):
                return True
    return False


def _spots(messages: list[Message]) -> list[_Spot]:
    spots = []
    for mi, message in enumerate(messages):
        for pi, part in enumerate(message.parts):
            if isinstance(part, MediaPart):
                spots.append(_Spot(mi, pi, part.ref, False))
            elif isinstance(part, ToolResultPart) and part.media:
                spots += [_Spot(mi, pi, ref, True) for ref in part.media]
    return spots


def _rewrite(
    messages: list[Message],
    out: dict[tuple[int, int, str], str | None],
    *,
    move_tool_media: bool,
    texts: Texts,
) -> list[Message]:
    touched = {(m, p) for m, p, _ in out}
    result: list[Message] = []
    for mi, message in enumerate(messages):
        if not any(m == mi for m, _ in touched):
            result.append(message)
            continue
        parts: list[Part] = []
        follow: list[Part] = []
        for pi, part in enumerate(message.parts):
            if isinstance(part, MediaPart) and (mi, pi) in touched:
                note = out[(mi, pi, _id(part.ref))]
                parts.append(part if note is None else TextPart(text=note))
            elif isinstance(part, ToolResultPart) and (mi, pi) in touched:
                native = [r for r in part.media if out[(mi, pi, _id(r))] is None]
                notes = [n for r in part.media if (n := out[(mi, pi, _id(r))]) is not None]
                content = "\n".join([part.content, *notes]) if notes else part.content
                if move_tool_media and native:
                    label = texts.media_tool_follow.format(name=part.name, call_id=part.call_id)
                    follow += [TextPart(text=label), *(MediaPart(ref=r) for r in native)]
                    native = []
                parts.append(replace(part, content=content, media=native))
            else:
                parts.append(part)
        result.append(replace(message, parts=parts))
        if follow:
            result.append(Message(role="user", parts=follow))
    return result
