"""The loop's steps as one statement: ``save_loop_step`` (schema version 7), one round trip.

A step of the loop appends to the context where the executor knows it ends, starts calls the
store does not hold yet, and settles calls this store wrote last. Everything the general path
(``_postgres_step``) reads before it writes is then known in advance: the run's log segment
(the store's hint), the stored rows of the settled calls (the rows this store wrote, kept in
``CallRows``), and that the append fits. So the whole step goes out as one call of a server
function, in autocommit: one round trip and one commit, like the floor's one ``INSERT``. Its
answer is what the run's feed holds above the step's claimed position (``Journal.save_step``).

The function checks what was assumed and refuses the step (SQLSTATE ``SR001``, or a unique
violation when a call or message is already there), rolling back everything; the store then
writes the step again by the general path, which reads, merges and reports as before. A
refusal costs one round trip more, never a wrong row: a guess is only ever compared, never
trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from steadyrun.records import CallRecord, Step, merge_call
from steadyrun.stores._call_rows import CallRows, Spots, encode_row, merge_held
from steadyrun.stores._encoded import EncodedStep, run_row
from steadyrun.stores._history import encode_entry, entry_of
from steadyrun.stores._leases import current_fence
from steadyrun.stores._postgres_arrays import bytea_array, int8_array, text_array
from steadyrun.stores._postgres_wire import Prepared

__all__ = ["FastStep", "fast_sql", "fast_step", "refused"]

REFUSED = "SR001"
"""The SQLSTATE of ``save_loop_step``'s checks."""

_UNIQUE_VIOLATION = "23505"


def fast_sql(s: str) -> Prepared:
    """The call of ``save_loop_step`` in schema ``s`` (quoted), its arguments typed."""
    run = "text text text bigint bigint bigint bytea bytea"  # the run row
    fence = "text text bigint"
    context = "text[] text[] bigint bigint bytea[]"  # removals, segment, append
    calls = "text[] bigint[] text[] bytea[] text[] bigint[] text[] bytea[] bytea[]"
    rest = "text[] bigint[] bytea[] bytea bigint"  # blocks, history entry, claimed feed
    types = " ".join((run, fence, context, calls, rest)).split(" ")
    # Every parameter goes in binary (``_postgres_wire``): documents as their bytes. In text
    # format each bytea (and each element of a bytea[]) went hex-escaped, twice its size,
    # through a regex per array: 33 us of psycopg's adapting per step against 15 us, 2.4 KB
    # sent against 1.4 (benchmarks/pg_params.py).
    args = ", ".join(f"${i}::{t}" for i, t in enumerate(types, 1))
    return Prepared.of(f"SELECT {s}.save_loop_step({args})")


def refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` is ``save_loop_step`` declining the step (the general path writes it)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in (REFUSED, _UNIQUE_VIOLATION)


@dataclass(slots=True)
class FastStep:
    """The arguments of ``save_loop_step`` for one step, and what it writes.

    Attributes:
        params: The function's arguments, in order.
        rows: ``(call, row)`` of every call row the step writes.
        written: Bytes of the call rows and the history entry.
    """

    params: tuple[Any, ...]
    rows: list[tuple[CallRecord, bytes]] = field(default_factory=list)
    written: int = 0


def fast_step(
    run_id: str, step: Step, enc: EncodedStep, segment: int | None, held: CallRows
) -> FastStep | None:
    """The step as ``save_loop_step``'s arguments; ``None`` when the general path must write it.

    Args:
        run_id: The run.
        step: The step; it appends at a known position (``_postgres_step.pipelined``).
        enc: The step encoded.
        segment: The run's log segment as this store last wrote it (``None``: unknown).
        held: The rows this store wrote last.
    """
    at = step.context.start
    if segment is None or at is None or enc.base is not None:
        return None
    block_ids = [b[0] for b in enc.blocks]
    if len(set(block_ids)) != len(block_ids):
        return None  # one upsert statement cannot write a block twice
    spots = Spots()
    spots.add_messages(step.context.append, segment, at)
    new: list[tuple[CallRecord, bytes]] = []
    merged: list[tuple[CallRecord, bytes, bytes]] = []  # (merged, row, the row it replaces)
    for call in step.calls:
        row = held.get(run_id, call.id)
        if row is None:
            if call.settled:
                return None  # its stored row is unknown here: read and merged by the other path
            new.append((call, encode_row(merge_call(None, call), spots)))
            continue
        held_merge = merge_held(row, call, spots)
        if held_merge == "read":
            return None  # the merge keeps texts the row refers to: they must be read
        if isinstance(held_merge, str):
            continue  # an older or equal snapshot changes nothing
        merged.append((*held_merge, row.raw))
    entry = encode_entry(entry_of(step, segment, at))
    fence = current_fence()
    if fence is not None and not fence.covers(run_id):
        fence = None
    params = (
        *run_row(run_id, step, enc),
        fence.run_id if fence else None,
        fence.owner if fence else None,
        fence.token if fence else None,
        text_array(step.removed_blocks) if step.removed_blocks else None,
        text_array(step.removed_calls) if step.removed_calls else None,
        segment,
        at,
        bytea_array(enc.append) if enc.append else None,
        *_calls(new, 4),
        *_calls(merged, 5),
        *_calls(enc.blocks, 3),
        entry,
        step.checkpoint.claimed_through,
    )
    rows = new + [(c, r) for c, r, _ in merged]
    return FastStep(params, rows, sum(len(r) for _, r in rows) + len(entry))


def _calls(rows: Sequence[tuple[Any, ...]], width: int) -> list[bytes | None]:
    """Column arrays of ``rows``: calls ``(record, row[, held])`` or blocks ``(id, at, doc)``.

    A call gives its id, rev, status, row (and held row); ``width`` arrays, ``None`` (SQL
    ``NULL``, cheaper to send than an empty array) each when there are no rows.
    """
    if not rows:
        return [None] * width
    if width == 3:  # blocks: already columns
        return [
            text_array([r[0] for r in rows]),
            int8_array([r[1] for r in rows]),
            bytea_array([r[2] for r in rows]),
        ]
    cols: list[bytes | None] = [
        text_array([r[0].id for r in rows]),
        int8_array([r[0].rev for r in rows]),
        text_array([r[0].status for r in rows]),
        bytea_array([r[1] for r in rows]),
    ]
    if width == 5:
        cols.append(bytea_array([r[2] for r in rows]))
    return cols
