"""What psycopg spends adapting the parameters of one loop step, text against binary format.

``PostgresStore`` writes a loop step as one call of ``save_loop_step`` with 30 parameters
(``stores/_postgres_fast.py``): documents as ``bytea`` and ``bytea[]``, ids as ``text[]``.
In text format (``%s``) psycopg hex-escapes each document (twice its size) and escapes each
array through a regular expression; in binary format (``%b``) it sends the bytes. This prints
the client CPU of adapting one step's parameters (``PostgresQuery.dump``, the work psycopg
does per execute before it sends) and the bytes they take, each way, then checks that the
server reads both the same.

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

from steadyrun.stores._postgres_fast import fast_sql

# The argument types of the store's own call, in order.
TYPES = re.findall(r"::([a-z\[\]]+)", fast_sql("s"))


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres")
    p.add_argument("--reps", type=int, default=5000)
    args = p.parse_args()
    params = step_params()
    if len(TYPES) != len(params):
        raise SystemExit(f"save_loop_step takes {len(TYPES)} arguments, not {len(params)}")
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        rows = []
        for mark, name in (("%s", "text (%s)"), ("%b", "binary (%b)")):
            sql = "SELECT " + ", ".join(f"{mark}::{t}" for t in TYPES)
            query = PostgresQuery(Transformer(conn))
            query.convert(sql, params)
            best = float("inf")
            for _ in range(5):
                t0 = time.process_time()
                for _ in range(args.reps):
                    query.dump(params)
                best = min(best, (time.process_time() - t0) / args.reps)
            sent = sum(len(v) for v in query.params or () if v is not None)
            rows.append(conn.execute(sql, params).fetchone())
            print(f"{name:<12} {best * 1e6:6.1f} us CPU per step's parameters, {sent:5d} bytes")
        if rows[0] != rows[1]:
            raise SystemExit("the server read the two formats differently")
        print("the server read both the same")


if __name__ == "__main__":
    main()
