"""The step history in PostgreSQL: ``_history_sql.py``'s statements, run by psycopg."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

import psycopg
from psycopg.rows import TupleRow

from steadyrun._codec import decode, decode_all
from steadyrun.chat import Message
from steadyrun.records import Step
from steadyrun.records._history import StepEntry
from steadyrun.stores._history import encode_entry, entry_of, next_segment, start_of
from steadyrun.stores._history_sql import (
    ARCHIVE,
    ARCHIVED,
    CURRENT,
    ENTRY,
    LIST,
    PREVIOUS,
    STEP,
    messages_of,
    sql,
)

if TYPE_CHECKING:
    from steadyrun.stores._postgres_db import Connection

__all__ = ["PostgresHistory", "pg_context_at", "pg_entry", "pg_history", "pg_segment"]

Cursor = psycopg.AsyncCursor[TupleRow]


class _Host(Protocol):
    """What the mixin uses of ``PostgresStore``."""

    _s: str

    def _transaction(
        self, *, snapshot: bool = False
    ) -> AbstractAsyncContextManager[Connection]: ...


class PostgresHistory:
    """The ``StepHistory`` methods of ``PostgresStore`` (a mixin of it)."""

    async def history(self: _Host, run_id: str) -> list[StepEntry]:
        """The run's step entries, by step number."""
        async with self._transaction(snapshot=True) as conn:
            return await pg_history(conn.cursor(), self._s, run_id)

    async def context_at(self: _Host, run_id: str, step: int) -> list[Message] | None:
        """The run's context after ``step``, or ``None`` when it has no such step."""
        async with self._transaction(snapshot=True) as conn:
            return await pg_context_at(conn.cursor(), self._s, run_id, step)


async def pg_segment(cur: Cursor, s: str, run_id: str, step: Step) -> int:
    """The step's segment; a rewrite first archives the current log (sent before it is gone)."""
    await cur.execute(sql(PREVIOUS, s), (run_id, step.run.steps))
    row = await cur.fetchone()
    segment, archive = next_segment(row[0] if row else None, step.context.base is not None)
    if archive:
        await cur.execute(sql(ARCHIVE, s), (segment - 1, run_id))
    return segment


async def pg_entry(cur: Cursor, s: str, run_id: str, step: Step, segment: int, end: int) -> int:
    """Write the step's entry (``end``: the log's length before the step); returns its bytes."""
    data = encode_entry(entry_of(step, segment, start_of(step, end)))
    await cur.execute(sql(ENTRY, s), (run_id, step.run.steps, segment, data))
    return len(data)


async def pg_history(cur: Cursor, s: str, run_id: str) -> list[StepEntry]:
    """The run's entries, by step number."""
    await cur.execute(sql(LIST, s), (run_id,), binary=True)  # bytea as is, not in hex
    return decode_all((r[0] for r in await cur.fetchall()), StepEntry)


async def pg_context_at(cur: Cursor, s: str, run_id: str, step: int) -> list[Message] | None:
    """The context after ``step``, or ``None`` (inside the caller's snapshot transaction)."""
    await cur.execute(sql(STEP, s), (run_id, run_id, step))
    row = await cur.fetchone()
    if row is None:
        return None
    segment, length = row[0], decode(row[1], StepEntry).checkpoint.context_length
    if segment == row[2]:
        await cur.execute(sql(CURRENT, s), (run_id, length), binary=True)
    else:
        await cur.execute(sql(ARCHIVED, s), (run_id, segment, length), binary=True)
    return messages_of(step, segment, length, await cur.fetchall())
