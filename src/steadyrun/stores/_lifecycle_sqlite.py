"""``RunLifecycle`` of ``SqliteStore``, and giving the space of deleted runs back to the disk.

Each operation is one transaction on the store's thread: a delete and a restore hold SQLite's
write lock (``BEGIN IMMEDIATE``), so the look at the run's claim and the change are one step;
a dump reads one snapshot. The tree of a run is found by a recursive query over the calls of
its runs (``<run>/<call>``), through the primary keys.

SQLite keeps the pages of deleted rows in the file for reuse. ``reclaim`` gives them back:
files made by this release are in ``auto_vacuum = INCREMENTAL`` mode, where an incremental
vacuum truncates the free pages cheaply; older files need one full ``VACUUM`` (which also
switches them to incremental mode). In WAL mode the main file shrinks at a checkpoint, so
``reclaim`` ends with a truncating one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from steadyrun._codec import decode
from steadyrun._errors import ConflictError
from steadyrun._sqlite_thread import SqliteThread
from steadyrun.records import (
    RunSnapshot,
)
from steadyrun.stores._call_rows import decode_rows
from steadyrun.stores._call_rows_sql import CURRENT_SEGMENT, keep_calls, sqlite_resolved
from steadyrun.stores._encoded import decode_snapshot, dump_rows
from steadyrun.stores._history_sql import sql
from steadyrun.stores._leases import Fence, Holder, current_fence
from steadyrun.stores._leases_sqlite import SqliteLeases, wake_in
from steadyrun.stores._lifecycle import (
    FeedDump,
    RunDeletion,
    RunDump,
    check_dump,
    refuse_held,
    root_of,
)
from steadyrun.stores._ports import FeedMessage

T = TypeVar("T")

__all__ = ["Reclaimed", "SqliteLifecycle", "prepare_new_file"]

_TREE = (
    "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT tree.id || '/' || calls.call_id"
    " FROM tree JOIN calls ON calls.run_id = tree.id) SELECT id FROM tree"
)
_IN = "IN (SELECT value FROM json_each(?))"


class _Host(Protocol):
    """What the mixin uses of ``SqliteStore``."""

    path: Path
    leases: SqliteLeases
    _db: SqliteThread

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Reclaimed:
    """What ``SqliteStore.reclaim`` did.

    Attributes:
        mode: ``incremental`` (free pages truncated), ``full`` (the file rewritten by
            ``VACUUM``) or ``none`` (a file not in incremental mode, made by an older
            release, and no full vacuum asked for: only the WAL was checkpointed).
        before: Bytes of the database file and its WAL before.
        after: Bytes of both after.
    """

    mode: Literal["incremental", "full", "none"]
    before: int
    after: int

    @property
    def freed(self) -> int:
        """Bytes given back to the file system."""
        return max(0, self.before - self.after)


def prepare_new_file(conn: sqlite3.Connection) -> None:
    """Put a new, empty database file in incremental auto-vacuum mode (before any table).

    The mode can only be chosen while the file has no table; an existing file keeps its
    mode until a full ``VACUUM`` (``reclaim(full=True)``).
    """
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


def _now_us() -> int:
    return time.time_ns() // 1000


def _tree(conn: sqlite3.Connection, run_id: str) -> str:
    """The ids the tree may hold (the run, and one per call of its runs), as a JSON list."""
    return json.dumps([r[0] for r in conn.execute(_TREE, (run_id,)).fetchall()])


def _refuse_held(conn: sqlite3.Connection, run_id: str, fence: Fence | None) -> None:
    root = root_of(run_id)
    row = conn.execute(
        "SELECT owner, token, expires_us FROM work WHERE run_id = ? AND owner IS NOT NULL"
        " AND expires_us >= ?",
        (root, _now_us()),
    ).fetchone()
    holder = None
    if row is not None:
        expires = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(row[2]))
        holder = Holder(run_id=root, owner=row[0], token=int(row[1]), expires_at=expires)
    refuse_held(run_id, holder, fence)


def read_snapshot(conn: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
    """The run as stored, inside the caller's read transaction; ``None`` when there is none."""
    row = conn.execute(
        # With the current segment, which call rows' references may need.
        f"SELECT record, checkpoint, ({sql(CURRENT_SEGMENT)}) FROM runs WHERE run_id = ?",
        (run_id, run_id),
    ).fetchone()
    if row is None:
        return None
    context = conn.execute(
        "SELECT message FROM context WHERE run_id = ? ORDER BY idx", (run_id,)
    ).fetchall()
    # Calls in order of creation (rowid), blocks by position: both ordered here, by an int of
    # each row, rather than by SQLite, which copied every row (N=400: 136 KB) into a sorter.
    calls = conn.execute(
        "SELECT rowid, call_id, record FROM calls WHERE run_id = ?", (run_id,)
    ).fetchall()
    calls.sort(key=_first)
    blocks = conn.execute(
        "SELECT position, block FROM blocks WHERE run_id = ?", (run_id,)
    ).fetchall()
    blocks.sort(key=_first)
    # Blocks stay stored bytes until read; so do call rows, resolved against the log as read.
    snap = decode_snapshot(
        row[0], row[1], [m for (m,) in context], (), [b for _, b in blocks], call_ids=()
    )
    kept = [(i, raw) for _, i, raw in calls]
    if not keep_calls(snap, kept, row[2]):
        snap.calls = sqlite_resolved(
            conn, run_id, decode_rows(raw for _, raw in kept), snap.context, row[2]
        )
    return snap


_first = itemgetter(0)


class SqliteLifecycle:
    """The ``RunLifecycle`` methods and ``reclaim`` of ``SqliteStore`` (a mixin of it)."""

    async def delete_run(self: _Host, run_id: str) -> RunDeletion:
        """Delete the run, its sub-agent runs, their input, the claim and the step log.

        Raises:
            RunBusyError: Another executor holds the run's claim (nothing is deleted).
        """
        fence = current_fence()
        root = root_of(run_id)

        def write(conn: sqlite3.Connection) -> RunDeletion:
            conn.execute("BEGIN IMMEDIATE")
            _refuse_held(conn, run_id, fence)
            ids = _tree(conn, run_id)
            runs = [
                r[0]
                for r in conn.execute(
                    f"SELECT run_id FROM runs WHERE run_id {_IN} ORDER BY run_id", (ids,)
                ).fetchall()
            ]
            messages = conn.execute(f"DELETE FROM feed WHERE run_id {_IN}", (ids,)).rowcount
            conn.execute(f"DELETE FROM feed_state WHERE run_id {_IN}", (ids,))
            # context, calls and blocks go with their run rows (ON DELETE CASCADE).
            conn.execute(f"DELETE FROM runs WHERE run_id {_IN}", (ids,))
            if run_id == root:
                conn.execute("DELETE FROM work WHERE run_id = ?", (root,))
                conn.execute("DELETE FROM work_log WHERE root = ?", (root,))
            else:
                conn.execute(f"DELETE FROM work_log WHERE root = ? AND run_id {_IN}", (root, ids))
            conn.execute("COMMIT")
            return RunDeletion(run_id=run_id, runs=runs, messages=messages)

        return await self._run(write)

    async def dump_run(self: _Host, run_id: str) -> RunDump | None:
        """The run tree as stored (one read transaction), or ``None``."""

        def read(conn: sqlite3.Connection) -> RunDump | None:
            conn.execute("BEGIN")
            try:
                ids = _tree(conn, run_id)
                members = conn.execute(
                    f"SELECT run_id FROM runs WHERE run_id {_IN} ORDER BY run_id", (ids,)
                ).fetchall()
                runs = [read_snapshot(conn, r[0]) for r in members]
                rows = conn.execute(
                    f"SELECT run_id, message FROM feed WHERE run_id {_IN} ORDER BY run_id, seq",
                    (ids,),
                ).fetchall()
                consumed = dict(
                    conn.execute(
                        f"SELECT run_id, consumed FROM feed_state WHERE run_id {_IN}", (ids,)
                    ).fetchall()
                )
                woken = conn.execute(
                    "SELECT 1 FROM work WHERE run_id = ? AND wanted > handled", (root_of(run_id),)
                ).fetchone()
            finally:
                conn.execute("COMMIT")
            feeds: dict[str, FeedDump] = {}
            for feed_id, data in rows:
                feed = feeds.setdefault(
                    feed_id, FeedDump(run_id=feed_id, consumed=int(consumed.get(feed_id, 0)))
                )
                feed.messages.append(decode(data, FeedMessage))
            found = [snap for snap in runs if snap is not None]
            if not found and not feeds:
                return None
            return RunDump(
                run_id=run_id, runs=found, feeds=list(feeds.values()), woken=woken is not None
            )

        return await self._run(read)

    async def restore_run(self: _Host, dump: RunDump) -> None:
        """Write a dumped tree in one transaction; everything is encoded first.

        Raises:
            ConflictError: A run of the tree has a row or input here already.
            UsageError: The dump names a run outside its tree.
        """
        ids = json.dumps(check_dump(dump))
        rows = dump_rows(dump)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            taken = conn.execute(
                f"SELECT run_id FROM runs WHERE run_id {_IN} UNION SELECT run_id FROM feed"
                f" WHERE run_id {_IN} UNION SELECT run_id FROM feed_state WHERE run_id {_IN}"
                " AND consumed > 0 LIMIT 1",
                (ids, ids, ids),
            ).fetchone()
            if taken is not None:
                raise ConflictError(
                    f"run {taken[0]!r} exists in this store; delete it before restoring run "
                    f"{dump.run_id!r}"
                )
            conn.execute(f"DELETE FROM feed_state WHERE run_id {_IN}", (ids,))
            conn.executemany(
                "INSERT INTO runs (run_id, agent, status, created_us, updated_us, steps, record,"
                " checkpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows.runs,
            )
            conn.executemany(
                "INSERT INTO context (run_id, idx, message) VALUES (?, ?, ?)", rows.context
            )
            conn.executemany(
                "INSERT INTO calls (run_id, call_id, rev, status, record) VALUES (?, ?, ?, ?, ?)",
                rows.calls,
            )
            conn.executemany(
                "INSERT INTO blocks (run_id, block_id, position, block) VALUES (?, ?, ?, ?)",
                rows.blocks,
            )
            conn.executemany(
                "INSERT INTO feed (run_id, seq, message_id, revision, message)"
                " VALUES (?, ?, ?, ?, ?)",
                rows.feed,
            )
            conn.executemany(
                "INSERT INTO feed_state (run_id, consumed) VALUES (?, ?)", rows.consumed
            )
            if dump.woken:
                wake_in(conn, None, root_of(dump.run_id))
            conn.execute("COMMIT")

        await self._run(write)
        if dump.woken:
            self.leases.notify()

    async def reclaim(self: _Host, *, full: bool = False) -> Reclaimed:
        """Give the pages of deleted rows back to the file system.

        An incremental vacuum where the file is in incremental mode (files this release
        made), a full ``VACUUM`` when ``full`` is set (it rewrites the file, holding the write
        lock meanwhile, and puts it in incremental mode); then a truncating WAL checkpoint.

        Args:
            full: Rewrite the whole file (needed once for a file made by an older release).
        """

        def work(conn: sqlite3.Connection) -> Reclaimed:
            before = _size(self.path)
            mode: Literal["incremental", "full", "none"] = "none"
            if full:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
                mode = "full"
            elif conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                # Through sqlite3_exec, which steps it to the end: execute() would step it
                # once, freeing one page.
                conn.executescript("PRAGMA incremental_vacuum;")
                mode = "incremental"
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return Reclaimed(mode=mode, before=before, after=_size(self.path))

        self._db.drop_readers()  # an open reader connection keeps the freed pages in the file
        await self._db.wait_idle()  # the writer's own checkpoint would keep the WAL whole
        return await self._run(work)


def _size(path: os.PathLike[str] | str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):  # no WAL file: nothing to count
            total += os.path.getsize(f"{os.fspath(path)}{suffix}")
    return total
