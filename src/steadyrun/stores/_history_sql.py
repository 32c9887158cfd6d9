"""The step history in SQL: written inside ``save_step``'s transaction, read in one snapshot.

Two tables (schema version 4 of both stores): ``step_history`` (one entry per run and step
number, with its segment) and ``context_segments`` (the context log segments rewrites
replaced). A rewrite copies the current log into ``context_segments`` inside the database,
before the step deletes it: the copy is as large as the context it replaces, which the
rewrite writes anyway, and later steps pay nothing for it. The PostgreSQL side is in
``_history_postgres.py`` (it needs psycopg; this module does not).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from steadyrun._codec import decode, decode_all
from steadyrun._errors import StoreError
from steadyrun.chat import Message
from steadyrun.records import Step
from steadyrun.records._history import StepEntry
from steadyrun.stores._history import encode_entry, entry_of, next_segment, start_of

__all__ = [
    "ARCHIVE",
    "SqliteHistory",
    "ARCHIVED",
    "CURRENT",
    "ENTRY",
    "LIST",
    "PREVIOUS",
    "STEP",
    "UNREAD",
    "messages_of",
    "sql",
    "sqlite_context_at",
    "sqlite_entry",
    "sqlite_history",
    "sqlite_segment",
]

PREVIOUS = (
    "SELECT segment FROM {t}step_history WHERE run_id = {p} AND step < {p}"
    " ORDER BY step DESC LIMIT 1"
)
ARCHIVE = (
    "INSERT INTO {t}context_segments (run_id, segment, idx, message)"
    " SELECT run_id, {p}, idx, message FROM {t}context WHERE run_id = {p}"
    " ON CONFLICT (run_id, segment, idx) DO NOTHING"
)
ENTRY = (
    "INSERT INTO {t}step_history (run_id, step, segment, entry) VALUES ({p}, {p}, {p}, {p})"
    " ON CONFLICT (run_id, step) DO UPDATE SET segment = excluded.segment, entry = excluded.entry"
)
LIST = "SELECT entry FROM {t}step_history WHERE run_id = {p} ORDER BY step"
STEP = (
    "SELECT segment, entry, (SELECT segment FROM {t}step_history WHERE run_id = {p}"
    " ORDER BY step DESC LIMIT 1) FROM {t}step_history WHERE run_id = {p} AND step = {p}"
)
CURRENT = "SELECT message FROM {t}context WHERE run_id = {p} AND idx < {p} ORDER BY idx"
ARCHIVED = (
    "SELECT message FROM {t}context_segments WHERE run_id = {p} AND segment = {p}"
    " AND idx < {p} ORDER BY idx"
)


def sql(template: str, schema: str | None = None) -> str:
    """``template`` for SQLite (``?``) or for PostgreSQL in ``schema`` (``%s``)."""
    if schema is None:
        return template.format(t="", p="?")
    return template.format(t=f"{schema}.", p="%s")


def messages_of(step: int, segment: int, length: int, rows: list[Any]) -> list[Message]:
    if len(rows) < length:
        raise StoreError(
            f"the context of step {step} lies in segment {segment}, which has {len(rows)} of "
            f"its {length} messages: the store lost part of the log"
        )
    return decode_all((r[0] for r in rows), Message)


# -- SQLite ------------------------------------------------------------------------------------

T = TypeVar("T")


class _Host(Protocol):
    """What the mixin uses of ``SqliteStore``."""

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]: ...


class SqliteHistory:
    """The ``StepHistory`` methods of ``SqliteStore`` (a mixin of it)."""

    async def history(self: _Host, run_id: str) -> list[StepEntry]:
        """The run's step entries, by step number."""
        return await self._run(lambda conn: sqlite_history(conn, run_id))

    async def context_at(self: _Host, run_id: str, step: int) -> list[Message] | None:
        """The run's context after ``step``, or ``None`` when it has no such step."""

        def read(conn: sqlite3.Connection) -> list[Message] | None:
            conn.execute("BEGIN")
            try:
                return sqlite_context_at(conn, run_id, step)
            finally:
                conn.execute("COMMIT")

        return await self._run(read)


UNREAD = -1
"""The previous segment not known to the caller: ``sqlite_segment`` reads it."""


def sqlite_segment(
    conn: sqlite3.Connection, run_id: str, step: Step, previous: int | None = UNREAD
) -> int:
    """The step's segment; a rewrite first archives the current log (call before it is gone).

    ``previous``: the segment of the run's step before this one (``None``: there is none)
    when the caller knows it, else ``UNREAD``.
    """
    if previous == UNREAD:
        row = conn.execute(sql(PREVIOUS), (run_id, step.run.steps)).fetchone()
        previous = row[0] if row else None
    segment, archive = next_segment(previous, step.context.base is not None)
    if archive:
        conn.execute(sql(ARCHIVE), (segment - 1, run_id))
    return segment


def sqlite_entry(conn: sqlite3.Connection, run_id: str, step: Step, segment: int, end: int) -> int:
    """Write the step's entry (``end``: the log's length before the step); returns its bytes."""
    data = encode_entry(entry_of(step, segment, start_of(step, end)))
    conn.execute(sql(ENTRY), (run_id, step.run.steps, segment, data))
    return len(data)


def sqlite_history(conn: sqlite3.Connection, run_id: str) -> list[StepEntry]:
    """The run's entries, by step number."""
    return decode_all((r[0] for r in conn.execute(sql(LIST), (run_id,))), StepEntry)


def sqlite_context_at(conn: sqlite3.Connection, run_id: str, step: int) -> list[Message] | None:
    """The context after ``step``, or ``None`` (inside the caller's read transaction)."""
    row = conn.execute(sql(STEP), (run_id, run_id, step)).fetchone()
    if row is None:
        return None
    segment, length = row[0], decode(row[1], StepEntry).checkpoint.context_length
    if segment == row[2]:
        rows = conn.execute(sql(CURRENT), (run_id, length)).fetchall()
    else:
        rows = conn.execute(sql(ARCHIVED), (run_id, segment, length)).fetchall()
    return messages_of(step, segment, length, rows)
