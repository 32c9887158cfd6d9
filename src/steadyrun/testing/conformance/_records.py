"""Builders of the records the checks save, with fixed times so every check is deterministic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from steadyrun.chat import Message
from steadyrun.records import Block, CallRecord, Checkpoint, RunRecord, RunSnapshot, Step
from steadyrun.stores import FeedMessage, Journal
from steadyrun.testing.conformance._expect import fail

__all__ = ["RUN", "T0", "at", "block", "by_id", "call", "load", "msg", "run_row", "step", "user"]

RUN = "run-1"
"""The run most checks use."""

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
"""The time the checks' runs start (whole seconds: every database keeps them exactly)."""


def at(seconds: int) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def run_row(run_id: str = RUN, **fields: Any) -> RunRecord:
    """A run row of agent ``agent`` unless given."""
    fields.setdefault("agent", "agent")
    fields.setdefault("created_at", T0)
    fields.setdefault("updated_at", T0)
    return RunRecord(run_id=run_id, **fields)


def call(call_id: str = "c1", rev: int = 1, **fields: Any) -> CallRecord:
    """A call record of tool ``tool`` unless given."""
    fields.setdefault("name", "tool")
    return CallRecord(id=call_id, rev=rev, **fields)


def block(block_id: str, position: int, **fields: Any) -> Block:
    """A ``content`` block unless given."""
    fields.setdefault("kind", "content")
    return Block(id=block_id, position=position, **fields)


def step(run_id: str = RUN, **fields: Any) -> Step:
    """A step of ``run_id`` with a default run row and checkpoint unless given."""
    fields.setdefault("run", run_row(run_id))
    fields.setdefault("checkpoint", Checkpoint())
    return Step(**fields)


def user(text: str) -> Message:
    """A user message of plain text."""
    return Message.user(text)


def msg(mid: str, revision: str = "1", content: str | None = None) -> FeedMessage:
    """An input message (``seq`` 0, as sent to ``append``)."""
    return FeedMessage(id=mid, revision=revision, content=content or f"text of {mid}")


def by_id(calls: list[CallRecord]) -> dict[str, CallRecord]:
    """Call records keyed by id."""
    return {c.id: c for c in calls}


async def load(store: Journal, run_id: str = RUN) -> RunSnapshot:
    """Load a run that must exist."""
    snap = await store.load(run_id)
    if snap is None:
        fail(f"load({run_id!r}) returned None for a run that was saved")
    return snap
