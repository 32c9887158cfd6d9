"""``SqliteStore.save_step``'s transaction: a loop step written without reading first.

What a loop step's write used to read before writing, the store knows here, each guess keyed
by what proves it current, and each falls back to the read when it is not:

- The fence: the ``work_log`` insert is the check (``fence_check``); the lease row is read
  only to word a refusal.
- The previous step's log segment: the one this store wrote last for the run under the same
  lease token, for a later step (``Known.segment``). Tokens only grow and every step writer
  is fenced, so while the step's fence check passes under the same token nobody else wrote
  a step since. A store that does not know (first write after a load, another token, a
  retry of a step, a write that failed) reads it as before.
- A settled call's stored row: the bytes this store wrote last (``CallRows``, its start).
  The merge is written by an ``UPDATE`` that matches those very bytes; when another writer
  changed the row (a host's answer, a takeover, a retry's detach, a rolled-back write) it
  updates nothing and the row is read and merged as before (``merge_call``).
"""

from __future__ import annotations

import sqlite3

from steadyrun._errors import StoreError
from steadyrun.records import CallRecord, Step, merge_call
from steadyrun.stores._call_rows import (
    NO_SPOTS,
    CallRows,
    HeldRow,
    Spots,
    decode_rows,
    encode_row,
    merge_held,
)
from steadyrun.stores._call_rows_sql import sqlite_detach, sqlite_resolved
from steadyrun.stores._encoded import EncodedStep, run_row
from steadyrun.stores._history_sql import sqlite_entry, sqlite_segment
from steadyrun.stores._leases import Fence
from steadyrun.stores._leases_sqlite import fence_check

__all__ = ["Known", "feed_bounds", "merge_call_row", "write_step"]

# The previous step's segment, and the history's last step: a step below it (a run saved again
# from an earlier step) leaves later entries the next step's read must see.
_PREVIOUS = (
    "SELECT (SELECT segment FROM step_history WHERE run_id = ? AND step < ?"
    " ORDER BY step DESC LIMIT 1), (SELECT MAX(step) FROM step_history WHERE run_id = ?)"
)
_SEGMENTS = 10_000  # runs a store remembers the segment of (a guess: forgetting costs a read)


class Known:
    """What a ``SqliteStore`` wrote last: the call rows, and each run's segment per lease."""

    def __init__(self) -> None:
        self.rows = CallRows()
        self._segments: dict[str, tuple[str, int, int, int]] = {}

    def segment(self, run_id: str, fence: Fence | None, steps: int) -> int | None:
        """The segment of the run's step before ``steps``, when proven known; else ``None``.

        Known: this store wrote the run's last history entry under the fence's token, and
        the fence still holds (the step's write checks it): no other executor wrote since.
        """
        known = self._segments.get(run_id)
        if known is None or fence is None or not fence.covers(run_id):
            return None
        root, token, last, segment = known
        if root != fence.run_id or token != fence.token or steps <= last:
            return None  # another claim since, or a step again: the history may differ
        return segment

    def wrote_step(self, run_id: str, fence: Fence | None, steps: int, segment: int | None) -> None:
        """Remember a committed step's segment when it ends the history (``write_step``).

        Only under a fence: its token is what proves the segment current later.
        """
        if segment is None or fence is None or not fence.covers(run_id):
            self._segments.pop(run_id, None)
            return
        if len(self._segments) >= _SEGMENTS and run_id not in self._segments:
            self._segments.clear()
        self._segments[run_id] = (fence.run_id, fence.token, steps, segment)

    def forget_step(self, run_id: str) -> None:
        """Forget the run's segment (a write that failed may or may not have committed)."""
        self._segments.pop(run_id, None)


def write_step(
    conn: sqlite3.Connection,
    run_id: str,
    step: Step,
    enc: EncodedStep,
    fence: Fence | None,
    known: Known,
) -> tuple[int, int | None, int | None]:
    """Write the step inside the caller's ``BEGIN IMMEDIATE`` transaction.

    Returns the call rows' and entry's bytes, what ``pending`` returns for the step's
    claimed position (``None`` for a step that leaves the run not running) and the step's
    segment when the run's history ends with the step (for ``Known.wrote_step`` once
    committed; ``None``: a step saved again below later ones, nothing to learn).
    """
    run = step.run
    calls_written = 0
    fence_check(conn, fence, run_id, run.steps)  # a lost claim: refused
    conn.execute(
        "INSERT INTO runs (run_id, agent, status, created_us, updated_us, steps, record,"
        " checkpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
        " agent = excluded.agent, status = excluded.status, updated_us ="
        " excluded.updated_us, steps = excluded.steps, record = excluded.record,"
        " checkpoint = excluded.checkpoint",
        run_row(run_id, step, enc),
    )
    if step.removed_blocks:
        conn.executemany(
            "DELETE FROM blocks WHERE run_id = ? AND block_id = ?",
            [(run_id, b) for b in step.removed_blocks],
        )
    if step.removed_calls:
        known.rows.forget(run_id, step.removed_calls)
        conn.executemany(
            "DELETE FROM calls WHERE run_id = ? AND call_id = ?",
            [(run_id, c) for c in step.removed_calls],
        )
    previous = known.segment(run_id, fence, run.steps)
    latest = True  # known: the history ended with the step before this one
    if previous is None:
        row = conn.execute(_PREVIOUS, (run_id, run.steps, run_id)).fetchone()
        previous, latest = row[0], row[1] is None or row[1] <= run.steps
    segment = sqlite_segment(conn, run_id, step, previous)  # archives a log the step replaces
    learned = segment if latest else None
    if enc.blocks:
        conn.executemany(
            "INSERT INTO blocks (run_id, block_id, position, block) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (run_id, block_id) DO UPDATE SET position = excluded.position,"
            " block = excluded.block",
            [(run_id, *b) for b in enc.blocks],
        )
    end, at = _write_log(conn, run_id, step, enc.base, enc.append, segment)
    # The calls after the log: a row may refer to the messages the step just wrote.
    spots = Spots()
    spots.add_messages([*(step.context.base or []), *step.context.append], segment, at)
    for call in step.calls:
        calls_written += merge_call_row(conn, run_id, call, spots, known.rows)
    calls_written += sqlite_entry(conn, run_id, step, segment, end)
    if run.status != "running":
        if run.status == "completed" and step.checkpoint.phase == "done":
            mark_consumed(conn, run_id, step.checkpoint.claimed_through)
        return calls_written, None, learned  # the executor stops here: nobody takes input
    # Under the write lock: an append of another process commits before this read or
    # after this step, when the next step's read sees it.
    last, consumed = feed_bounds(conn, run_id)
    claimed = step.checkpoint.claimed_through
    return calls_written, last if last > max(claimed, consumed) else 0, learned


def _write_log(
    conn: sqlite3.Connection,
    run_id: str,
    step: Step,
    base: list[bytes] | None,
    appended: list[bytes],
    segment: int,
) -> tuple[int, int]:
    """Write the step's messages; returns the log's length before them and where they begin."""
    log = (base or []) + appended
    if base is not None:
        conn.execute("DELETE FROM context WHERE run_id = ?", (run_id,))
        end = 0
    elif step.context.start is not None and _append_at(conn, run_id, step.context.start, log):
        # The executor knows where its messages go: written without reading the log.
        return step.context.start, step.context.start
    else:
        end = conn.execute(
            "SELECT COALESCE(MAX(idx) + 1, 0) FROM context WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
    at = end if step.context.start is None or base is not None else step.context.start
    if at > end:
        raise StoreError(f"context append at position {at} leaves a gap after {end} messages")
    if at < end:  # the same step again (a retry): its messages replace themselves
        sqlite_detach(conn, run_id, segment, at, log)  # a later step's rows may refer past ``at``
        conn.execute("DELETE FROM context WHERE run_id = ? AND idx >= ?", (run_id, at))
    if log:
        conn.executemany(
            "INSERT INTO context (run_id, idx, message) VALUES (?, ?, ?)",
            [(run_id, at + i, m) for i, m in enumerate(log)],
        )
    return end, at


def _append_at(conn: sqlite3.Connection, run_id: str, at: int, log: list[bytes]) -> bool:
    """Append ``log`` at position ``at`` when that extends the stored log exactly.

    ``False``, with nothing written, when ``log`` is empty, when position ``at - 1`` is not
    stored (a gap) or when ``at`` is (the same step again): the caller then reads the log's
    end and decides as it always did.
    """
    if not log:
        return False
    try:
        cur = conn.execute(
            "INSERT INTO context (run_id, idx, message) SELECT ?, ?, ? WHERE ? = 0"
            " OR EXISTS (SELECT 1 FROM context WHERE run_id = ? AND idx = ?)",
            (run_id, at, log[0], at, run_id, at - 1),
        )
    except sqlite3.IntegrityError:
        return False
    if cur.rowcount != 1:
        return False
    if len(log) > 1:
        # Position ``at`` was free, so nothing follows it in a log without gaps.
        conn.executemany(
            "INSERT INTO context (run_id, idx, message) VALUES (?, ?, ?)",
            [(run_id, at + i, m) for i, m in enumerate(log) if i],
        )
    return True


def merge_call_row(
    conn: sqlite3.Connection,
    run_id: str,
    call: CallRecord,
    spots: Spots = NO_SPOTS,
    rows: CallRows | None = None,
) -> int:
    """Merge a call snapshot inside the caller's transaction; returns bytes written.

    A call the store does not hold yet is inserted without reading first; a stored one is
    merged with ``merge_call``: with the row this store wrote last when the row still holds
    it (``rows``), else with the row read. The row refers to the texts ``spots`` hold.
    """
    rows = rows if rows is not None else CallRows()
    if call.rev == 0 or not call.settled:
        data = encode_row(call, spots)
        cur = conn.execute(
            "INSERT INTO calls (run_id, call_id, rev, status, record) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (run_id, call_id) DO NOTHING",
            (run_id, call.id, call.rev, call.status, data),
        )
        if cur.rowcount == 1:
            rows.wrote(run_id, call, data)
            return len(data)
    known = rows.get(run_id, call.id)
    if known is not None:
        written = _merge_known(conn, run_id, call, spots, known, rows)
        if written is not None:
            return written
    row = conn.execute(
        "SELECT rev, record FROM calls WHERE run_id = ? AND call_id = ?", (run_id, call.id)
    ).fetchone()
    if row is not None and call.rev <= row[0]:
        rows.forget(run_id, [call.id])  # not this store's row
        return 0  # an older or equal snapshot changes nothing
    stored = None
    if row is not None:
        (held,) = decode_rows([row[1]])
        stored = held.record
        if held.refs and (stored.settled or stored.handover):
            # Only a settled or handed-over call keeps stored texts through the merge (an
            # active one takes the snapshot's): only then are they looked up.
            (stored,) = sqlite_resolved(conn, run_id, [held])
        spots = spots.carrying(held)
    merged = merge_call(stored, call)
    data = encode_row(merged, spots)
    conn.execute(
        "INSERT INTO calls (run_id, call_id, rev, status, record) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (run_id, call_id) DO UPDATE SET rev = excluded.rev,"
        " status = excluded.status, record = excluded.record",
        (run_id, call.id, merged.rev, merged.status, data),
    )
    rows.wrote(run_id, merged, data)
    return len(data)


def _merge_known(
    conn: sqlite3.Connection,
    run_id: str,
    call: CallRecord,
    spots: Spots,
    held: HeldRow,
    rows: CallRows,
) -> int | None:
    """Merge with ``held``, the row this store wrote last; ``None`` when the row is read instead.

    The update matches the stored bytes: another writer's row (a host's answer, another
    executor's, a detach, a write rolled back) updates nothing and is read after all.
    """
    out = merge_held(held, call, spots)
    if isinstance(out, str):
        return None  # nothing to write, or the merge keeps texts that must be read
    merged, data = out
    cur = conn.execute(
        "UPDATE calls SET rev = ?, status = ?, record = ? WHERE run_id = ? AND call_id = ?"
        " AND record = ?",
        (merged.rev, merged.status, data, run_id, call.id, held.raw),
    )
    if cur.rowcount != 1:
        rows.forget(run_id, [call.id])
        return None
    rows.wrote(run_id, merged, data)
    return len(data)


def mark_consumed(conn: sqlite3.Connection, run_id: str, through: int) -> None:
    """The run's input delivered up to ``through`` (never past its feed, never backwards).

    A completed run's final step writes it in its own transaction: the runtime marks the
    input it claimed right after that step (``store.consume``), which then finds the mark
    and commits nothing, one write group fewer at the end of every run. The claimed position
    is in the step's checkpoint, so the mark is never ahead of what a durable step holds.
    """
    if through <= 0:
        return
    conn.execute(
        "INSERT INTO feed_state (run_id, consumed) SELECT ?, MIN(?, COALESCE(MAX(seq), 0))"
        " FROM feed WHERE run_id = ? ON CONFLICT (run_id) DO UPDATE SET"
        " consumed = MAX(consumed, excluded.consumed)",
        (run_id, through, run_id),
    )


def feed_bounds(conn: sqlite3.Connection, run_id: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT (SELECT COALESCE(MAX(seq), 0) FROM feed WHERE run_id = ?),"
        " (SELECT COALESCE(MAX(consumed), 0) FROM feed_state WHERE run_id = ?)",
        (run_id, run_id),
    ).fetchone()
    return int(row[0]), int(row[1])
