"""``_postgres_wire``: the loop step's statement sent through libpq, without a psycopg cursor.

The store sends ``save_loop_step`` with ``call_prepared``. What the cursor did must still
hold: every parameter reaches the server as psycopg would send it, the statement is prepared
once per connection (and again when the server forgot it), a server error is psycopg's
exception of its SQLSTATE and leaves the connection usable, a lost connection raises, a
request larger than the socket's buffer goes out whole, and a cancelled call leaves a
connection the pool closes rather than hands out mid-statement.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgkit
from steadyrun.stores import PostgresStore
from steadyrun.stores._postgres_arrays import bytea_array, int8_array, text_array
from steadyrun.stores._postgres_wire import Prepared, _ready, call_prepared, wire_params

pg_dsn = pgkit.database_fixture()

ECHO = Prepared.of("SELECT $1::text, $2::bigint, $3::bytea, $4::text[], $5::bigint[], $6::bytea[]")


async def connect(dsn: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


async def prepared_here(conn: psycopg.AsyncConnection[Any]) -> list[str]:
    cur = await conn.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
    return [r[0] for r in await cur.fetchall() if r[0].startswith("steadyrun_")]


async def reached(admin: psycopg.AsyncConnection[Any], pid: int, *, on_lock: bool = False) -> None:
    """Wait until the backend ``pid`` runs a statement (waits for a lock, with ``on_lock``)."""
    lock = " AND wait_event_type = 'Lock'" if on_lock else ""
    for _ in range(1000):
        # Inside a transaction the activity view is read once and kept: read it afresh.
        await admin.execute("SELECT pg_stat_clear_snapshot()")
        cur = await admin.execute(
            f"SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active'{lock}", (pid,)
        )
        if await cur.fetchone() is not None:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"backend {pid} never reached the server's statement")


_texts = st.text().filter(lambda s: "\x00" not in s)
_ints = st.integers(-(2**63), 2**63 - 1)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.none() | _texts,
    number=st.none() | _ints,
    blob=st.none() | st.binary(),
    texts=st.lists(st.none() | _texts, min_size=1, max_size=4),
    numbers=st.lists(st.none() | _ints, min_size=1, max_size=4),
    blobs=st.lists(st.none() | st.binary(), min_size=1, max_size=4),
)
def test_the_server_reads_each_parameter_as_psycopg_sends_it(
    pg_dsn: str,
    text: Any,
    number: Any,
    blob: Any,
    texts: list[Any],
    numbers: list[Any],
    blobs: list[Any],
) -> None:
    async def check() -> None:
        async with await connect(pg_dsn) as conn:
            params = (
                text,
                number,
                blob,
                text_array(texts),
                int8_array(numbers),
                bytea_array(blobs),
            )
            ours = await call_prepared(conn, ECHO, params)
            # The same values in the server's text form (how call_prepared answers), sent by
            # psycopg's own adaptation.
            cur = await conn.execute(
                "SELECT %s::text, %s::bigint::text, %s::bytea::text, %s::text[]::text,"
                " %s::bigint[]::text, %s::bytea[]::text",
                (text, number, blob, texts, numbers, blobs),
            )
            shown = await cur.fetchone()
            assert shown is not None
            assert ours == tuple(None if v is None else v.encode() for v in shown)

    asyncio.run(check())


def test_parameters_are_refused_when_they_have_no_binary_form() -> None:
    assert wire_params(["é", 2**63 - 1, -1, b"\x00", None]) == [
        "é".encode(),
        b"\x7f" + b"\xff" * 7,
        b"\xff" * 8,
        b"\x00",
        None,
    ]
    with pytest.raises(OverflowError, match="does not fit a bigint"):
        wire_params([2**63])
    with pytest.raises(TypeError, match="type bool"):
        wire_params([True])
    with pytest.raises(TypeError, match="type float"):
        wire_params([1.5])
    with pytest.raises(ValueError, match="type cast"):
        Prepared.of("SELECT $1")


async def test_a_statement_is_prepared_once_per_connection_and_again_when_forgotten(
    pg_dsn: str,
) -> None:
    add = Prepared.of("SELECT $1::bigint + $2::bigint")
    other = Prepared.of("SELECT $1::bigint - $2::bigint")
    assert add.name != other.name
    async with await connect(pg_dsn) as conn:
        assert await call_prepared(conn, add, (2, 3)) == (b"5",)
        assert await call_prepared(conn, add, (4, 5)) == (b"9",)
        assert await call_prepared(conn, other, (4, 5)) == (b"-1",)
        assert await prepared_here(conn) == sorted([add.name.decode(), other.name.decode()])
        await conn.execute("DEALLOCATE ALL")
        assert await call_prepared(conn, add, (1, 1)) == (b"2",)
        assert await prepared_here(conn) == [add.name.decode()]
    async with await connect(pg_dsn) as fresh:  # a new connection prepares for itself
        assert await call_prepared(fresh, add, (0, 0)) == (b"0",)


async def test_a_server_error_keeps_its_sqlstate_and_the_connection(pg_dsn: str) -> None:
    divide = Prepared.of("SELECT $1::bigint / $2::bigint")
    async with await connect(pg_dsn) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as caught:
            await call_prepared(conn, divide, (1, 0))
        assert caught.value.sqlstate == "22012"
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert await call_prepared(conn, divide, (9, 3)) == (b"3",)
        raising = Prepared.of("SELECT CASE WHEN $1::bigint > 0 THEN steadyrun_missing() END")
        with pytest.raises(psycopg.errors.UndefinedFunction):
            await call_prepared(conn, raising, (1,))
        assert await call_prepared(conn, Prepared.of("SELECT 1 WHERE $1::bigint = 0"), (1,)) == ()


async def test_a_lost_connection_raises_an_operational_error(pg_dsn: str) -> None:
    async with await connect(pg_dsn) as conn, await connect(pg_dsn) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError):
            await call_prepared(conn, Prepared.of("SELECT $1::bigint"), (1,))


async def test_a_request_larger_than_the_socket_buffer_goes_out_whole(pg_dsn: str) -> None:
    big = bytes(range(256)) * (32 * 1024)  # 8 MiB: many times a socket's send buffer
    async with await connect(pg_dsn) as conn:
        [length, digest] = await call_prepared(
            conn, Prepared.of("SELECT length($1::bytea), md5($1::bytea)"), (big,)
        )
        cur = await conn.execute("SELECT md5(%b::bytea)", (big,))
        row = await cur.fetchone()
    assert length == str(len(big)).encode()
    assert row is not None and digest == row[0].encode()


async def test_a_cancelled_call_is_stopped_on_the_server(pg_dsn: str) -> None:
    # Closing the connection would not stop it: the server runs a statement to its end (and
    # commits it) until it has an answer to send.
    sleep = Prepared.of("SELECT pg_sleep($1::bigint)")
    async with await connect(pg_dsn) as conn, await connect(pg_dsn) as admin:
        calling = asyncio.create_task(call_prepared(conn, sleep, (30,)))
        await reached(admin, conn.info.backend_pid)
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(calling, 10)  # well before the 30 s sleep ends
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # Nothing of the wait stays on the loop (a reader left behind would fire, and remove
        # the reader of whoever waits on this connection next).
        loop = asyncio.get_running_loop()
        assert not loop.remove_reader(conn.pgconn.socket)
        cur = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'",
            (conn.info.backend_pid,),
        )
        assert await cur.fetchone() == (0,)
        assert await call_prepared(conn, Prepared.of("SELECT $1::bigint"), (7,)) == (b"7",)


async def test_the_store_sends_its_loop_steps_without_a_cursor(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopsteps import loop_steps
    from steadyrun.stores import _postgres_db

    sent: list[bytes] = []
    cursor_statements: list[str] = []
    original, execute = _postgres_db.call_prepared, psycopg.AsyncCursor.execute

    async def spied_call(conn: Any, stmt: Prepared, params: Any) -> Any:
        sent.append(stmt.name)
        return await original(conn, stmt, params)

    async def spied_execute(cur: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        cursor_statements.append(str(query))
        return await execute(cur, query, *args, **kwargs)

    monkeypatch.setattr(_postgres_db, "call_prepared", spied_call)
    steps = loop_steps(3)
    async with PostgresStore(pg_dsn, max_size=1) as store:
        await store.save_step("r", steps[0])  # the general path: no segment known yet
        monkeypatch.setattr(psycopg.AsyncCursor, "execute", spied_execute)
        for s in steps[1:]:
            await store.save_step("r", s)
        monkeypatch.setattr(psycopg.AsyncCursor, "execute", execute)
        assert cursor_statements == []
        assert len(sent) == len(steps) - 1 and len(set(sent)) == 1
        async with store.database.connection() as conn:
            assert await prepared_here(conn) == [sent[0].decode()]  # prepared once


async def test_a_cancelled_prepare_is_stopped_too(pg_dsn: str) -> None:
    # Preparing reads the catalog and takes the tables' locks: it can wait like any statement.
    count = Prepared.of("SELECT count(*) FROM locked WHERE $1::bigint = 0")
    async with await connect(pg_dsn) as conn, await connect(pg_dsn) as admin:
        await admin.execute("CREATE TABLE locked (x int)")
        await admin.execute("BEGIN")
        await admin.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        calling = asyncio.create_task(call_prepared(conn, count, (0,)))
        await reached(admin, conn.info.backend_pid, on_lock=True)  # the prepare waits
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(calling, 10)
        await admin.execute("ROLLBACK")
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert await call_prepared(conn, count, (0,)) == (b"0",)


async def test_a_cancelled_wait_leaves_no_reader_on_the_loop(pg_dsn: str) -> None:
    async with await connect(pg_dsn) as conn:
        waiting = asyncio.create_task(_ready(conn.pgconn, write=False))  # an idle socket
        await asyncio.sleep(0)  # its first step has run: the reader is registered
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not asyncio.get_running_loop().remove_reader(conn.pgconn.socket)


def test_it_runs_on_uvloop_as_serve_runs_it(pg_dsn: str) -> None:
    # ``serve`` runs on uvloop: the socket waits go through its add_reader and add_writer.
    uvloop = pytest.importorskip("uvloop")
    sleep = Prepared.of("SELECT pg_sleep($1::bigint)")
    big = b"x" * (4 * 1024 * 1024)

    async def check() -> None:
        async with await connect(pg_dsn) as conn, await connect(pg_dsn) as admin:
            [n] = await call_prepared(conn, Prepared.of("SELECT length($1::bytea)"), (big,))
            assert n == str(len(big)).encode()
            calling = asyncio.create_task(call_prepared(conn, sleep, (30,)))
            await reached(admin, conn.info.backend_pid)
            calling.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(calling, 10)
            assert await call_prepared(conn, Prepared.of("SELECT $1::bigint"), (3,)) == (b"3",)

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(check())
    finally:
        loop.close()
