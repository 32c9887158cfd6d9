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
    .venv/bin/python benchmarks/counts.py --kinds sqlite --fsyncs   # and SQLite's fsyncs (strace)

``--fsyncs`` runs two whole SQLite runs of different lengths under ``strace -c`` and divides the
difference of their ``fsync``/``fdatasync`` calls by the difference of their iterations, so the
store's fixed costs (opening, creating the run, the checkpoint at close) cancel out.

PostgreSQL runs in a database created for the run and dropped after it, on the server of
``--admin-dsn`` (default: the test server, 127.0.0.1:5432, user postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
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


SYNC_CALLS = ("fsync", "fdatasync")


def whole_run_syncs(iterations: int) -> int:
    """fsync + fdatasync calls of a child process doing one SQLite run of the loop."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "strace.txt"
        cmd = [
            "strace", "-f", "-qq", "-c", "-e", f"trace={','.join(SYNC_CALLS)}", "-o", str(summary),
            sys.executable, __file__, "--child-sqlite-run", str(iterations),
        ]  # fmt: skip
        subprocess.run(cmd, check=True)
        total = 0
        for line in summary.read_text().splitlines():
            cells = line.split()
            if cells and cells[-1] in SYNC_CALLS:
                total += int(cells[3])  # % time, seconds, usecs/call, calls, [errors], syscall
        return total


def fsyncs_per_iteration(short: int = 10, long: int = 40) -> float | None:
    """SQLite fsyncs per loop iteration, or ``None`` without a working ``strace``."""
    if shutil.which("strace") is None:
        return None
    try:
        return (whole_run_syncs(long) - whole_run_syncs(short)) / (long - short)
    except (OSError, subprocess.CalledProcessError):
        return None  # e.g. ptrace not permitted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", nargs="+", choices=countkit.KINDS, default=list(countkit.KINDS))
    p.add_argument("--iterations", type=int, default=20, help="iterations counted (20)")
    p.add_argument("--admin-dsn", default=ADMIN_DSN, help="PostgreSQL server for 'postgres'")
    p.add_argument("--statements", action="store_true", help="print one iteration's SQL")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.add_argument("--fsyncs", action="store_true", help="count SQLite's fsyncs with strace")
    p.add_argument("--child-sqlite-run", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_sqlite_run is not None:
        asyncio.run(countkit.count_loop("sqlite", iterations=args.child_sqlite_run))
        return
    result = asyncio.run(measure(args.kinds, args.iterations, args.admin_dsn))
    syncs = fsyncs_per_iteration() if args.fsyncs and "sqlite" in args.kinds else None
    if args.json:
        out: dict[str, dict[str, float]] = {k: c.per_iteration() for k, c in result.items()}
        if syncs is not None:
            out["sqlite"]["fsyncs"] = syncs
        print(json.dumps(out))
        return
    print(f"Per loop iteration, over {args.iterations} iterations (1 tool call each):\n")
    print(countkit.table(result))
    if args.fsyncs:
        got = "no strace (or no ptrace here)" if syncs is None else f"{syncs:.3g}"
        print(f"\nSQLite fsync + fdatasync calls per iteration (strace): {got}")
    if args.statements:
        for kind, counts in result.items():
            if counts.statement_log:
                print(f"\n{kind}, one iteration:")
                print("\n".join(f"  {line}" for line in one_iteration(counts)))


if __name__ == "__main__":
    main()
