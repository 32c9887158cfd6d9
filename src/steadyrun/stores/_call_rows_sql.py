"""Call rows read back in SQL: the referred texts looked up in the context log.

The statements serve SQLite and PostgreSQL (``sql`` of ``_history_sql``); the SQLite reads are
here, the PostgreSQL ones beside its store. A load hands over the current log it decoded anyway,
so only texts in replaced segments (after a context rewrite) cost a statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from itertools import repeat

from steadyrun._codec import FORMAT, decode
from steadyrun.chat import Message
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.records._stored import StoredSnapshot
from steadyrun.stores._call_rows import (
    CALL_ROW_FORMAT,
    CallRow,
    decode_rows,
    detached,
    detaching,
    gone,
    needs,
    resolve,
)
from steadyrun.stores._history_sql import sql

__all__ = [
    "CURRENT_SEGMENT",
    "MESSAGE_NOW",
    "MESSAGE_PAST",
    "REFS_HEAD",
    "UNKNOWN",
    "keep_calls",
    "lookups",
    "sqlite_calls",
    "sqlite_detach",
    "sqlite_resolved",
]

CURRENT_SEGMENT = (
    "SELECT segment FROM {t}step_history WHERE run_id = {p} ORDER BY step DESC LIMIT 1"
)
UNKNOWN = -2
"""``current`` not read yet: the resolving function reads it."""
MESSAGE_NOW = "SELECT message FROM {t}context WHERE run_id = {p} AND idx = {p}"
MESSAGE_PAST = (
    "SELECT message FROM {t}context_segments WHERE run_id = {p} AND segment = {p} AND idx = {p}"
)


Lookup = tuple[tuple[int, int], str, tuple[object, ...]]
"""A referred text's place ``(segment, index)``, the statement reading it and its parameters."""


def lookups(
    run_id: str, rows: list[CallRow], current: int, context: Sequence[Message] | None
) -> tuple[dict[tuple[int, int], Message], list[Lookup]]:
    """The referred texts the loaded ``context`` holds, and the reads of the others.

    Both stores plan their reads here, so only the way a statement runs differs between them.
    """
    now, past = needs(rows, current)
    messages: dict[tuple[int, int], Message] = {}
    todo: list[Lookup] = []
    for idx in now:
        if context is not None and idx < len(context):
            messages[(current, idx)] = context[idx]
        else:
            todo.append(((current, idx), MESSAGE_NOW, (run_id, idx)))
    todo.extend(((seg, idx), MESSAGE_PAST, (run_id, seg, idx)) for seg, idx in past)
    return messages, todo


def sqlite_calls(
    conn: sqlite3.Connection,
    run_id: str,
    raws: Iterable[bytes],
    context: Sequence[Message] | None = None,
) -> list[CallRecord]:
    """The call records of stored rows, their referred texts read from the log.

    Args:
        conn: The connection, inside the caller's read transaction.
        run_id: The run the rows are of.
        raws: The stored documents.
        context: The run's current log as loaded (position = index), when the caller has it.
    """
    rows = decode_rows(raws)
    return sqlite_resolved(conn, run_id, rows, context)


def sqlite_resolved(
    conn: sqlite3.Connection,
    run_id: str,
    rows: list[CallRow],
    context: Sequence[Message] | None = None,
    current: int | None = UNKNOWN,
) -> list[CallRecord]:
    """``resolve`` of decoded rows inside the caller's transaction.

    ``current``: the run's current segment when the caller read it (``None``: no entry).
    """
    if not any(row.refs for row in rows):
        return [row.record for row in rows]
    if current == UNKNOWN:
        found = conn.execute(sql(CURRENT_SEGMENT), (run_id,)).fetchone()
        current = None if found is None else int(found[0])
    if current is None:
        return resolve(rows, None, lambda seg, idx: None)  # refused: no segment to look in
    messages, todo = lookups(run_id, rows, current, context)
    for place, statement, params in todo:
        row = conn.execute(sql(statement), params).fetchone()
        if row is not None:
            messages[place] = decode(row[0], Message)
    return resolve(rows, current, lambda seg, idx: messages.get((seg, idx)))


def sqlite_detach(
    conn: sqlite3.Connection, run_id: str, segment: int, at: int, log: Sequence[bytes]
) -> None:
    """Give the rows referring to messages a retried step deletes their texts back.

    The step writes ``log`` from ``at`` of ``segment`` after deleting the messages there; a row
    that refers to one it does not write again keeps its text (see ``detaching``).
    """
    old = conn.execute(
        "SELECT idx, message FROM context WHERE run_id = ? AND idx >= ?", (run_id, at)
    )
    lost = gone(((i, m.encode() if isinstance(m, str) else bytes(m)) for i, m in old), at, log)
    if not lost:
        return
    raws = [
        raw
        for (raw,) in conn.execute("SELECT record FROM calls WHERE run_id = ?", (run_id,))
        if bytes(raw).startswith(REFS_HEAD)
    ]
    rows = detaching(decode_rows(raws), segment, lost)
    if not rows:
        return
    sqlite_resolved(conn, run_id, rows, None, segment)  # the texts read while the log holds them
    conn.executemany(
        "UPDATE calls SET record = ? WHERE run_id = ? AND call_id = ?",
        [(detached(row, segment, lost), run_id, row.record.id) for row in rows],
    )


# The first bytes of the call documents this release reads, as its writers frame them.
_PLAIN_HEADS = (
    b'{"format":%d,"data":' % CALL_ROW_FORMAT,
    b'{"format":%d,"data":' % FORMAT,
)
REFS_HEAD = b'{"format":%d,"refs":' % CALL_ROW_FORMAT
_HEADS = (REFS_HEAD, *_PLAIN_HEADS)
_starts = bytes.startswith


def keep_calls(snap: RunSnapshot, calls: list[tuple[str, bytes]], current: int | None) -> bool:
    """Keep the call rows ``calls`` (``(id, row)``) stored in ``snap``, resolved when read.

    A resume reads the calls of its open batch only, so the rest are never decoded. The
    referred texts are then read from the context ``snap`` holds as loaded
    (``StoredSnapshot.loaded_message``: what the run does to its context later does not move
    them, and a message is decoded alone while the context is not); the digests are checked
    when a call is read, and a mismatch is a ``StoreError`` then.

    Returns ``False``, holding nothing, when the rows must be resolved now: a row not framed
    as this release writes (another format: refused by the eager reader, at load), a
    snapshot decoded already, or references while the log was rewritten (a text may lie in
    a replaced segment, which only a statement in the load's transaction can read).
    """
    if not isinstance(snap, StoredSnapshot):
        return False
    raws = [raw for _, raw in calls]
    try:  # bytes.startswith over the rows in C; what is not bytes raises TypeError
        if not all(map(_starts, raws, repeat(_HEADS))):
            return False
        refs = any(map(_starts, raws, repeat(REFS_HEAD)))
    except TypeError:
        return False
    if refs and current != 0:
        return False
    loaded = snap.loaded_message

    def message(seg: int, idx: int) -> Message | None:
        return loaded(idx) if refs and seg == current else None

    def read(raws: list[bytes]) -> list[CallRecord]:
        return resolve(decode_rows(raws), current, message)

    snap.keep_calls(calls, read)
    return True
