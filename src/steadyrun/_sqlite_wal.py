"""A SQLite file's write-ahead log: the switch to it, a commit's sync, the writer's checkpoints.

``use_wal`` puts a file in WAL mode, waiting for another process that opens it at the same
moment. ``group_level`` is the ``synchronous`` level a write group of ``SqliteThread`` commits
at: a group of writes whose loss in a crash of the machine is harmless need not sync its own
commit in WAL mode, since the next synced commit covers its frames.

``CheckpointPace`` says when the writer, idle, checkpoints the log. SQLite does it inside the
commit that takes the log past 1,000 pages, and that commit's caller waits while the pages
are copied into the file and both files are synced (in issue 20's 10,000 suspended runs the
same resume was the slowest in every run, 3 ms over the median). The writer checkpoints
about as often, when it has nothing to write: with a model's pauses between a run's steps,
nobody waits for it, and the next write starts the log again from its head. SQLite's own is
moved to twice as many pages: a writer that is never idle (many runs committing back to back)
leaves the checkpoints to it, as before, at twice the pages half as often.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

__all__ = ["AUTO_PAGES", "FULL", "NORMAL", "CheckpointPace", "busy", "group_level", "use_wal"]

NORMAL = 1
FULL = 2

IDLE_PAGES = 1000
"""About how many pages of log an idle writer's checkpoint copies (SQLite's default)."""

AUTO_PAGES = 2 * IDLE_PAGES
"""The writer's ``wal_autocheckpoint``: SQLite's own checkpoint, for a writer never idle."""

_FIRST_EVERY = 64  # commits before the first checkpoint, which measures a commit's pages
_MAX_EVERY = 1000


class CheckpointPace:
    """After how many commits an idle writer checkpoints: about every ``pages`` of log.

    A commit's pages are not known to the writer; a checkpoint says how many pages the log
    holds (all written since the last one, when that one let the log start again), and the
    commits to the next are set from that.
    """

    def __init__(self, pages: int = IDLE_PAGES) -> None:
        self._pages = pages
        self._every = _FIRST_EVERY
        self._since = 0

    def committed(self) -> None:
        """One more commit."""
        self._since += 1

    def due(self) -> bool:
        """Whether the writer, if idle, checkpoints now."""
        return self._since >= self._every

    def checkpointed(self, log_pages: int) -> None:
        """A checkpoint ran and found ``log_pages`` pages in the log (0: it failed)."""
        commits, self._since = self._since, 0
        every = self._pages * commits // max(log_pages, 1)
        self._every = min(max(every, 1), _MAX_EVERY)


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
