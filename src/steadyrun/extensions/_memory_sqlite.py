"""``SqliteMemoryBank``: memories in a SQLite file, relevance by embeddings or keywords."""

from __future__ import annotations

import builtins
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from steadyrun._codec import decode, encode
from steadyrun._errors import FormatVersionError, StoreError, UsageError
from steadyrun._sqlite_thread import SqliteThread
from steadyrun._sqlite_wal import use_wal
from steadyrun.extensions._memory_rank import from_blob, to_blob
from steadyrun.extensions._memory_store import (
    Embed,
    MemoryItem,
    OnEmbedderChange,
    ScoredMemory,
    _by_vector,
    _check_limit,
    _clean,
    _Embedder,
    _keyword,
    _now,
)

__all__ = ["MEMORY_SCHEMA_VERSION", "SqliteMemoryBank"]

T = TypeVar("T")

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
        self._db = SqliteThread(self._open, f"SQLite memory bank {self.path}", "steadyrun-mem")

    @property
    def embed_name(self) -> str | None:
        """The name this bank's vectors are stored under (``None``: keyword ranking)."""
        return self._embed.name if self._embed else None

    # -- plumbing ------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.run(fn)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            use_wal(conn, self._busy_ms / 1000)  # another process may be opening it too
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
        await self._db.close()

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
