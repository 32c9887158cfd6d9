"""One SQLite connection on a thread of its own, so blocking disk I/O never runs on the loop.

Every SQLite-backed part of steadyrun (the run store, the task store, the memory bank) talks
to its file through one of these: the connection opens lazily on the thread, a failing call
rolls back what it left open, and SQLite's errors become ``StoreError`` with the file named.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from steadyrun._errors import StoreError

__all__ = ["SqliteThread"]

T = TypeVar("T")


class SqliteThread:
    """Runs functions of a connection on the connection's own thread.

    Args:
        open: Opens (and prepares) the connection; runs on the thread, on first use.
        what: Names the file in errors (``"SQLite store runs.db"``).
        thread_name: The thread's name prefix.
    """

    def __init__(self, open: Callable[[], sqlite3.Connection], what: str, thread_name: str) -> None:
        self._open = open
        self.what = what
        self._thread_name = thread_name
        self._executor: ThreadPoolExecutor | None = None
        self.conn: sqlite3.Connection | None = None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the thread."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            if self.conn is None:
                self.conn = self._open()
            return fn(self.conn)
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"{self.what}: {exc}") from exc
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.rollback()

    async def close(self) -> None:
        """Close the connection and stop the thread; ``run`` opens them again if called."""
        if self._executor is None:
            return

        def shut(_: sqlite3.Connection) -> None:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

        if self.conn is not None:
            await self.run(shut)
        self._executor.shutdown(wait=True)
        self._executor = None
