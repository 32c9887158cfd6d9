"""The loop step's arrays, built in PostgreSQL's binary format by ``_postgres_arrays``.

``save_loop_step`` takes its columns as ``text[]``, ``bigint[]`` and ``bytea[]``; the store
builds each array's bytes itself instead of psycopg's list dumping. The server must read every
array exactly as psycopg's own adaptation of the same list: any text (NUL aside, which a
``text`` cannot hold), any 64-bit integer, any bytes, NULL elements, one element or many.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgkit
from steadyrun.stores._postgres_arrays import bytea_array, int8_array, register, text_array

pg_dsn = pgkit.database_fixture()

_texts = st.lists(st.none() | st.text().filter(lambda s: "\x00" not in s), min_size=1)
_ints = st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=1)
_bytes = st.lists(st.none() | st.binary(), min_size=1)


@pytest.fixture
def conn(pg_dsn: str) -> Any:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        register(c.adapters)
        yield c


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=_texts, ints=_ints, blobs=_bytes)
def test_the_server_reads_each_array_as_psycopg_sends_the_list(
    conn: Any, texts: list[Any], ints: list[Any], blobs: list[Any]
) -> None:
    ours = conn.execute(
        "SELECT %b::text[], %b::bigint[], %b::bytea[]",
        (text_array(texts), int8_array(ints), bytea_array(blobs)),
    ).fetchone()
    theirs = conn.execute("SELECT %s::text[], %s::bigint[], %s::bytea[]", (texts, ints, blobs))
    assert ours == theirs.fetchone()
    assert ours == (texts, ints, blobs)


def test_an_array_is_one_dimensional_from_index_one(conn: Any) -> None:
    row = conn.execute(
        "SELECT array_lower(%b::text[], 1), array_upper(%b::bigint[], 1), array_ndims(%b::bytea[])",
        (text_array(["a", "b"]), int8_array([1, 2, 3]), bytea_array([b"x"])),
    ).fetchone()
    assert row == (1, 3, 1)
