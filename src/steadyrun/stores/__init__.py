"""Ports (``Journal``, ``Feed``) and the in-memory adapter; durable adapters live beside it."""

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

__all__ = [
    "Claim",
    "Feed",
    "FeedMessage",
    "Journal",
    "MemoryStore",
    "RunIndex",
    "RunSummary",
    "SqliteStore",
    "Store",
]
