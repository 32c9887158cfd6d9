"""``RunLifecycle`` of ``PostgresStore``: delete, dump and restore run trees, one transaction each.

Lock order, the same as the store's other writes so none of them deadlock with these: the
feed's advisory lock (appends take it), then the claim's ``work`` row, then the run rows.

- **delete** locks the run's feed, so an append waits and then numbers a new feed from 1;
  makes sure the claim row exists and locks it ``FOR UPDATE``, so an executor taking the
  claim meanwhile waits for the delete (and then finds no run); refuses a live claim of
  another executor; then deletes the tree's rows (context, calls and blocks cascade).
- **dump** reads the tree in one ``REPEATABLE READ`` snapshot.
- **restore** locks the feeds of the runs it writes, refuses any that exists, and inserts.

The tree is found by a recursive query over the calls of its runs (``<run>/<call>``).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from steadyrun._codec import decode
from steadyrun._errors import ConflictError
from steadyrun.stores._call_rows import decode_rows
from steadyrun.stores._call_rows_postgres import pg_resolved
from steadyrun.stores._encoded import decode_snapshot, dump_rows
from steadyrun.stores._leases import Holder, current_fence
from steadyrun.stores._leases_postgres import wake_in
from steadyrun.stores._lifecycle import (
    FeedDump,
    RunDeletion,
    RunDump,
    check_dump,
    refuse_held,
    root_of,
)
from steadyrun.stores._ports import FeedMessage
from steadyrun.stores._postgres_db import LOCK_FEED

if TYPE_CHECKING:
    from steadyrun.stores._postgres_db import Connection

__all__ = ["PostgresLifecycle"]

_NOW = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT"


class _Host(Protocol):
    """What the mixin uses of ``PostgresStore``."""

    schema: str
    _s: str

    def _transaction(
        self, *, snapshot: bool = False
    ) -> AbstractAsyncContextManager[Connection]: ...


async def _tree(conn: Connection, s: str, run_id: str) -> list[str]:
    """The ids the tree may hold: the run, and one per call of its runs."""
    cur = await conn.execute(
        f"WITH RECURSIVE tree(id) AS (SELECT %s::text UNION SELECT tree.id || '/' ||"
        f" c.call_id FROM tree JOIN {s}.calls c ON c.run_id = tree.id) SELECT id FROM tree",
        (run_id,),
    )
    return [r[0] for r in await cur.fetchall()]


async def _lock_feeds(conn: Connection, schema: str, run_ids: list[str]) -> None:
    """The feeds' advisory locks, as appends take them (``PostgresStore.append``)."""
    for run_id in sorted(run_ids):  # one order for every locker: no deadlock
        await conn.execute(
            f"SELECT pg_advisory_xact_lock({LOCK_FEED}, hashtext(%s))", (f"{schema}/{run_id}",)
        )


class PostgresLifecycle:
    """The ``RunLifecycle`` methods of ``PostgresStore`` (a mixin of it)."""

    async def delete_run(self: _Host, run_id: str) -> RunDeletion:
        """Delete the run, its sub-agent runs, their input, the claim and the step log.

        Raises:
            RunBusyError: Another executor holds the run's claim (nothing is deleted).
        """
        s = self._s
        root = root_of(run_id)
        fence = current_fence()
        async with self._transaction() as conn:
            await _lock_feeds(conn, self.schema, [run_id])
            if run_id == root:  # a row to lock, even for a run never claimed
                await conn.execute(
                    f"INSERT INTO {s}.work (run_id) VALUES (%s) ON CONFLICT DO NOTHING", (root,)
                )
            cur = await conn.execute(
                f"SELECT owner, token, expires_us FROM {s}.work WHERE run_id = %s"
                f" AND owner IS NOT NULL AND expires_us >= {_NOW} FOR UPDATE",
                (root,),
            )
            row = await cur.fetchone()
            holder = None
            if row is not None:
                expires = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(row[2]))
                holder = Holder(run_id=root, owner=row[0], token=int(row[1]), expires_at=expires)
            refuse_held(run_id, holder, fence)
            ids = await _tree(conn, s, run_id)
            cur = await conn.execute(
                f"WITH gone AS (DELETE FROM {s}.feed WHERE run_id = ANY(%s) RETURNING 1)"
                " SELECT COUNT(*) FROM gone",
                (ids,),
            )
            counted = await cur.fetchone()
            await conn.execute(f"DELETE FROM {s}.feed_state WHERE run_id = ANY(%s)", (ids,))
            cur = await conn.execute(
                f"DELETE FROM {s}.runs WHERE run_id = ANY(%s) RETURNING run_id", (ids,)
            )
            runs = sorted(r[0] for r in await cur.fetchall())
            if run_id == root:
                await conn.execute(f"DELETE FROM {s}.work WHERE run_id = %s", (root,))
                await conn.execute(f"DELETE FROM {s}.work_log WHERE root = %s", (root,))
            else:
                await conn.execute(
                    f"DELETE FROM {s}.work_log WHERE root = %s AND run_id = ANY(%s)", (root, ids)
                )
        messages = int(counted[0]) if counted is not None else 0
        return RunDeletion(run_id=run_id, runs=runs, messages=messages)

    async def dump_run(self: _Host, run_id: str) -> RunDump | None:
        """The run tree as stored (one snapshot), or ``None``."""
        s = self._s
        async with self._transaction(snapshot=True) as conn:
            ids = await _tree(conn, s, run_id)
            # Binary results: bytea in text is hex, twice the bytes and a pass to undo it
            # (a run of 4,000 iterations: its rows read in 124 ms as text, 72 in binary).
            queries = [
                await conn.execute(sql, (ids,), binary=True)
                for sql in (
                    f"SELECT run_id, record, checkpoint FROM {s}.runs WHERE run_id = ANY(%s)",
                    # Each with what orders it, put in order here: a sort on the server
                    # spills to disk for a large tree where the planner lacks statistics
                    # (``_postgres_load``).
                    f"SELECT run_id, idx, message FROM {s}.context WHERE run_id = ANY(%s)",
                    f"SELECT run_id, row_id, record FROM {s}.calls WHERE run_id = ANY(%s)",
                    f"SELECT run_id, position, block FROM {s}.blocks WHERE run_id = ANY(%s)",
                    f"SELECT run_id, seq, message FROM {s}.feed WHERE run_id = ANY(%s)",
                    f"SELECT run_id, consumed FROM {s}.feed_state WHERE run_id = ANY(%s)",
                    f"SELECT run_id FROM {s}.work WHERE run_id = ANY(%s) AND wanted > handled",
                )
            ]
            rows, context, calls, blocks, feed, state, woken = [await q.fetchall() for q in queries]
            if not rows and not feed:
                return None
            by_run = [_grouped(context), _grouped(calls), _grouped(blocks)]
            runs = []
            for member, record, checkpoint in sorted(rows, key=lambda r: str(r[0])):
                snap = decode_snapshot(record, checkpoint, by_run[0][member], (), by_run[2][member])
                # Call rows read in this snapshot, their texts from the log.
                snap.calls = await pg_resolved(
                    conn.cursor(), s, member, decode_rows(by_run[1][member]), snap.context
                )
                runs.append(snap)
        consumed = {r[0]: int(r[1]) for r in state}
        feeds = [
            FeedDump(
                run_id=member,
                messages=[decode(m, FeedMessage) for m in messages],
                consumed=consumed.get(member, 0),
            )
            for member, messages in sorted(_grouped(feed).items())
        ]
        root = root_of(run_id)
        return RunDump(
            run_id=run_id, runs=runs, feeds=feeds, woken=any(r[0] == root for r in woken)
        )

    async def restore_run(self: _Host, dump: RunDump) -> None:
        """Write a dumped tree in one transaction; everything is encoded first.

        Raises:
            ConflictError: A run of the tree has a row or input here already.
            UsageError: The dump names a run outside its tree.
        """
        s = self._s
        ids = check_dump(dump)
        rows = dump_rows(dump)
        async with self._transaction() as conn:
            await _lock_feeds(conn, self.schema, ids)
            cur = await conn.execute(
                f"SELECT run_id FROM {s}.runs WHERE run_id = ANY(%s) UNION ALL SELECT run_id"
                f" FROM {s}.feed WHERE run_id = ANY(%s) UNION ALL SELECT run_id FROM"
                f" {s}.feed_state WHERE run_id = ANY(%s) AND consumed > 0 LIMIT 1",
                (ids, ids, ids),
            )
            taken = await cur.fetchone()
            if taken is not None:
                raise ConflictError(
                    f"run {taken[0]!r} exists in this store; delete it before restoring run "
                    f"{dump.run_id!r}"
                )
            cur = conn.cursor()
            if dump.woken:  # the claim's row before the run rows, as the store's other writes
                await wake_in(cur, s, root_of(dump.run_id))
            await cur.execute(f"DELETE FROM {s}.feed_state WHERE run_id = ANY(%s)", (ids,))
            inserts: list[tuple[str, list[tuple[Any, ...]]]] = [
                (
                    f"INSERT INTO {s}.runs (run_id, agent, status, created_us, updated_us, steps,"
                    " record, checkpoint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    rows.runs,
                ),
                (
                    f"INSERT INTO {s}.context (run_id, idx, message) VALUES (%s, %s, %s)",
                    rows.context,
                ),
                (
                    f"INSERT INTO {s}.calls (run_id, call_id, rev, status, record)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    rows.calls,
                ),
                (
                    f"INSERT INTO {s}.blocks (run_id, block_id, position, block)"
                    " VALUES (%s, %s, %s, %s)",
                    rows.blocks,
                ),
                (
                    f"INSERT INTO {s}.feed (run_id, seq, message_id, revision, message)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    rows.feed,
                ),
                (f"INSERT INTO {s}.feed_state (run_id, consumed) VALUES (%s, %s)", rows.consumed),
            ]
            for sql, params in inserts:
                if params:
                    await cur.executemany(sql, params)


def _grouped(rows: list[Any]) -> defaultdict[str, list[bytes]]:
    """``(run id, position, document)`` rows by run id, each run's in order of position."""
    rows.sort(key=_run_and_position)  # stable: equal positions keep the order they came in
    out: defaultdict[str, list[bytes]] = defaultdict(list)
    for member, _, data in rows:
        out[member].append(data)
    return out


_run_and_position = itemgetter(0, 1)
