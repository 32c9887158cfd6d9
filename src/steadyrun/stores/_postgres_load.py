"""A run's rows as ``PostgresStore.load`` reads them: one round trip, no sort on the server.

The context, the calls and the blocks are read each with the column that orders them and put in
order here. Asked for ``ORDER BY``, the server sorted whatever its plan did not give in order:
a bitmap scan (what the planner picks where its statistics are missing or stale, as in a new
database or for a run newer than the last ``ANALYZE``) sorts every row of the run, and a
context larger than ``work_mem`` is sorted in files on disk (8,000 messages of 1 KiB: 35 ms of
the server's time for a read of 3). Rows of an append-only log lie nearly always in order, and
putting them in order is then one pass of comparisons of integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from steadyrun.stores._call_rows_sql import CURRENT_SEGMENT
from steadyrun.stores._history_sql import sql as history_sql
from steadyrun.stores._postgres_db import Connection

__all__ = ["RunRows", "read_run"]

_first = itemgetter(0)


@dataclass(frozen=True, slots=True)
class RunRows:
    """A run's stored documents, in order: what ``decode_snapshot`` and ``keep_calls`` take."""

    record: bytes
    checkpoint: bytes
    current: int | None
    """The current segment of the log (``None``: no history entries yet)."""
    context: list[bytes]
    calls: list[tuple[str, bytes]]
    """``(call id, row)`` in the order the calls were first stored."""
    blocks: list[bytes]


def _queries(s: str) -> tuple[str, ...]:
    return (
        # With the current segment, which call rows' references may need.
        f"SELECT record, checkpoint, ({history_sql(CURRENT_SEGMENT, s)}) FROM {s}.runs"
        " WHERE run_id = %s",
        f"SELECT idx, message FROM {s}.context WHERE run_id = %s",
        f"SELECT row_id, call_id, record FROM {s}.calls WHERE run_id = %s",
        f"SELECT position, block FROM {s}.blocks WHERE run_id = %s",
    )


def _ordered(rows: list[Any]) -> list[Any]:
    rows.sort(key=_first)  # stable: blocks of one position keep the order they came in
    return rows


async def read_run(conn: Connection, s: str, run_id: str) -> RunRows | None:
    """The rows of ``run_id`` in schema ``s`` (quoted), or ``None`` when there is no such run.

    ``conn`` is in pipeline mode inside a snapshot transaction: four queries, one round trip.
    Results are binary: bytea in text is hex, twice the bytes to send and a pass to undo it.
    """
    cursors = [
        await conn.execute(sql, (run_id,) * sql.count("%s"), binary=True) for sql in _queries(s)
    ]
    row, context, calls, blocks = [await cur.fetchall() for cur in cursors]
    if not row:
        return None
    record, checkpoint, current = row[0]
    return RunRows(
        record=record,
        checkpoint=checkpoint,
        current=None if current is None else int(current),
        context=[m for _, m in _ordered(context)],
        calls=[(c, bytes(r)) for _, c, r in _ordered(calls)],
        blocks=[b for _, b in _ordered(blocks)],
    )
