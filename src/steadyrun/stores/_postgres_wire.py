"""One prepared statement sent through libpq directly: the loop step's round trip.

The loop's step is one call of ``save_loop_step`` (``_postgres_fast``): thirty parameters the
store already holds as bytes, integers and strings, and one integer back. Through a psycopg
cursor each call also builds a cursor and its adapters, converts the query, looks up a dumper
per parameter, steps a generator per wait and tracks the statement in the connection's
prepared-statement cache: 40 to 50 us of client CPU a call, about a tenth of an N=400
iteration's wall on PostgreSQL (``benchmarks/peers``, issue 20). ``call_prepared`` sends the
statement with libpq's own calls (psycopg's ``pq`` module, on the pool's connection), every
parameter in binary, and waits for the socket on the event loop itself.

What the cursor gave is kept: the statement is prepared once per connection (and again when
the server no longer knows it); a server error comes back as psycopg's exception of its
SQLSTATE (the store's ``refused`` reads it); a connection that breaks raises
``psycopg.OperationalError``; a caller cancelled mid-statement cancels it on the server and
waits for its end, so the step it carried is not written and the connection is idle again
(one the server does not answer in time stays ACTIVE: the pool closes it when it is returned).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq

__all__ = ["Prepared", "call_prepared", "wire_params"]

_INT8 = struct.Struct("!q")
_UNKNOWN_STATEMENT = b"26000"  # invalid_sql_statement_name: DEALLOCATE or DISCARD ran
_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
_INTERRUPTED = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)
_CANCEL_S = 5.0  # how long a cancelled statement is waited for (psycopg's own wait)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A statement with ``$n`` parameters, and the name it is prepared under.

    Attributes:
        sql: The statement (UTF-8); its parameters carry their types (``$1::bigint``): each
            is sent in binary, so the server must not have to guess one.
        name: The prepared statement's name: derived from ``sql``, so two stores of
            different schemas sharing a connection never take each other's.
    """

    sql: bytes
    name: bytes

    @classmethod
    def of(cls, sql: str) -> Prepared:
        """The statement ``sql``, named after its text."""
        if re.search(r"\$\d+(?!\d|::)", sql):
            raise ValueError("every parameter needs its type cast ($1::bigint)")
        data = sql.encode()
        return cls(sql=data, name=b"steadyrun_" + hashlib.sha1(data).hexdigest()[:20].encode())


# The statements prepared on each connection, by name. Keyed by the connection object: a
# connection the pool replaces is a new object, and prepares again.
_prepared: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


def wire_params(params: Sequence[object]) -> list[bytes | None]:
    """``params`` in PostgreSQL's binary format: ``text`` as UTF-8, ``bigint`` as 8 bytes.

    ``bytes`` (a ``bytea``, or an array already in binary, ``_postgres_arrays``) go as they
    are, ``None`` as SQL ``NULL``. ``bool`` is refused: it would pass for an ``int``.

    Raises:
        TypeError: A value of another type.
        OverflowError: An integer outside ``bigint``.
    """
    out: list[bytes | None] = []
    for value in params:
        if value is None or isinstance(value, bytes):
            out.append(value)
        elif isinstance(value, str):
            out.append(value.encode())
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                out.append(_INT8.pack(value))
            except struct.error:
                raise OverflowError(f"{value} does not fit a bigint") from None
        else:
            raise TypeError(f"no binary form for a parameter of type {type(value).__name__}")
    return out


async def call_prepared(
    conn: psycopg.AsyncConnection[Any], stmt: Prepared, params: Sequence[object]
) -> tuple[bytes | None, ...]:
    """Run ``stmt`` with ``params`` on ``conn`` (autocommit, idle): its first row, as text.

    Each value is PostgreSQL's text form of the column (``b"12"`` for a ``bigint``), or
    ``None`` for ``NULL``; ``()`` when the statement returns no row.

    Raises:
        psycopg.Error: The server's error, as psycopg's class of its SQLSTATE, or
            ``psycopg.OperationalError`` when the connection is lost.
    """
    values = wire_params(params)
    formats = [1] * len(values)
    known = _prepared.get(conn)
    if known is None:  # setdefault would build a set at every call
        known = _prepared[conn] = set()
    pgconn = conn.pgconn
    for attempt in (1, 2):
        try:
            if stmt.name not in known:
                pgconn.send_prepare(stmt.name, stmt.sql)
                await _sent(pgconn)
                _check(await _result(pgconn), conn)
                known.add(stmt.name)
            pgconn.send_query_prepared(stmt.name, values, param_formats=formats)
            await _sent(pgconn)
            res = await _result(pgconn)
        except _INTERRUPTED:
            await _stop(conn)
            raise
        if res.status in _OK:
            if res.ntuples == 0:
                return ()
            return tuple(res.get_value(0, i) for i in range(res.nfields))
        if attempt == 1 and res.error_field(pq.DiagnosticField.SQLSTATE) == _UNKNOWN_STATEMENT:
            known.discard(stmt.name)  # deallocated behind our back: prepare it again
            continue
        _check(res, conn)
    raise AssertionError("unreachable")  # pragma: no cover


async def _stop(conn: psycopg.AsyncConnection[Any]) -> None:
    """Stop the statement a cancelled caller left running, as psycopg's own ``wait`` does.

    Closing the connection instead would not stop it: the server runs a statement to its end
    (and commits it) until it has an answer to send. Cancelled on the server, the statement
    rolls back and the connection is idle again; one the server does not answer in time
    stays ACTIVE, and the pool closes it.
    """
    pgconn = conn.pgconn
    if pgconn.transaction_status != pq.TransactionStatus.ACTIVE:
        return
    with contextlib.suppress(Exception):
        await conn.cancel_safe(timeout=_CANCEL_S)
        await asyncio.wait_for(_result(pgconn), _CANCEL_S)  # its end: cancelled, or done


def _check(res: pq.abc.PGresult, conn: psycopg.AsyncConnection[Any]) -> None:
    if res.status not in _OK:
        raise psycopg.errors.error_from_result(res, encoding=conn.info.encoding)


async def _sent(pgconn: pq.abc.PGconn) -> None:
    """Wait until libpq has written the whole request (the connection is non-blocking)."""
    while pgconn.flush():
        await _ready(pgconn, write=True)


async def _result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """The request's result, once the server has sent all of it."""
    # Busy until the whole answer is read: first wait, then read (reading first, right after
    # the request went out, found nothing once per step: a recv answered EAGAIN).
    while pgconn.is_busy():
        await _ready(pgconn, write=False)
        pgconn.consume_input()
    res = pgconn.get_result()
    if res is None:  # pragma: no cover - a request always has a result
        raise psycopg.OperationalError("the server sent no result")
    while pgconn.get_result() is not None:  # the end of the request (libpq's NULL)
        pass
    return res


async def _ready(pgconn: pq.abc.PGconn, *, write: bool) -> None:
    """Wait for the connection's socket on the running loop.

    The callback unregisters the socket itself: left registered until the woken task runs,
    a socket not yet read is reported ready once more, and its handle, cancelled by then,
    sits in the loop's ready queue (which made the loop look busy to a tool call).
    """
    loop = asyncio.get_running_loop()
    fd = pgconn.socket
    waiter: asyncio.Future[None] = loop.create_future()
    if write:
        add, remove = loop.add_writer, loop.remove_writer
    else:
        add, remove = loop.add_reader, loop.remove_reader

    def wake() -> None:
        remove(fd)
        if not waiter.done():
            waiter.set_result(None)

    add(fd, wake)
    try:
        await waiter
    except BaseException:
        remove(fd)  # cancelled before the socket was ready: it is still registered
        raise
