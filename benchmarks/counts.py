"""What each store does per loop iteration: commits, statements, hops, round trips, encodes.

Counts, not times, so the figures are the same on every machine and every run. The counting
is ``tests/countkit.py`` (how each figure is taken is in its docstring); ``tests/stores/
test_counts.py`` holds the same figures as upper bounds. The loop is a real ``Runtime`` with a
scripted model asking for one ``echo`` call (1 KiB argument) per model call; only whole
iterations in the middle of the run are counted.

Usage::

    .venv/bin/python benchmarks/counts.py                  # memory, sqlite, postgres
    .venv/bin/python benchmarks/counts.py --kinds sqlite --statements   # and the SQL of one
    .venv/bin/python benchmarks/counts.py --json

PostgreSQL runs in a database created for the run and dropped after it, on the server of
``--admin-dsn`` (default: the test server, 127.0.0.1:5432, user postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import countkit  # noqa: E402

ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"


@asynccontextmanager
async def scratch_database(admin_dsn: str) -> AsyncIterator[str]:
    """A new database for the run (its DSN), dropped afterwards."""
    import psycopg
    from psycopg import conninfo, sql

    name = f"steadyrun_counts_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield conninfo.make_conninfo(admin_dsn, dbname=name)
    finally:
        async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            await admin.execute(drop.format(sql.Identifier(name)))


async def measure(kinds: list[str], iterations: int, admin_dsn: str) -> dict[str, countkit.Counts]:
    out: dict[str, countkit.Counts] = {}
    for kind in kinds:
        if kind == "postgres":
            async with scratch_database(admin_dsn) as dsn:
                out[kind] = await countkit.count_loop(kind, iterations=iterations, dsn=dsn)
        else:
            out[kind] = await countkit.count_loop(kind, iterations=iterations)
    return out


def one_iteration(counts: countkit.Counts) -> list[str]:
    """The statements of the window's first iteration (the log repeats itself after it)."""
    log = counts.statement_log
    return log[: len(log) // max(1, counts.iterations)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", nargs="+", choices=countkit.KINDS, default=list(countkit.KINDS))
    p.add_argument("--iterations", type=int, default=20, help="iterations counted (20)")
    p.add_argument("--admin-dsn", default=ADMIN_DSN, help="PostgreSQL server for 'postgres'")
    p.add_argument("--statements", action="store_true", help="print one iteration's SQL")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args()
    result = asyncio.run(measure(args.kinds, args.iterations, args.admin_dsn))
    if args.json:
        print(json.dumps({k: c.per_iteration() for k, c in result.items()}))
        return
    print(f"Per loop iteration, over {args.iterations} iterations (1 tool call each):\n")
    print(countkit.table(result))
    if args.statements:
        for kind, counts in result.items():
            if counts.statement_log:
                print(f"\n{kind}, one iteration:")
                print("\n".join(f"  {line}" for line in one_iteration(counts)))


if __name__ == "__main__":
    main()
