"""A SQLite file's write-ahead log: the switch to it, and the level a commit syncs at in it.

``use_wal`` puts a file in WAL mode, waiting for another process that opens it at the same
moment. ``group_level`` is the ``synchronous`` level a write group of ``SqliteThread`` commits
at: a group of writes whose loss in a crash of the machine is harmless need not sync its own
commit in WAL mode, since the next synced commit covers its frames.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

__all__ = ["FULL", "NORMAL", "busy", "group_level", "use_wal"]

NORMAL = 1
FULL = 2


def group_level(full: int, relax: bool, durable: Iterable[bool]) -> int:
    """The ``synchronous`` level (0 OFF .. 3 EXTRA) a write group commits at.

    The connection's own (``full``) when any job is durable or ``relax`` is off, else NORMAL.
    """
    if not relax or any(durable):
        return full
    return min(full, NORMAL)


def use_wal(conn: sqlite3.Connection, timeout: float) -> str:
    """Put the connection's file in WAL mode, waiting up to ``timeout`` s for other connections.

    Switching a file from rollback mode to WAL takes its exclusive lock, and SQLite does not
    wait for that lock through the busy timeout: when another process opens the same new file
    at the same moment (it switches it itself, or creates it), ``PRAGMA journal_mode = WAL``
    failed at once with "database is locked". So the mode is read first (a file already in
    WAL needs no lock), and the switch is tried again, re-reading the mode, until ``timeout``.
    The busy timeout must be set before: the read waits for locks through it.

    Returns:
        The journal mode in force (``"wal"``, or what SQLite kept, on a file system without
        shared memory, say).

    Raises:
        sqlite3.OperationalError: The file stayed locked past ``timeout`` (or another error).
    """
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode == "wal":
                return mode
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not busy(exc) or left <= 0:
                raise
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def busy(exc: BaseException) -> bool:
    """Whether SQLite answered ``SQLITE_BUSY`` (another connection holds the lock)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
