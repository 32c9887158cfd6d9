"""``PostgresStore.save_step`` in one pipeline: everything sent, one wait, the rest, commit.

The loop's steps go out as one statement (``_postgres_fast``) when the store knows what they
assume; this path writes those it does not know enough for, and those the statement refused.

The loop's steps append to the context at a position the executor knows and carry call records
the store mostly does not hold yet (starts) or holds as the executor left them (settles). So
nothing is read before it is written: the statements go out in one pipeline, and the only wait
before the commit collects what the checks need (the fence, the previous history segment,
which calls were inserted, the stored rows of the others, whether the append fitted). A call
the store held is then merged with ``merge_call`` against its row, locked ``FOR UPDATE`` in the
first batch; an append that did not fit (a retry of the same step, or a gap) falls back to the
log's end, as the sequential path does.

Steps that rewrite the context or give no position, or carry one call twice, take the
sequential path in ``_postgres``.
"""

from __future__ import annotations

from psycopg import AsyncCursor
from psycopg.rows import TupleRow

from steadyrun._errors import StoreError
from steadyrun.records import CallRecord, Step, merge_call
from steadyrun.stores._call_rows import NO_SPOTS, CallRows, Spots, encode_row
from steadyrun.stores._call_rows_postgres import held_row, pg_detach
from steadyrun.stores._encoded import EncodedStep, run_row
from steadyrun.stores._history import next_segment
from steadyrun.stores._history_postgres import pg_entry
from steadyrun.stores._history_sql import PREVIOUS, sql
from steadyrun.stores._leases import Fence, LeaseLostError, current_fence
from steadyrun.stores._postgres_arrays import bytea_array
from steadyrun.stores._postgres_db import WriteTransaction

__all__ = ["pipelined", "write_call", "write_step"]

Cursor = AsyncCursor[TupleRow]


def pipelined(step: Step, enc: EncodedStep) -> bool:
    """Whether ``write_step`` takes the step (else the sequential path does)."""
    ids = [c.id for c in step.calls]
    return enc.base is None and step.context.start is not None and len(set(ids)) == len(ids)


async def write_step(
    tx: WriteTransaction,
    s: str,
    run_id: str,
    step: Step,
    enc: EncodedStep,
    segment_hint: int | None = None,
    rows: CallRows | None = None,
) -> tuple[int, int]:
    """Send the step inside ``tx``; returns the bytes written and the step's log segment.

    ``segment_hint``: the run's log segment as this store last wrote it. The calls the store
    does not hold are inserted before the one wait, before the segment is read: their rows
    refer to the step's messages in the hinted segment, and are written again in the rare
    case the segment read turns out another (another process rewrote the context meanwhile).
    ``rows`` learns the call rows written (what ``_postgres_fast`` merges the next step with).
    """
    conn, run = tx.conn, step.run
    fence = await _send_fence(tx, s, run_id, run.steps)
    # Documents in binary format (%b), as the one-statement path sends them: their bytes,
    # not hex-escaped text twice their size (benchmarks/pg_params.py).
    await conn.execute(
        f"INSERT INTO {s}.runs (run_id, agent, status, created_us, updated_us, steps,"
        " record, checkpoint) VALUES (%s, %s, %s, %s, %s, %s, %b, %b) ON CONFLICT (run_id)"
        " DO UPDATE SET agent = excluded.agent, status = excluded.status, updated_us ="
        " excluded.updated_us, steps = excluded.steps, record = excluded.record,"
        " checkpoint = excluded.checkpoint",
        run_row(run_id, step, enc),
    )
    if step.removed_blocks:
        await conn.execute(
            f"DELETE FROM {s}.blocks WHERE run_id = %s AND block_id = ANY(%s)",
            (run_id, list(step.removed_blocks)),
        )
    if step.removed_calls:
        await conn.execute(
            f"DELETE FROM {s}.calls WHERE run_id = %s AND call_id = ANY(%s)",
            (run_id, list(step.removed_calls)),
        )
    previous = conn.cursor()
    await previous.execute(sql(PREVIOUS, s), (run_id, step.run.steps))
    at = step.context.start
    assert at is not None
    hinted = Spots()
    if segment_hint is not None:
        hinted.add_messages(step.context.append, segment_hint, at)
    inserts = await _insert_calls(tx, s, run_id, step.calls, hinted)
    # One lookup by key per call, pipelined: as one statement with ``call_id = ANY(...)``,
    # the generic plan scanned every call row of the run, a read that grew with the run.
    held: list[Cursor] = []
    for call in step.calls:
        cur = conn.cursor()
        await cur.execute(
            f"SELECT call_id, rev, record FROM {s}.calls WHERE run_id = %s AND call_id = %s"
            " FOR UPDATE",
            (run_id, call.id),
        )
        held.append(cur)
    if enc.blocks:
        await conn.cursor().executemany(
            f"INSERT INTO {s}.blocks (run_id, block_id, position, block)"
            " VALUES (%s, %s, %s, %b) ON CONFLICT (run_id, block_id) DO UPDATE SET"
            " position = excluded.position, block = excluded.block",
            [(run_id, *b) for b in enc.blocks],
        )
    log = enc.append
    appended = conn.cursor()
    if log:
        await appended.execute(
            f"INSERT INTO {s}.context (run_id, idx, message)"
            " SELECT %s, %s + u.o - 1, u.m FROM unnest(%b::bytea[]) WITH ORDINALITY AS u(m, o)"
            f" WHERE %s = 0 OR EXISTS (SELECT 1 FROM {s}.context WHERE run_id = %s AND idx = %s)"
            " ON CONFLICT (run_id, idx) DO NOTHING RETURNING 1",
            (run_id, at, bytea_array(log), at, run_id, at - 1),
        )
    else:
        await appended.execute(
            f"SELECT COALESCE(MAX(idx) + 1, 0) FROM {s}.context WHERE run_id = %s", (run_id,)
        )
    await tx.answers()  # the one wait before the commit

    await _check_fence(fence, run_id)
    prev = await previous.fetchone()
    segment, _ = next_segment(prev[0] if prev else None, False)
    spots = Spots()  # the appended messages lie from ``at`` on, also after _append_again
    spots.add_messages(step.context.append, segment, at)
    stale = segment_hint is not None and segment_hint != segment
    written = await _merge_held(
        conn.cursor(), s, run_id, step.calls, inserts, held, spots, rewrite=stale, learn=rows
    )
    if log:
        if len(await appended.fetchall()) != len(log):
            await _append_again(conn.cursor(), s, run_id, at, log, segment)
    else:
        row = await appended.fetchone()
        end = int(row[0]) if row is not None else 0
        if at > end:
            raise StoreError(f"context append at position {at} leaves a gap after {end} messages")
        if at < end:  # the same step again: the messages after its start go
            await pg_detach(conn.cursor(), s, run_id, segment, at, [])
            await conn.execute(
                f"DELETE FROM {s}.context WHERE run_id = %s AND idx >= %s", (run_id, at)
            )
    written += await pg_entry(conn.cursor(), s, run_id, step, segment, at)
    return written, segment


async def write_call(
    tx: WriteTransaction,
    s: str,
    run_id: str,
    call: CallRecord,
    *,
    fenced: bool,
    rows: CallRows | None = None,
) -> int:
    """``save_call`` inside ``tx`` in two round trips; returns the bytes written.

    The insert of a call the store does not hold and the read of the row of one it does go out
    together; only a held call is then merged and updated. ``rows`` learns the row written.
    """
    fence = await _send_fence(tx, s, run_id, None) if fenced else None
    # Two writers may make a call's first write at once: each tries the insert.
    inserts = await _insert_calls(tx, s, run_id, [call], NO_SPOTS, settled_too=True)
    held = tx.conn.cursor()
    await held.execute(
        f"SELECT call_id, rev, record FROM {s}.calls WHERE run_id = %s AND call_id = %s FOR UPDATE",
        (run_id, call.id),
    )
    await tx.answers()
    await _check_fence(fence, run_id)
    return await _merge_held(
        tx.conn.cursor(), s, run_id, [call], inserts, [held], NO_SPOTS, learn=rows
    )


async def _send_fence(
    tx: WriteTransaction, s: str, run_id: str, steps: int | None
) -> tuple[Fence, Cursor] | None:
    """Send the fence check of the current task (``None`` when no fence covers the run).

    The lease row is locked ``FOR SHARE`` first, as in ``fence_check``: a takeover waits for
    this write. A step (``steps`` given) is logged in ``work_log``, rolled back with the rest
    when the fence turns out lost.
    """
    fence = current_fence()
    if fence is None or not fence.covers(run_id):
        return None
    checked = tx.conn.cursor()
    await checked.execute(
        f"SELECT owner, token FROM {s}.work WHERE run_id = %s FOR SHARE", (fence.run_id,)
    )
    if steps is not None:
        await tx.conn.execute(
            f"INSERT INTO {s}.work_log (root, run_id, steps, owner, token)"
            " VALUES (%s, %s, %s, %s, %s)",
            (fence.run_id, run_id, steps, fence.owner, fence.token),
        )
    return fence, checked


async def _check_fence(sent: tuple[Fence, Cursor] | None, run_id: str) -> None:
    """Raise ``LeaseLostError`` when the fence sent is not the run's lease (after the answers)."""
    if sent is None:
        return
    fence, checked = sent
    row = await checked.fetchone()
    if row is None or row[1] != fence.token:
        holder = "nobody" if row is None else f"{row[0]!r} with token {row[1]}"
        raise LeaseLostError(
            f"write to run {run_id!r} refused: worker {fence.owner!r} holds token "
            f"{fence.token} of {fence.run_id!r}, but the lease is now {holder}"
        )


async def _insert_calls(
    tx: WriteTransaction,
    s: str,
    run_id: str,
    calls: list[CallRecord],
    spots: Spots,
    *,
    settled_too: bool = False,
) -> list[tuple[Cursor, int, bytes] | None]:
    """Insert the calls the store does not hold (``DO NOTHING`` for the others).

    A step's settled snapshot is not tried (``None``) unless ``settled_too``: the store mostly
    holds its call already (the start), so it is merged with the row read, or inserted after it
    when there is none (steps of one run are serialised by the run row's lock).
    """
    sent: list[tuple[Cursor, int, bytes] | None] = []
    for call in calls:
        if call.settled and not settled_too:
            sent.append(None)
            continue
        data = encode_row(merge_call(None, call), spots)
        cur = tx.conn.cursor()
        await cur.execute(
            f"INSERT INTO {s}.calls (run_id, call_id, rev, status, record)"
            " VALUES (%s, %s, %s, %s, %b) ON CONFLICT (run_id, call_id) DO NOTHING RETURNING 1",
            (run_id, call.id, call.rev, call.status, data),
        )
        sent.append((cur, len(data), data))
    return sent


async def _merge_held(
    cur: Cursor,
    s: str,
    run_id: str,
    calls: list[CallRecord],
    inserts: list[tuple[Cursor, int, bytes] | None],
    held: list[Cursor],
    spots: Spots,
    *,
    rewrite: bool = False,
    learn: CallRows | None = None,
) -> int:
    """Merge the calls the store held with their rows (locked); returns the bytes written.

    A row refers to the texts ``spots`` hold; ``rewrite``: the rows just inserted referred to
    a wrong segment and are written again. ``learn`` is told each call's row as it now is.
    """
    if not calls:
        return 0
    rows = {r[0]: (r[1], r[2]) for c in held for r in await c.fetchall()}
    written = 0
    learn = learn if learn is not None else CallRows()
    for call, tried in zip(calls, inserts, strict=True):
        if tried is not None and await tried[0].fetchone() is not None:
            if not rewrite:
                learn.wrote(run_id, call, tried[2])
                written += tried[1]
                continue
            data = encode_row(merge_call(None, call), spots)
            learn.wrote(run_id, call, data)
            await cur.execute(
                f"UPDATE {s}.calls SET record = %b WHERE run_id = %s AND call_id = %s",
                (data, run_id, call.id),
            )
            written += tried[1] + len(data)
            continue
        if call.id not in rows:
            if tried is not None:  # deleted between the two statements (its run, meanwhile)
                raise StoreError(f"call {call.id!r} of run {run_id!r} changed during the write")
            data = encode_row(merge_call(None, call), spots)
            await cur.execute(
                f"INSERT INTO {s}.calls (run_id, call_id, rev, status, record)"
                " VALUES (%s, %s, %s, %s, %b)",
                (run_id, call.id, call.rev, call.status, data),
            )
            learn.wrote(run_id, call, data)
            written += len(data)
            continue
        rev, record = rows[call.id]
        if call.rev <= rev:
            learn.forget(run_id, [call.id])  # not this store's row
            continue  # an older or equal snapshot changes nothing
        stored, carried = await held_row(cur, s, run_id, record, spots)
        merged = merge_call(stored, call)
        data = encode_row(merged, carried)
        await cur.execute(
            f"UPDATE {s}.calls SET rev = %s, status = %s, record = %b"
            " WHERE run_id = %s AND call_id = %s",
            (merged.rev, merged.status, data, run_id, call.id),
        )
        learn.wrote(run_id, merged, data)
        written += len(data)
    return written


async def _append_again(
    cur: Cursor, s: str, run_id: str, at: int, log: list[bytes], segment: int
) -> None:
    """An append that did not fit: a gap fails; the same step again replaces its messages."""
    await cur.execute(
        f"SELECT COALESCE(MAX(idx) + 1, 0) FROM {s}.context WHERE run_id = %s", (run_id,)
    )
    row = await cur.fetchone()
    end = int(row[0]) if row is not None else 0
    if at > end:
        raise StoreError(f"context append at position {at} leaves a gap after {end} messages")
    await pg_detach(cur, s, run_id, segment, at, log)  # a later step's rows may refer past ``at``
    await cur.execute(f"DELETE FROM {s}.context WHERE run_id = %s AND idx >= %s", (run_id, at))
    await cur.executemany(
        f"INSERT INTO {s}.context (run_id, idx, message) VALUES (%s, %s, %b)",
        [(run_id, at + i, m) for i, m in enumerate(log)],
    )
