"""Large payloads out of the history: a payload codec that stores them by reference.

Temporal keeps every workflow input, activity input and result in the workflow's history and
refuses a payload above 2 MB (by default). ``LargePayloadCodec`` is a
``temporalio.converter.PayloadCodec``: a payload above its threshold is stored, compressed, in
a ``BlobStore`` (a content-addressed folder or a SQLite file every worker and client reaches)
and the history keeps a small reference (its SHA-256 and size). Smaller payloads are
compressed in place when that saves space. The codec runs in clients and workers, outside the
workflow sandbox, so the workflow code sees the original values.

Collection: Temporal tells a codec which workflow a payload belongs to (its serialization
context); the codec records that workflow id as an owner of the blob in stores that keep owners
(``OwnedBlobStore``: both stores here). A blob is content-addressed, so several runs may own
it; it is deleted only when its last owner lets go (``release``), which ``collect_blobs``
(``_blobgc``) does for workflows Temporal reports closed past a grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import os
import sqlite3
import time
import zlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext

from steadyrun.temporal._blobgc import BlobCollector, collect_blobs
from steadyrun.temporal._blobtypes import BlobStore, OwnedBlobStore

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = [
    "REF_ENCODING",
    "ZLIB_ENCODING",
    "BlobStore",
    "FolderBlobs",
    "LargePayloadCodec",
    "OwnedBlobStore",
    "SqliteBlobs",
]

REF_ENCODING = b"binary/steadyrun-blob-ref"
"""The ``encoding`` metadata of a payload that refers to a stored blob."""
ZLIB_ENCODING = b"binary/steadyrun-zlib"
"""The ``encoding`` metadata of a payload compressed in place."""

_MIN_COMPRESS = 1024  # smaller payloads are left as they are


def _hex(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()


class FolderBlobs:
    """Blobs as files of a folder (``<root>/<key[:2]>/<key>``), written atomically.

    Owners are marker files: ``<root>/.owners/<h>/<key>`` (``h`` the SHA-256 of the owner,
    whose id is in ``<root>/.owners/<h>/.id``) and ``<root>/.refs/<key>/<h>``; a marker's
    modification time is when the reference was added. Run one collector at a time.

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

    async def put_owned(self, key: str, data: bytes, owner: str) -> None:
        """Mark ``owner`` as holding the blob, then write it unless it exists.

        A collector racing the write either sees the marker or deleted the file before the
        writer looked for it (so the writer writes it again).
        """
        await asyncio.to_thread(self._put_owned, key, data, owner)

    def _put_owned(self, key: str, data: bytes, owner: str) -> None:
        self._path(key)  # checks the key
        h = _hex(owner)
        mine = self.root / ".owners" / h
        mine.mkdir(parents=True, exist_ok=True)
        ident = mine / ".id"
        if not ident.exists():
            ident.write_text(owner, encoding="utf-8")
        refs = self.root / ".refs" / key
        while True:
            refs.mkdir(parents=True, exist_ok=True)
            try:
                (refs / h).touch()
                break
            except FileNotFoundError:
                continue  # a collector removed the empty folder meanwhile
        (mine / key).touch()
        path = self._path(key)
        if not path.exists():
            self._put(key, data)

    async def owners(self) -> list[str]:
        """The owners holding blobs."""
        return await asyncio.to_thread(self._owners)

    def _owners(self) -> list[str]:
        base = self.root / ".owners"
        if not base.is_dir():
            return []
        out = []
        for mine in base.iterdir():
            ident = mine / ".id"
            if ident.exists() and any(p.name != ".id" for p in mine.iterdir()):
                out.append(ident.read_text(encoding="utf-8"))
        return sorted(out)

    async def release(self, owner: str, through: datetime) -> int:
        """Drop the owner's markers up to ``through``; delete blobs left without markers."""
        return await asyncio.to_thread(self._release, owner, through.timestamp())

    def _release(self, owner: str, through: float) -> int:
        h = _hex(owner)
        mine = self.root / ".owners" / h
        if not mine.is_dir():
            return 0
        deleted = 0
        for marker in list(mine.iterdir()):
            key = marker.name
            if key == ".id" or marker.stat().st_mtime > through:
                continue
            refs = self.root / ".refs" / key
            (refs / h).unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
            deleted += self._drop_if_unowned(key, refs)
        return deleted

    def _drop_if_unowned(self, key: str, refs: Path) -> int:
        if refs.is_dir() and any(refs.iterdir()):
            return 0
        path = self._path(key)
        # Moved aside, then checked again: a writer that marked the blob meanwhile keeps it.
        aside = path.with_name(f".{key}.{os.getpid()}.gone")
        try:
            os.replace(path, aside)
        except FileNotFoundError:
            return 0
        if refs.is_dir() and any(refs.iterdir()):
            os.replace(aside, path)
            return 0
        aside.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # a writer's marker arrived: it writes the blob
            refs.rmdir()
        return 1


class SqliteBlobs:
    """Blobs in a SQLite file (table ``steadyrun_blobs``), for workers that share a disk.

    Args:
        path: The database file; may be the steadyrun store's own file (its own table).
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS steadyrun_blobs (key TEXT PRIMARY KEY, data BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS steadyrun_blob_owners (key TEXT NOT NULL, owner TEXT NOT NULL,"
        " added_at REAL NOT NULL, PRIMARY KEY (owner, key))",
        "CREATE INDEX IF NOT EXISTS steadyrun_blob_owners_key ON steadyrun_blob_owners (key)",
    )

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        if not self._ready:
            for statement in self._SCHEMA:
                conn.execute(statement)
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

    async def put_owned(self, key: str, data: bytes, owner: str) -> None:
        """Insert the blob unless it exists and record ``owner``, in one transaction."""
        await asyncio.to_thread(self._put_owned, key, data, owner)

    def _put_owned(self, key: str, data: bytes, owner: str) -> None:
        conn = self._connect()
        try:
            conn.execute(
                "INSERT OR IGNORE INTO steadyrun_blobs (key, data) VALUES (?, ?)", (key, data)
            )
            conn.execute(
                "INSERT OR REPLACE INTO steadyrun_blob_owners (key, owner, added_at)"
                " VALUES (?, ?, ?)",
                (key, owner, time.time()),
            )
            conn.commit()
        finally:
            conn.close()

    async def owners(self) -> list[str]:
        """The owners holding blobs."""
        return await asyncio.to_thread(self._owners)

    def _owners(self) -> list[str]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT DISTINCT owner FROM steadyrun_blob_owners ORDER BY owner"
            ).fetchall()
        finally:
            conn.close()
        return [str(r[0]) for r in rows]

    async def release(self, owner: str, through: datetime) -> int:
        """Drop the owner's references up to ``through``; delete blobs nobody holds."""
        return await asyncio.to_thread(self._release, owner, through.timestamp())

    def _release(self, owner: str, through: float) -> int:
        conn = self._connect()
        try:
            # One write transaction: a writer recording an owner is either before (the blob
            # is held) or after (its INSERT OR IGNORE stores the blob again).
            conn.execute("BEGIN IMMEDIATE")
            keys = [
                str(r[0])
                for r in conn.execute(
                    "SELECT key FROM steadyrun_blob_owners WHERE owner = ? AND added_at <= ?",
                    (owner, through),
                )
            ]
            conn.execute(
                "DELETE FROM steadyrun_blob_owners WHERE owner = ? AND added_at <= ?",
                (owner, through),
            )
            deleted = 0
            for key in keys:
                cur = conn.execute(
                    "DELETE FROM steadyrun_blobs WHERE key = ? AND NOT EXISTS"
                    " (SELECT 1 FROM steadyrun_blob_owners WHERE key = ?)",
                    (key, key),
                )
                deleted += cur.rowcount
            conn.commit()
        finally:
            conn.close()
        return deleted


class LargePayloadCodec(PayloadCodec, WithSerializationContext):
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

    With an ``OwnedBlobStore`` each stored blob is recorded as owned by the workflow whose
    payload it is (Temporal's serialization context); ``collect`` deletes the blobs of runs
    that ended. A payload encoded without a context (no workflow) owns nothing: its blob is
    never collected.

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
        self.owner: str | None = None

    def with_context(self, context: SerializationContext) -> LargePayloadCodec:
        """This codec for payloads of one workflow (its id becomes the owner of blobs)."""
        owner = getattr(context, "workflow_id", None)
        if owner == self.owner:
            return self
        clone = copy.copy(self)
        clone.owner = owner
        return clone

    async def collect(
        self,
        client: Client,
        *,
        grace: timedelta = timedelta(hours=1),
        runs: Sequence[str] | None = None,
    ) -> int:
        """Delete the blobs of runs whose workflows closed more than ``grace`` ago.

        See ``collect_blobs``; ``runs`` limits it to those runs (and their sub-agents' child
        workflows), e.g. runs just deleted from the app's store.

        Raises:
            UsageError: The codec's blob store keeps no owners.
        """
        return await collect_blobs(client, self.blobs, grace=grace, runs=runs)

    def collecting(
        self,
        client: Client,
        *,
        every: timedelta = timedelta(minutes=10),
        grace: timedelta = timedelta(hours=1),
    ) -> BlobCollector:
        """A ``BlobCollector`` of this codec's blobs: ``collect`` every ``every`` while open.

        Example:
            ``async with worker, codec.collecting(client, every=timedelta(minutes=10)):``

        Raises:
            UsageError: The codec's blob store keeps no owners, or ``every`` is not positive.
        """
        return BlobCollector(client, self.blobs, every=every, grace=grace)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Store large payloads and leave references; compress others when it helps."""
        return [await self._encode(p) for p in payloads]

    async def _encode(self, payload: Payload) -> Payload:
        raw = payload.SerializeToString()
        if len(raw) > self.threshold:
            data = zlib.compress(raw, 6) if self.compress else raw
            key = hashlib.sha256(data).hexdigest()
            if self.owner and isinstance(self.blobs, OwnedBlobStore):
                await self.blobs.put_owned(key, data, self.owner)
            else:
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
