"""Paging runs by cursor, and the inbox: what waits for a person across runs.

Every store lists runs newest first by ``(updated_at, run_id)`` and filters by status, agent
and ``updated_before``. A cursor is the position of the last run a page showed; the next page
asks the store for runs updated up to that moment and drops those at or before the position,
so runs saved in the same microsecond are neither skipped nor repeated. Filters no store
offers (an id prefix, ``updated_after``) are applied while reading; the scan stops at the
first run older than ``updated_after``, as runs come newest first.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from steadyrun._errors import UsageError
from steadyrun.records import RunStatus
from steadyrun.stores import RunSummary, Store

__all__ = ["RunQuery", "decode_cursor", "encode_cursor", "scan_runs"]

_TICK = timedelta(microseconds=1)

Position = tuple[datetime, str]


def encode_cursor(run: RunSummary) -> str:
    """The cursor of the page after ``run``: its position, as opaque URL-safe text."""
    assert run.updated_at is not None  # listed after a cursor only runs that were saved
    raw = json.dumps([run.updated_at.isoformat(), run.run_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names.

    Raises:
        UsageError: It is not a cursor this API gave out.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, run_id = json.loads(raw)
        return datetime.fromisoformat(at), str(run_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise UsageError(
            "cursor is not one this API gave out: pass next_cursor of the previous page"
        ) from exc


@dataclass(frozen=True, kw_only=True, slots=True)
class RunQuery:
    """What runs to list: the store's filters and the API's own.

    Attributes:
        status: Only runs with this status.
        agent: Only runs of this agent.
        id_prefix: Only runs whose id starts with this.
        updated_after: Only runs last saved after this moment.
        updated_before: Only runs last saved before this moment.
        cursor: Start after this position (``decode_cursor``).
    """

    status: RunStatus | None = None
    agent: str | None = None
    id_prefix: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    cursor: Position | None = None

    def wants(self, run: RunSummary) -> bool:
        """Whether the API's own filters keep ``run`` (the store applied the others)."""
        return self.id_prefix is None or run.run_id.startswith(self.id_prefix)


async def scan_runs(
    store: Store,
    query: RunQuery,
    take: Callable[[RunSummary], Awaitable[int]],
    *,
    enough: int,
    most: int = 10_000,
) -> RunSummary | None:
    """Hand runs matching ``query`` to ``take``, newest first, until it has ``enough``.

    ``take`` returns how much a run counts (1 for a listed run, its items for the inbox, 0
    to skip it). At most ``most`` runs are read in one scan.

    Returns:
        The last run handed over when more may follow (the next page's cursor), else ``None``.
    """
    position = query.cursor
    taken = read = 0
    batch_size = max(2 * enough, 50)
    last: RunSummary | None = None
    while True:
        bound = query.updated_before
        if position is not None:
            after = position[0] + _TICK
            bound = after if bound is None else min(bound, after)
        batch = await store.list_runs(
            status=query.status, agent=query.agent, updated_before=bound, limit=batch_size
        )
        fresh = [r for r in batch if position is None or _before(r, position)]
        if not fresh and len(batch) == batch_size:
            batch_size *= 2  # a whole batch saved in one microsecond, all seen: read more
            continue
        for run in fresh:
            if query.updated_after is not None and (
                run.updated_at is None or run.updated_at <= query.updated_after
            ):
                return None
            if taken >= enough or read >= most:
                # No cursor points past a run never saved (listed last, without a time).
                return last if last is not None and last.updated_at is not None else None
            read += 1
            last = run
            if run.updated_at is not None:
                position = (run.updated_at, run.run_id)
            if query.wants(run):
                taken += await take(run)
        if len(batch) < batch_size:
            return None


def _before(run: RunSummary, position: Position) -> bool:
    # Newest first, ties by run id descending: the order of every store's listing.
    return run.updated_at is not None and (run.updated_at, run.run_id) < position
