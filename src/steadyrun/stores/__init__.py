"""Ports (``Journal``, ``Feed``) and the in-memory adapter; durable adapters live beside it.

``PostgresStore`` is imported on first access: it needs the ``postgres`` extra (psycopg), and
``import steadyrun`` works without it.
"""

from typing import TYPE_CHECKING, Any

from steadyrun.stores._leases import Fence, Lease, LeaseLostError, Leases
from steadyrun.stores._memory import MemoryStore
from steadyrun.stores._ports import (
    Claim,
    Feed,
    FeedMessage,
    Journal,
    RunIndex,
    RunSummary,
    Store,
)
from steadyrun.stores._sqlite import SqliteStore

if TYPE_CHECKING:
    from steadyrun.stores._postgres import PostgresStore as PostgresStore

__all__ = [
    "Claim",
    "Feed",
    "FeedMessage",
    "Fence",
    "Journal",
    "Lease",
    "LeaseLostError",
    "Leases",
    "MemoryStore",
    "RunIndex",
    "RunSummary",
    "SqliteStore",
    "Store",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        try:
            from steadyrun.stores._postgres import PostgresStore as PostgresStore
        except ImportError as exc:
            raise ImportError(
                "PostgresStore needs psycopg and psycopg-pool: pip install 'steadyrun[postgres]'"
            ) from exc
        globals()[name] = PostgresStore
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # Listed for discovery, but kept out of __all__: ``import *`` must work without psycopg.
    return sorted([*__all__, "PostgresStore"])
