"""Call rows read back on PostgreSQL: the referred texts looked up in the context log.

The PostgreSQL side of ``_call_rows_sql`` (it needs psycopg; that module does not).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import AsyncCursor
from psycopg.rows import TupleRow

from steadyrun._codec import decode
from steadyrun.chat import Message
from steadyrun.records import CallRecord, merge_call
from steadyrun.stores._call_rows import (
    CallRow,
    Spots,
    decode_rows,
    detached,
    detaching,
    encode_row,
    gone,
    resolve,
)
from steadyrun.stores._call_rows_sql import CURRENT_SEGMENT, REFS_HEAD, UNKNOWN, lookups
from steadyrun.stores._history_sql import sql

__all__ = ["UNKNOWN", "held_row", "pg_detach", "pg_merge", "pg_resolved"]

Cursor = AsyncCursor[TupleRow]


async def pg_resolved(
    cur: Cursor,
    s: str,
    run_id: str,
    rows: list[CallRow],
    context: Sequence[Message] | None = None,
    current: int | None = UNKNOWN,
) -> list[CallRecord]:
    """``resolve`` of decoded rows inside the caller's transaction.

    Args:
        cur: A cursor of the transaction.
        s: The store's quoted schema.
        run_id: The run the rows are of.
        rows: The decoded rows.
        context: The run's current log as loaded (position = index), when the caller has it.
        current: The run's current segment when the caller read it (``None``: no entry).
    """
    if not any(row.refs for row in rows):
        return [row.record for row in rows]
    if current == UNKNOWN:
        await cur.execute(sql(CURRENT_SEGMENT, s), (run_id,))
        found = await cur.fetchone()
        current = int(found[0]) if found is not None else None
    if current is None:
        return resolve(rows, None, lambda seg, idx: None)  # refused: no segment to look in
    messages, todo = lookups(run_id, rows, current, context)
    for place, statement, params in todo:
        await cur.execute(sql(statement, s), params, binary=True)
        row = await cur.fetchone()
        if row is not None:
            messages[place] = decode(row[0], Message)
    return resolve(rows, current, lambda seg, idx: messages.get((seg, idx)))


async def held_row(
    cur: Cursor, s: str, run_id: str, raw: bytes, spots: Spots
) -> tuple[CallRecord, Spots]:
    """A stored row to merge a snapshot with, and the spots its merge may refer to.

    Only a settled or handed-over call keeps stored texts through the merge (an active one
    takes the snapshot's), so only then are its referred texts looked up.
    """
    (held,) = decode_rows([raw])
    stored = held.record
    if held.refs and (stored.settled or stored.handover):
        (stored,) = await pg_resolved(cur, s, run_id, [held])
    return stored, spots.carrying(held)


async def pg_detach(
    cur: Cursor, s: str, run_id: str, segment: int, at: int, log: Sequence[bytes]
) -> None:
    """Give the rows referring to messages a retried step deletes their texts back.

    The step writes ``log`` from ``at`` of ``segment`` after deleting the messages there; a row
    that refers to one it does not write again keeps its text (see ``detaching``).
    """
    await cur.execute(
        f"SELECT idx, message FROM {s}.context WHERE run_id = %s AND idx >= %s",
        (run_id, at),
        binary=True,
    )
    lost = gone([(int(i), bytes(m)) for i, m in await cur.fetchall()], at, log)
    if not lost:
        return
    await cur.execute(
        f"SELECT record FROM {s}.calls WHERE run_id = %s AND substring(record FROM 1 FOR %s) = %s",
        (run_id, len(REFS_HEAD), REFS_HEAD),
        binary=True,
    )
    rows = detaching(decode_rows([bytes(raw) for (raw,) in await cur.fetchall()]), segment, lost)
    if not rows:
        return
    await pg_resolved(cur, s, run_id, rows, None, segment)  # read while the log holds them
    await cur.executemany(
        f"UPDATE {s}.calls SET record = %s WHERE run_id = %s AND call_id = %s",
        [(detached(row, segment, lost), run_id, row.record.id) for row in rows],
    )


async def pg_merge(cur: Cursor, s: str, run_id: str, call: CallRecord, spots: Spots) -> int:
    """Merge a call snapshot inside the caller's transaction; returns bytes written.

    The stored row is read ``FOR UPDATE``; when there is none yet, the snapshot is inserted
    unless a concurrent writer inserted the call first, whose row is then read locked. The
    row refers to the texts ``spots`` hold.
    """
    while True:
        await cur.execute(
            f"SELECT rev, record FROM {s}.calls WHERE run_id = %s AND call_id = %s FOR UPDATE",
            (run_id, call.id),
        )
        row = await cur.fetchone()
        if row is not None:
            break
        data = encode_row(merge_call(None, call), spots)
        await cur.execute(
            f"INSERT INTO {s}.calls (run_id, call_id, rev, status, record)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, call_id) DO NOTHING RETURNING 1",
            (run_id, call.id, call.rev, call.status, data),
        )
        if await cur.fetchone() is not None:
            return len(data)
    if call.rev <= row[0]:
        return 0  # an older or equal snapshot changes nothing
    stored, spots = await held_row(cur, s, run_id, row[1], spots)
    merged = merge_call(stored, call)
    data = encode_row(merged, spots)
    await cur.execute(
        f"UPDATE {s}.calls SET rev = %s, status = %s, record = %s"
        " WHERE run_id = %s AND call_id = %s",
        (merged.rev, merged.status, data, run_id, call.id),
    )
    return len(data)
