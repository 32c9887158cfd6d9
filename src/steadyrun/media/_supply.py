"""Media the runtime read and verified for one model call, handed to the provider adapter.

The runtime reads media before a model call (checking each SHA-256) and sets the supply for
the duration of the call; adapters take bytes and URLs from it before asking their own
``media_reader``/``media_url``. A context variable carries it, so the ``ModelClient``
protocol stays ``respond(request)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from steadyrun.chat import MediaRef

__all__ = [
    "MediaSupply",
    "current_supply",
    "media_ref",
    "supplied_bytes",
    "supplied_url",
    "supplying",
]


def _key(ref: MediaRef) -> str:
    return f"{ref.key}\x00{ref.sha256 or ''}"


@dataclass(slots=True)
class MediaSupply:
    """Bytes and URLs of the media of one request, by reference."""

    data: dict[str, bytes] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    def add_bytes(self, ref: MediaRef, data: bytes) -> None:
        """Supply the (verified) bytes of ``ref``."""
        self.data[_key(ref)] = data

    def add_url(self, ref: MediaRef, url: str) -> None:
        """Supply a URL the provider fetches ``ref`` from."""
        self.urls[_key(ref)] = url


_CURRENT: ContextVar[MediaSupply | None] = ContextVar("steadyrun_media_supply", default=None)


@contextmanager
def supplying(supply: MediaSupply | None) -> Iterator[None]:
    """Make ``supply`` the media of the model call made inside the block."""
    token = _CURRENT.set(supply)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_supply() -> MediaSupply | None:
    """The media supplied to the current model call; ``None`` when none were."""
    supply = _CURRENT.get()
    return supply if supply is not None and (supply.data or supply.urls) else None


def supplied_bytes(ref: MediaRef) -> bytes | None:
    """The bytes the runtime read for ``ref`` for the current call, if it did."""
    supply = _CURRENT.get()
    return None if supply is None else supply.data.get(_key(ref))


def supplied_url(ref: MediaRef) -> str | None:
    """The URL the runtime chose for ``ref`` for the current call, if any."""
    supply = _CURRENT.get()
    return None if supply is None else supply.urls.get(_key(ref))


def media_ref(key: str, data: bytes, mime: str) -> MediaRef:
    """A reference to ``data`` the host stores under ``key``: its size and SHA-256 computed.

    Store the bytes yourself (a bucket, a folder, a table); the run keeps only this reference.
    """
    return MediaRef(key=key, mime=mime, size=len(data), sha256=hashlib.sha256(data).hexdigest())
