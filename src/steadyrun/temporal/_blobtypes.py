"""The blob store protocols of ``LargePayloadCodec`` (see ``_blobs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = ["BlobStore", "OwnedBlobStore"]


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


@runtime_checkable
class OwnedBlobStore(BlobStore, Protocol):
    """A ``BlobStore`` that records which runs (workflow ids) own each blob, so it can collect.

    An owner's reference carries the time it was added: ``release`` removes only references
    added at or before a given time, so a run that started again since (the same workflow id)
    keeps what it wrote.
    """

    async def put_owned(self, key: str, data: bytes, owner: str) -> None:
        """``put``, and record ``owner`` as holding the blob (now)."""
        ...

    async def owners(self) -> list[str]:
        """The owners that hold blobs, sorted."""
        ...

    async def release(self, owner: str, through: datetime) -> int:
        """Drop ``owner``'s references added up to ``through``; returns how many blobs went.

        The blobs no owner holds any more are deleted.
        """
        ...
