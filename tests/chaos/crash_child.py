"""The crash test's child process: run or resume the chaos workload, dying at a kill point.

Usage: ``python crash_child.py --store STORE --mode run|resume --kill-at KIND:N|0 --effects
FILE`` where STORE is ``sqlite:PATH`` or ``postgres:SCHEMA|DSN``. On success it prints one JSON
line (the run's outcome, and how many events of each kind it counted, so the test can pick kill
points from an uninterrupted run).

SQLite: every statement the store's connection starts is a ``sql`` event (through
``sqlite3.Connection.set_trace_callback``, which fires as a statement begins): a kill at a
``COMMIT`` dies before the commit, at the statement after it after the commit, at any other
statement between a transaction's ``BEGIN`` and its ``COMMIT``. The store syncs with
``synchronous=NORMAL``: a SIGKILL loses nothing the process handed to the OS (``FULL`` only
adds protection against power loss, which a process kill cannot test).

PostgreSQL: every statement psycopg sends, and the ``BEGIN``/``COMMIT`` of each transaction
block, is a ``sql`` event (see ``trace_psycopg``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from chaoskit import KillSwitch, drive  # noqa: E402
from chaosproc import serve  # noqa: E402

import steadyrun as sr  # noqa: E402


class TracedSqliteStore(sr.SqliteStore):
    """A ``SqliteStore`` whose connection reports every statement to the kill switch."""

    def __init__(self, path: str, switch: KillSwitch) -> None:
        super().__init__(path, synchronous="NORMAL")
        self._switch = switch

    def _open(self) -> sqlite3.Connection:
        conn = super()._open()
        conn.set_trace_callback(lambda sql: self._switch.hit("sql", sql.split(None, 1)[0]))
        return conn


def trace_psycopg(switch: KillSwitch) -> None:
    """Make every statement psycopg sends from this process a ``sql`` event.

    Cursor ``execute``/``executemany`` count before the statement is sent; a transaction block
    counts ``BEGIN`` as it opens and ``COMMIT`` before it commits, so a kill at a ``COMMIT``
    leaves the transaction open on the server, which rolls it back when the connection drops.
    """
    import psycopg

    execute = psycopg.AsyncCursor.execute
    executemany = psycopg.AsyncCursor.executemany
    enter = psycopg.AsyncTransaction.__aenter__
    leave = psycopg.AsyncTransaction.__aexit__

    def word(query: Any) -> str:
        return query.split(None, 1)[0] if isinstance(query, str) else type(query).__name__

    async def traced_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        switch.hit("sql", word(query))
        return await execute(self, query, *args, **kwargs)

    async def traced_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        switch.hit("sql", word(query))
        return await executemany(self, query, *args, **kwargs)

    async def traced_enter(self: Any) -> Any:
        switch.hit("sql", "BEGIN")
        return await enter(self)

    async def traced_leave(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
        if exc_type is None:
            switch.hit("sql", "COMMIT")
        return await leave(self, exc_type, exc, tb)

    psycopg.AsyncCursor.execute = traced_execute  # type: ignore[method-assign]
    psycopg.AsyncCursor.executemany = traced_executemany  # type: ignore[method-assign]
    psycopg.AsyncTransaction.__aenter__ = traced_enter  # type: ignore[method-assign]
    psycopg.AsyncTransaction.__aexit__ = traced_leave  # type: ignore[method-assign,assignment]


def open_store(spec: str, switch: KillSwitch) -> Any:
    """The store a ``--store`` spec names, with its kill points wired to ``switch``.

    ``sqlite:PATH``, or ``postgres:SCHEMA|DSN`` (the store's tables live in ``SCHEMA``).
    """
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return TracedSqliteStore(where, switch)
    if kind == "postgres":
        from steadyrun.stores._postgres import PostgresStore

        schema, _, dsn = where.partition("|")
        trace_psycopg(switch)
        return PostgresStore(dsn, schema=schema, min_size=1, max_size=4)
    raise SystemExit(f"unknown store {spec!r}")


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--mode", choices=["run", "resume"], required=True)
    parser.add_argument("--kill-at", default="0")
    parser.add_argument("--effects", required=True)
    args = parser.parse_args(argv)
    switch = KillSwitch(args.kill_at)
    store = open_store(args.store, switch)
    try:
        report = await drive(store, args.mode, switch, Path(args.effects))
    finally:
        await store.close()
    print(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve(main)
    else:
        asyncio.run(main(sys.argv[1:]))
