"""The server's time in the PostgreSQL loop step, part by part (``save_loop_step``).

Each loop step on PostgreSQL is one call of the store's server function ``save_loop_step``
(``stores._postgres_fast``). Timing the loop from the client mixes the server's work with the
client's, the network's and the commit's wait, and moves by 10% from one run to the next on a
shared machine. PostgreSQL times the function itself when ``track_functions`` is ``pl``: its
``pg_stat_user_functions`` view then holds each function's calls, total time and self time (in
ms, from the server's clock), which move far less. This script reads them.

In a scratch database (created and dropped), for each variant and repetition, a new schema is
migrated by ``PostgresStore``, the variant is applied to it, and the peer harness's loop (its
agent, model and tool) runs N iterations on it; the inner function (version 6's body, which
version 7's calls) is then read from the view. Variants, each ``today`` with one part taken
away (a measurement only: every part is there for a guarantee or a reader):

* ``today``: the schema as migrated;
* ``no fence``: no lock of the lease row and no ``work_log`` row (the claim's step log);
* ``no segment check``: the history's previous segment not compared with the writer's;
* ``no append check``: the message before the append not looked up;
* ``no history entry``: no ``step_history`` row;
* ``no foreign keys``: the context, calls, blocks and history rows not checked against
  ``runs`` (the constraints dropped);
* ``no listing indexes``: the three indexes that list runs by update time dropped (each step
  updates that time: the run row's update is never a HOT one).

Usage::

    .venv/bin/python benchmarks/pg_step_parts.py              # N=400, 3 repetitions
    .venv/bin/python benchmarks/pg_step_parts.py --n 200 --reps 5 --variants today "no fence"

It prints, per variant, the median (and range) of the inner function's ms per call, its
difference from ``today``, and the loop's wall ms per iteration. It never asserts on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import steadyrun_loop as L  # noqa: E402  (the harness's agent, model and tool)
from bench_pg import fresh_database  # noqa: E402

from steadyrun import PostgresStore, Runtime  # noqa: E402
from steadyrun.stores._postgres_schema import MIGRATIONS  # noqa: E402

_TODAY = MIGRATIONS[7]  # version 8: version 6's function as it runs today (CREATE OR REPLACE)


def _without(start: str, end: str) -> Callable[[str], str]:
    """The function's text without the part from ``start`` up to ``end``."""

    def cut(text: str) -> str:
        i = text.index(start)
        return text[:i] + text[text.index(end, i) :]

    return cut


def _same(text: str) -> str:
    return text


_FKS = ("context", "calls", "step_history", "blocks")
_LISTING = ("runs_by_update", "runs_by_status", "runs_by_agent")

VARIANTS: dict[str, tuple[Callable[[str], str], list[str]]] = {
    "today": (_same, []),
    "no fence": (
        _without("        IF p_fence_run IS NOT NULL THEN", "        -- The run row next"),
        [],
    ),
    "no segment check": (
        _without("        IF COALESCE((SELECT segment", "        -- The append continues"),
        [],
    ),
    "no append check": (
        _without("        IF p_at > 0 AND NOT EXISTS", "        IF cardinality(p_messages) > 0"),
        [],
    ),
    "no history entry": (_without("        INSERT INTO {s}.step_history", "    END\n    $$;"), []),
    "no foreign keys": (
        _same,
        [f"ALTER TABLE {{s}}.{t} DROP CONSTRAINT {t}_run_id_fkey" for t in _FKS],
    ),
    "no listing indexes": (_same, [f"DROP INDEX {{s}}.{i}" for i in _LISTING]),
}


async def one(dsn: str, variant: str, rep: int, n: int) -> tuple[float, float]:
    """One loop of ``n`` iterations on a new schema: (inner function ms a call, wall ms/iter)."""
    import psycopg

    schema = f"parts_{rep}_{variant.replace(' ', '_')}"
    quoted = f'"{schema}"'
    store = PostgresStore(f"{dsn} options='-c track_functions=pl'", schema=schema)
    await store.list_runs(limit=1)  # migrated
    change, statements = VARIANTS[variant]
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute(change(_TODAY).format(s=quoted))
        for statement in statements:
            await admin.execute(statement.format(s=quoted))
    fake = L.FakeLoop(n, "echo")
    agent = L.build_agent(fake, None, False)
    started = time.perf_counter()
    await Runtime(store).run(agent, run_id="r", input=L.RUN_INPUT)
    wall = (time.perf_counter() - started) / n * 1e3
    await store.close()  # its connections end: their function counts reach the view
    query = (
        "SELECT calls, total_time FROM pg_stat_user_functions WHERE schemaname = %s"
        " AND total_time = self_time AND calls > 0"
    )
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        for _ in range(50):  # the statistics arrive shortly after the backends exit
            row = await (await admin.execute(query, (schema,))).fetchone()
            if row is not None and row[0] >= n:
                break
            await asyncio.sleep(0.1)
        await admin.execute(f"DROP SCHEMA {quoted} CASCADE")
    if row is None:
        raise SystemExit("no function times in pg_stat_user_functions: is track_functions allowed?")
    return float(row[1]) / int(row[0]), wall


async def main_async(admin_dsn: str, n: int, reps: int, variants: list[str]) -> None:
    await L.warmup(
        L.Env(
            argparse.Namespace(
                db=None,
                n=10,
                tool="echo",
                async_tool=False,
                inline_tool=False,
                sqlite_sync=None,
                no_warmup=False,
            ),
            "FULL",
        )
    )
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    with fresh_database(admin_dsn, "steadyrun_parts") as dsn:
        for rep in range(reps):  # interleaved: the machine's drift falls on every variant
            for variant in variants:
                results[variant].append(await one(dsn, variant, rep, n))
    base = statistics.median(r[0] for r in results.get("today", [])) if "today" in results else None
    print(f"save_loop_step's body on the server, N={n}, {reps} repetitions (median, range)")
    print(f"{'variant':<20} {'ms a call':>10} {'range':>17} {'vs today':>9} {'wall ms/iter':>13}")
    for variant, rows in results.items():
        inner = sorted(r[0] for r in rows)
        wall = statistics.median(r[1] for r in rows)
        mid = statistics.median(inner)
        diff = f"{mid - base:+.4f}" if base is not None else ""
        span = f"{inner[0]:.4f}-{inner[-1]:.4f}"
        print(f"{variant:<20} {mid:>10.4f} {span:>17} {diff:>9} {wall:>13.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument(
        "--admin-dsn",
        default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
        help="a database to create and drop the scratch database from",
    )
    args = p.parse_args()
    if args.n < 4 or args.reps < 1:
        p.error("--n must be at least 4 and --reps at least 1")
    asyncio.run(main_async(args.admin_dsn, args.n, args.reps, args.variants))


if __name__ == "__main__":
    main()
