"""Ports (``Journal``, ``Feed``) and the in-memory adapter; durable adapters live beside it.

``PostgresStore`` and ``PostgresLeases`` are imported on first access: they need the
``postgres`` extra (psycopg), and ``import steadyrun`` works without it.
"""

import importlib
from typing import TYPE_CHECKING, Any

from steadyrun.stores._export import EXPORT_FORMAT, export_document, read_document
from steadyrun.stores._history import StepHistory
from steadyrun.stores._leases import Fence, Lease, LeaseLostError, Leases
from steadyrun.stores._lifecycle import FeedDump, RunDeletion, RunDump, RunLifecycle
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
    from steadyrun.stores._leases_postgres import PostgresLeases as PostgresLeases
    from steadyrun.stores._postgres import PostgresStore as PostgresStore

__all__ = [
    "EXPORT_FORMAT",
    "Claim",
    "Feed",
    "FeedDump",
    "FeedMessage",
    "Fence",
    "Journal",
    "Lease",
    "LeaseLostError",
    "Leases",
    "MemoryStore",
    "RunDeletion",
    "RunDump",
    "RunIndex",
    "RunLifecycle",
    "RunSummary",
    "SqliteStore",
    "StepHistory",
    "Store",
    "export_document",
    "read_document",
]


_OPTIONAL = {
    "PostgresStore": "steadyrun.stores._postgres",
    "PostgresLeases": "steadyrun.stores._leases_postgres",
}


def __getattr__(name: str) -> Any:
    module = _OPTIONAL.get(name)
    if module is not None:
        try:
            value = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise ImportError(
                f"{name} needs psycopg and psycopg-pool: pip install 'steadyrun[postgres]'"
            ) from exc
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # Listed for discovery, but kept out of __all__: ``import *`` must work without psycopg.
    return sorted([*__all__, *_OPTIONAL])
