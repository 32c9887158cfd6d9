"""The memory bank port (``MemoryBank``) and a fake for tests (``InMemoryMemoryBank``).

A memory bank holds short texts (memories) in namespaces (one per user, say) and finds the ones
relevant to a query: by embeddings when the bank has an embedding function, else by BM25
keyword ranking. Memory ids are ``mem1``, ``mem2``... in the order memories were added.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from steadyrun._errors import UsageError
from steadyrun.extensions._memory_rank import bm25_rank, similarity_rank

__all__ = [
    "Embed",
    "InMemoryMemoryBank",
    "MemoryBank",
    "MemoryItem",
    "ScoredMemory",
]

T = TypeVar("T")

Embed = (
    Callable[[list[str]], Awaitable[list[list[float]]]] | Callable[[list[str]], list[list[float]]]
)
"""An embedding function: texts in, one vector per text out; a sync one runs in a thread."""

OnEmbedderChange = Literal["reembed", "refuse"]


@dataclass(kw_only=True, frozen=True, slots=True)
class MemoryItem:
    """One memory.

    Attributes:
        id: ``mem1``, ``mem2``... unique within the bank, never reused.
        namespace: Whose memory it is (a user, a tenant...).
        text: The memory, one fact or preference in a sentence.
        created_at: When it was added.
        updated_at: When its text last changed.
        metadata: Plain data (JSON types) kept with it: its source run, say.
    """

    id: str
    namespace: str
    text: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class ScoredMemory:
    """A memory found by a search, with its relevance.

    Attributes:
        item: The memory.
        score: Cosine similarity with embeddings, else a BM25 score (higher is more relevant;
            comparable only within one search).
    """

    item: MemoryItem
    score: float


@runtime_checkable
class MemoryBank(Protocol):
    """The port of memory stores: memories by namespace, and relevance search.

    Every operation is scoped by namespace: an id of another namespace is unknown.
    """

    async def add(
        self, namespace: str, text: str, *, metadata: dict[str, Any] | None = None
    ) -> MemoryItem:
        """Store a new memory and return it (with its new id)."""
        ...

    async def update(
        self, namespace: str, id: str, text: str, *, metadata: dict[str, Any] | None = None
    ) -> MemoryItem:
        """Replace a memory's text (and metadata, when given); ``KeyError`` for an unknown id."""
        ...

    async def delete(self, namespace: str, id: str) -> bool:
        """Remove a memory; whether it existed."""
        ...

    async def get(self, namespace: str, id: str) -> MemoryItem | None:
        """One memory, or ``None``."""
        ...

    async def search(
        self, namespace: str, query: str, limit: int = 5
    ) -> builtins.list[ScoredMemory]:
        """The memories most relevant to ``query``, best first, ties by id.

        Keyword ranking leaves out memories sharing no term with the query.
        """
        ...

    async def list(self, namespace: str) -> builtins.list[MemoryItem]:
        """Every memory of a namespace, oldest first."""
        ...


# -- shared helpers ----------------------------------------------------------------------------


class _Embedder:
    """An ``Embed`` function made async and checked, with the name its vectors are kept under."""

    def __init__(self, fn: Embed, name: str | None) -> None:
        self.fn = fn
        self.name = name or _name_of(fn)

    async def __call__(self, texts: builtins.list[str]) -> builtins.list[builtins.list[float]]:
        if not texts:
            return []
        fn: Any = self.fn
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an async __call__ is what is asked
        ):
            out = await fn(texts)
        else:
            out = await asyncio.to_thread(fn, texts)
            if inspect.isawaitable(out):
                out = await out
        vectors = [[float(x) for x in v] for v in out]
        if len(vectors) != len(texts):
            raise UsageError(
                f"embedder {self.name!r} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors


def _name_of(fn: Embed) -> str:
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None) or type(fn).__module__}.{qualname}"


def _check_limit(limit: int) -> None:
    if limit < 0:
        raise UsageError(f"limit must be 0 or more, not {limit}")


def _clean(text: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError("a memory needs some text")
    return text


def _keyword(query: str, items: Sequence[MemoryItem], limit: int) -> list[ScoredMemory]:
    by_id = {i.id: i for i in items}
    ranked = bm25_rank(query, [(i.id, i.text) for i in items])
    return [ScoredMemory(item=by_id[d], score=s) for d, s in ranked if s > 0][:limit]


def _by_vector(
    query: Sequence[float], items: Sequence[tuple[MemoryItem, Sequence[float]]], limit: int
) -> list[ScoredMemory]:
    by_id = {i.id: i for i, _ in items}
    ranked = similarity_rank(query, [(i.id, v) for i, v in items])
    return [ScoredMemory(item=by_id[d], score=s) for d, s in ranked][:limit]


def _now() -> datetime:
    return datetime.now(UTC)


# -- the fake ----------------------------------------------------------------------------------


class InMemoryMemoryBank:
    """A fake ``MemoryBank`` in process memory, for tests: nothing survives the process.

    Args:
        embed: An embedding function; without one, search ranks by keywords (BM25).
        embed_name: The name vectors are kept under (default: the function's ``name``
            attribute or qualified name).
        clock: The time stamps' source (default: now, in UTC).
    """

    def __init__(
        self,
        embed: Embed | None = None,
        *,
        embed_name: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._embed = _Embedder(embed, embed_name) if embed is not None else None
        self._clock = clock or _now
        self._items: dict[str, MemoryItem] = {}
        self._vectors: dict[str, builtins.list[float]] = {}
        self._next = 1

    async def add(
        self, namespace: str, text: str, *, metadata: dict[str, Any] | None = None
    ) -> MemoryItem:
        """Store a new memory.

        Args:
            namespace: Whose memory it is.
            text: The memory.
            metadata: Plain data kept with it.
        """
        text = _clean(text)
        vector = (await self._embed([text]))[0] if self._embed else None
        now = self._clock()
        item = MemoryItem(
            id=f"mem{self._next}",
            namespace=namespace,
            text=text,
            created_at=now,
            updated_at=now,
            metadata=dict(metadata or {}),
        )
        self._next += 1
        self._items[item.id] = item
        if vector is not None:
            self._vectors[item.id] = vector
        return item

    async def update(
        self, namespace: str, id: str, text: str, *, metadata: dict[str, Any] | None = None
    ) -> MemoryItem:
        """Replace a memory's text.

        Args:
            namespace: Whose memory it is.
            id: The memory.
            text: Its new text.
            metadata: New metadata (``None``: keep the old).
        """
        text = _clean(text)
        old = self._items.get(id)
        if old is None or old.namespace != namespace:
            raise KeyError(f"no memory {id!r} in namespace {namespace!r}")
        vector = (await self._embed([text]))[0] if self._embed else None
        item = replace(
            old,
            text=text,
            updated_at=self._clock(),
            metadata=dict(metadata) if metadata is not None else old.metadata,
        )
        self._items[id] = item
        if vector is not None:
            self._vectors[id] = vector
        return item

    async def delete(self, namespace: str, id: str) -> bool:
        """Remove a memory.

        Args:
            namespace: Whose memory it is.
            id: The memory.
        """
        if await self.get(namespace, id) is None:
            return False
        del self._items[id]
        self._vectors.pop(id, None)
        return True

    async def get(self, namespace: str, id: str) -> MemoryItem | None:
        """One memory.

        Args:
            namespace: Whose memory it is.
            id: The memory.
        """
        item = self._items.get(id)
        return item if item is not None and item.namespace == namespace else None

    async def search(
        self, namespace: str, query: str, limit: int = 5
    ) -> builtins.list[ScoredMemory]:
        """The memories most relevant to ``query``.

        Args:
            namespace: Whose memories.
            query: What to look for.
            limit: At most this many.
        """
        _check_limit(limit)
        items = await self.list(namespace)
        if self._embed is None:
            return _keyword(query, items, limit)
        if not items:
            return []
        qv = (await self._embed([query]))[0]
        return _by_vector(qv, [(i, self._vectors[i.id]) for i in items], limit)

    async def list(self, namespace: str) -> builtins.list[MemoryItem]:
        """Every memory of a namespace, oldest first.

        Args:
            namespace: Whose memories.
        """
        return [i for i in self._items.values() if i.namespace == namespace]
