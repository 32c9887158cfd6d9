"""The display stream of runs: snapshots, deltas, a pure ``apply``, and the publisher.

A display (a web page, a terminal) takes a ``DisplaySnapshot`` and then applies each ``Delta``
with ``apply``; a client that joins late or lost its connection asks for a snapshot again.
``Publisher`` is an ``Observer`` that produces the deltas of runs executing in this process.
Snapshots and deltas go over the wire as versioned JSON (``to_json`` / ``delta_from_json``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

from steadyrun._codec import decode, encode
from steadyrun.stores import Store
from steadyrun.stream._diff import (
    diff,
    display_call,
    display_from_run,
    pending_items,
    snapshot_from_store,
)
from steadyrun.stream._model import (
    BlockAdded,
    BlockRemoved,
    BlockUpdated,
    CallRemoved,
    CallStatusChanged,
    Delta,
    DisplayBlock,
    DisplayCall,
    DisplayDecision,
    DisplayInput,
    DisplayPending,
    DisplaySnapshot,
    Fragment,
    PendingChanged,
    PlanChanged,
    RunStatusChanged,
    SequenceGapError,
    TextFragment,
    ThinkingFragment,
    ToolArgumentsFragment,
    UsageChanged,
    apply,
    coalesce,
)
from steadyrun.stream._publisher import Publisher, StreamEvent

__all__ = [
    "BlockAdded",
    "BlockRemoved",
    "BlockUpdated",
    "CallRemoved",
    "CallStatusChanged",
    "Delta",
    "DisplayBlock",
    "DisplayCall",
    "DisplayDecision",
    "DisplayInput",
    "DisplayPending",
    "DisplaySnapshot",
    "Fragment",
    "PendingChanged",
    "PlanChanged",
    "Publisher",
    "RunStatusChanged",
    "SequenceGapError",
    "StreamEvent",
    "TextFragment",
    "ThinkingFragment",
    "ToolArgumentsFragment",
    "UsageChanged",
    "apply",
    "coalesce",
    "delta_from_json",
    "follow",
    "diff",
    "display_call",
    "display_from_run",
    "pending_items",
    "snapshot_from_json",
    "snapshot_from_store",
    "to_json",
]


def to_json(value: DisplaySnapshot | Delta) -> bytes:
    """A snapshot or delta as versioned JSON, ``{"format": 1, "data": {...}}``."""
    if isinstance(value, DisplaySnapshot):
        return encode(value)
    return encode(value, Delta)


def snapshot_from_json(raw: bytes | str) -> DisplaySnapshot:
    """Read a snapshot written by ``to_json``."""
    return decode(raw, DisplaySnapshot)


def delta_from_json(raw: bytes | str) -> Delta:
    """Read a delta written by ``to_json``."""
    return cast(Delta, decode(raw, cast(Any, Delta)))


async def follow(
    store: Store, run_id: str, last_event_id: str | None = None
) -> AsyncIterator[StreamEvent]:
    """The display stream of a run, wherever it executes: a snapshot, then its deltas.

    For a process that does not execute the run (a dashboard, a CLI, a second service): the
    run's owner, in any process on the same store, publishes on the store's live feed, so the
    model's words arrive as they are written and each save is seen at once. Fold the events
    with ``apply`` (a ``snapshot`` event starts over). Ends only when the caller stops reading.

    Raises:
        RunNotFoundError: The store has no such run.

    Example:
        ``async for event in follow(store, "r-1"): ...``
    """
    publisher = Publisher(store)
    async for event in publisher.follow(run_id, last_event_id):
        yield event
