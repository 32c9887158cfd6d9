"""Large payloads out of the history: a payload codec that stores them by reference.

Temporal keeps every workflow input, activity input and result in the workflow's history and
refuses a payload above 2 MB (by default). ``LargePayloadCodec`` is a
``temporalio.converter.PayloadCodec``: a payload above its threshold is stored, compressed, in
a ``BlobStore`` (a content-addressed folder or a SQLite file every worker and client reaches)
and the history keeps a small reference (its SHA-256 and size). Smaller payloads are
compressed in place when that saves space. The codec runs in clients and workers, outside the
workflow sandbox, so the workflow code sees the original values.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

__all__ = [
    "REF_ENCODING",
    "ZLIB_ENCODING",
    "BlobStore",
    "FolderBlobs",
    "LargePayloadCodec",
    "SqliteBlobs",
]

REF_ENCODING = b"binary/steadyrun-blob-ref"
"""The ``encoding`` metadata of a payload that refers to a stored blob."""
ZLIB_ENCODING = b"binary/steadyrun-zlib"
"""The ``encoding`` metadata of a payload compressed in place."""

_MIN_COMPRESS = 1024  # smaller payloads are left as they are


@runtime_checkable
class BlobStore(Protocol):
    """Where ``LargePayloadCodec`` keeps large payloads, by content hash.

    Every client and worker of a task queue must reach the same blobs. Writes are idempotent:
    the same key always holds the same bytes.
    """

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (its SHA-256 hex digest); a second put is a no-op."""
        ...

    async def get(self, key: str) -> bytes:
        """The bytes stored under ``key``.

        Raises:
            KeyError: No blob has this key.
        """
        ...


class FolderBlobs:
    """Blobs as files of a folder (``<root>/<key[:2]>/<key>``), written atomically.

    Args:
        root: The folder; created when missing. Share it (a network file system) between
            machines, or use another ``BlobStore``.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        if not key.isalnum():
            raise ValueError(f"bad blob key {key!r}")
        return self.root / key[:2] / key

    async def put(self, key: str, data: bytes) -> None:
        """Write the blob unless it exists (temporary file, then rename)."""
        await asyncio.to_thread(self._put, key, data)

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{os.getpid()}.{id(data)}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def get(self, key: str) -> bytes:
        """Read the blob."""
        try:
            return await asyncio.to_thread(self._path(key).read_bytes)
        except FileNotFoundError:
            raise KeyError(key) from None


class SqliteBlobs:
    """Blobs in a SQLite file (table ``steadyrun_blobs``), for workers that share a disk.

    Args:
        path: The database file; may be the steadyrun store's own file (its own table).
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS steadyrun_blobs (key TEXT PRIMARY KEY, data BLOB NOT NULL)"
    )

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        if not self._ready:
            conn.execute(self._SCHEMA)
            conn.commit()
            self._ready = True
        return conn

    async def put(self, key: str, data: bytes) -> None:
        """Insert the blob unless it exists."""
        await asyncio.to_thread(self._put, key, data)

    def _put(self, key: str, data: bytes) -> None:
        conn = self._connect()
        try:
            conn.execute(
                "INSERT OR IGNORE INTO steadyrun_blobs (key, data) VALUES (?, ?)", (key, data)
            )
            conn.commit()
        finally:
            conn.close()

    async def get(self, key: str) -> bytes:
        """Read the blob."""
        return await asyncio.to_thread(self._get, key)

    def _get(self, key: str) -> bytes:
        conn = self._connect()
        try:
            row = conn.execute("SELECT data FROM steadyrun_blobs WHERE key = ?", (key,)).fetchone()
        finally:
            conn.close()
        if row is None:
            raise KeyError(key)
        return bytes(row[0])


class LargePayloadCodec(PayloadCodec):
    """A payload codec keeping payloads above ``threshold`` bytes out of the history.

    A large payload is serialized, compressed and stored in ``blobs`` under its SHA-256; the
    history holds a reference of about a hundred bytes (encoding ``binary/steadyrun-blob-ref``).
    With ``compress``, a smaller payload that shrinks is compressed in place. Payloads this
    codec did not encode pass through ``decode`` unchanged, so it can be turned on for a task
    queue with runs already going.

    Args:
        blobs: Where large payloads go (``FolderBlobs``, ``SqliteBlobs`` or your own
            ``BlobStore``); every client and worker must reach the same one.
        threshold: Size in bytes (of the serialized payload) above which it is stored.
        compress: Whether to compress payloads (stored and in place).

    Example:
        ``TemporalOptions(payload_codec=LargePayloadCodec(FolderBlobs("/shared/blobs")))``
    """

    def __init__(
        self, blobs: BlobStore, *, threshold: int = 128 * 1024, compress: bool = True
    ) -> None:
        if threshold < 0:
            raise ValueError("threshold must be >= 0")
        self.blobs = blobs
        self.threshold = threshold
        self.compress = compress

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Store large payloads and leave references; compress others when it helps."""
        return [await self._encode(p) for p in payloads]

    async def _encode(self, payload: Payload) -> Payload:
        raw = payload.SerializeToString()
        if len(raw) > self.threshold:
            data = zlib.compress(raw, 6) if self.compress else raw
            key = hashlib.sha256(data).hexdigest()
            await self.blobs.put(key, data)
            ref = {"key": key, "size": len(raw), "zlib": self.compress}
            return Payload(
                metadata={"encoding": REF_ENCODING},
                data=json.dumps(ref, separators=(",", ":")).encode(),
            )
        if self.compress and len(raw) >= _MIN_COMPRESS:
            packed = zlib.compress(raw, 6)
            if len(packed) < len(raw) * 0.9:
                return Payload(metadata={"encoding": ZLIB_ENCODING}, data=packed)
        return payload

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Load referenced payloads and uncompress compressed ones."""
        return [await self._decode(p) for p in payloads]

    async def _decode(self, payload: Payload) -> Payload:
        encoding = payload.metadata.get("encoding", b"")
        if encoding == ZLIB_ENCODING:
            return _parsed(zlib.decompress(payload.data))
        if encoding != REF_ENCODING:
            return payload
        ref = json.loads(payload.data)
        key = str(ref["key"])
        data = await self.blobs.get(key)
        if hashlib.sha256(data).hexdigest() != key:
            raise ValueError(f"blob {key} does not match its hash")
        return _parsed(zlib.decompress(data) if ref.get("zlib") else data)


def _parsed(raw: bytes) -> Payload:
    out = Payload()
    out.ParseFromString(raw)
    return out
