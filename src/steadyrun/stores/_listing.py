"""Listing runs: the one filter rule every store applies, in Python or as SQL.

``RunIndex.list_runs`` takes the same three filters on every store; ``RunFilter`` holds them
and says both what a run must be to be listed (the memory store's scan) and the ``WHERE``
clause that says the same to SQLite and PostgreSQL, so the stores cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from steadyrun.records import RunRecord, RunStatus
from steadyrun.stores._ports import RunSummary

__all__ = ["LISTED_COLUMNS", "RunFilter", "record_summary", "summary_of"]

LISTED_COLUMNS = "run_id, agent, status, created_us, updated_us, steps"
"""The ``runs`` columns a listing reads, in the order ``summary_of`` expects."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFilter:
    """The filters of ``list_runs``; ``None`` filters nothing.

    Attributes:
        status: Only runs with this status.
        agent: Only runs of this agent.
        updated_before: Only runs last saved before this moment (a run never saved is left
            out, as its time is unknown).
    """

    status: RunStatus | None = None
    agent: str | None = None
    updated_before: datetime | None = None

    def admits(self, run: RunRecord) -> bool:
        """Whether the filters let ``run`` be listed."""
        if self.status is not None and run.status != self.status:
            return False
        if self.agent is not None and run.agent != self.agent:
            return False
        if self.updated_before is None:
            return True
        return run.updated_at is not None and run.updated_at < self.updated_before

    def where(self, mark: str, to_us: Callable[[datetime], int | None]) -> tuple[str, list[Any]]:
        """The filters as a SQL condition over the ``runs`` columns, and its arguments.

        Args:
            mark: The driver's placeholder (``?`` for SQLite, ``%s`` for psycopg).
            to_us: How the store writes a time as ``updated_us``.

        Returns:
            ``" WHERE ..."`` (empty when nothing is filtered) and the values of its
            placeholders, in order.
        """
        terms: list[str] = []
        args: list[Any] = []
        if self.status is not None:
            terms.append(f"status = {mark}")
            args.append(self.status)
        if self.agent is not None:
            terms.append(f"agent = {mark}")
            args.append(self.agent)
        if self.updated_before is not None:
            # NULL < x is never true: a run never saved is left out, as admits says.
            terms.append(f"updated_us < {mark}")
            args.append(to_us(self.updated_before))
        return (" WHERE " + " AND ".join(terms) if terms else ""), args


def summary_of(row: Sequence[Any], to_dt: Callable[[Any], datetime | None]) -> RunSummary:
    """The summary a row of ``LISTED_COLUMNS`` describes; ``to_dt`` reads a stored time."""
    return RunSummary(
        run_id=row[0],
        agent=row[1],
        status=row[2],
        created_at=to_dt(row[3]),
        updated_at=to_dt(row[4]),
        steps=row[5],
    )


def record_summary(run: RunRecord) -> RunSummary:
    """The summary of a run's record (a store that keeps records rather than columns)."""
    return summary_of(
        (run.run_id, run.agent, run.status, run.created_at, run.updated_at, run.steps),
        lambda stored: stored,
    )
