"""What ``MemoryStore`` keeps of a run and of a feed: encoded bytes, as a database row holds.

The store and its lifecycle mixin (``_lifecycle_memory.py``) both read and write these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from steadyrun.stores._history_memory import MemoryHistory

__all__ = ["StoredFeed", "StoredRun"]


@dataclass(slots=True)
class StoredRun:
    """A run: its record and checkpoint, context log, calls, blocks and step history.

    ``whole`` holds, by call id, the ``rev`` and the very bytes of each call record that a
    newer runtime snapshot replaces whole (``replaced_whole``): such a snapshot is written
    without decoding the record. An entry counts only while ``calls`` holds those same bytes
    (the same object), so code that writes ``calls`` directly can never make it wrong.
    """

    run: bytes
    checkpoint: bytes
    context: list[bytes] = field(default_factory=list)
    calls: dict[str, bytes] = field(default_factory=dict)
    whole: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    blocks: dict[str, bytes] = field(default_factory=dict)
    history: MemoryHistory = field(default_factory=MemoryHistory)


@dataclass(slots=True)
class StoredFeed:
    """A feed: its messages, their keys and how far the run consumed them."""

    messages: list[bytes] = field(default_factory=list)
    keys: dict[tuple[str, str], int] = field(default_factory=dict)  # (id, revision) -> seq
    consumed: int = 0
