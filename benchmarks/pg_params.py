"""What psycopg spends adapting the parameters of one loop step, text against binary format.

``PostgresStore`` writes a loop step as one call of ``save_loop_step`` with 30 parameters
(``stores/_postgres_fast.py``): documents as ``bytea`` and ``bytea[]``, ids as ``text[]``.
In text format (``%s``) psycopg hex-escapes each document (twice its size) and escapes each
array through a regular expression; in binary format (``%b``) it sends the bytes; "prebuilt"
is the store's way, arrays built by ``_postgres_arrays`` (their building counted). This prints
the client CPU of adapting one step's parameters (``PostgresQuery.dump``, the work psycopg
does per execute before it sends) and the bytes they take, each way, then checks that the
server reads them all the same.

    .venv/bin/python benchmarks/pg_params.py [--dsn DSN] [--reps 5000]

The parameters have the shape of the peer workload's step that settles a call and appends
its result (a 1 KiB argument): a run row, a checkpoint, one context message, one call row,
one history entry.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

import psycopg
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from steadyrun.stores._postgres_arrays import bytea_array, int8_array, register, text_array
from steadyrun.stores._postgres_fast import fast_sql

# The argument types of the store's own call, in order.
TYPES = re.findall(r"::([a-z\[\]]+)", fast_sql("s").sql.decode())


def step_params() -> tuple[Any, ...]:
    """Parameters of ``save_loop_step``'s shape and of the loop's sizes."""
    doc = b'{"format":1,"data":{"text":"' + b"x" * 1024 + b'"}}'
    small = b'{"format":1,"data":{"phase":"model","iteration":7}}'
    return (
        "run", "loop", "running", 1, 2, 3, small, small,  # run row
        "run", "owner", 5,  # fence
        None, None, 0, 10, [doc],  # removals, segment, append
        ["m3.c1"], [3], ["succeeded"], [small],  # new calls
        None, None, None, None, None,  # merged calls
        None, None, None,  # blocks
        small, 0,  # history entry, claimed feed
    )  # fmt: skip


def prebuilt(params: tuple[Any, ...]) -> tuple[Any, ...]:
    """``params`` with each list as the store builds it (``_postgres_arrays``)."""
    build = {"text[]": text_array, "bigint[]": int8_array, "bytea[]": bytea_array}
    return tuple(
        build[t](v) if isinstance(v, list) else v for t, v in zip(TYPES, params, strict=True)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres")
    p.add_argument("--reps", type=int, default=5000)
    args = p.parse_args()
    lists = step_params()
    if len(TYPES) != len(lists):
        raise SystemExit(f"save_loop_step takes {len(TYPES)} arguments, not {len(lists)}")
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        register(conn.adapters)
        rows = []
        ways = (
            ("%s", "text (%s)", False),
            ("%b", "binary (%b)", False),
            ("%b", "prebuilt", True),  # the store's way: arrays built with their type known
        )
        for mark, name, built in ways:
            sql = "SELECT " + ", ".join(f"{mark}::{t}" for t in TYPES)
            query = PostgresQuery(Transformer(conn))
            params = prebuilt(lists) if built else lists
            query.convert(sql, params)
            best = float("inf")
            for _ in range(5):
                t0 = time.process_time()
                for _ in range(args.reps):
                    query.dump(prebuilt(lists) if built else lists)
                best = min(best, (time.process_time() - t0) / args.reps)
            sent = sum(len(v) for v in query.params or () if v is not None)
            rows.append(conn.execute(sql, params).fetchone())
            print(f"{name:<12} {best * 1e6:6.1f} us CPU per step's parameters, {sent:5d} bytes")
        if rows[0] != rows[1] or rows[1] != rows[2]:
            raise SystemExit("the server read the formats differently")
        print("the server read all the same")


if __name__ == "__main__":
    main()
