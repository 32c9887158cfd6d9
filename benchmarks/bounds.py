"""The least issue 20's unmet targets could cost here: the same work with parts taken away.

Figures only, never assertions. Six measurements:

* ``memory``: the harness's memory loop (N=400) with its plain ``def`` tool, run in a worker
  thread as the peers run theirs, and with the same body declared ``@tool(inline=True)`` (on
  the event loop, no thread), beside the floor's memory loop: the part that is the thread.

* ``sqlite``: the peer harness's SQLite loop (N=400, its agent, tool and FULL sync), four ways,
  interleaved over the repetitions:

  - ``today``: ``SqliteStore`` as shipped;
  - ``one row, thread``: a sketch store (``_StepLog``, here only) whose ``save_step`` writes
    the step's documents as ONE row of a log table and nothing else: no run row and its
    listing indexes, no context rows, no call rows, no history entry, no step log of the
    claim. The documents are encoded as today (run record, checkpoint, appended messages,
    blocks, call rows referring to the log, history entry), the commit is synced and made on
    the store's writer thread as today's is (issue 20 item 2: never an fsync on the event
    loop). This is the least a one-row-per-commit redesign could cost: it leaves out every
    read-back such a store would still need (folding the log into readable tables);
  - ``one row, on the loop``: the same, committed on the event loop (what item 2 forbids);
  - ``floor``: the harness's ``baseline_loop.py`` (in the peers' environment).

* ``postgres``: the same loop on PostgreSQL (a scratch database, created and dropped): today's
  ``PostgresStore`` (one call of its step function per commit), a sketch whose step is ONE
  statement (the fence's read and an insert of the same documents as one row, committed on
  its own), and the floor. Client CPU and wall.

* ``trip``: a round trip to a waiting thread and back, as a sync tool's body takes: plain, and
  with the thread woken on the caller's CPU (``sched_setaffinity`` before the hand-off, reset
  by the thread as it wakes; Linux only). The difference is the other CPU's wake-up.

* ``decode``: the context of the harness's run paused at N//2 (N=400: 402 messages), decoded
  by the codec (pydantic-core, to ``Message`` objects) and parsed by msgspec to plain dicts (no
  objects built: less than any decoder to ``Message`` can cost).

* ``commit``: one synced commit (WAL, ``synchronous = FULL``) of a 1 KB row on this disk, wall.
  A resume to its first model call makes at least three: the decision, the approved call's
  start, the step after its body.

Usage::

    .venv/bin/python benchmarks/bounds.py                    # all six, 5 repetitions
    .venv/bin/python benchmarks/bounds.py --parts sqlite --reps 7
    .venv/bin/python benchmarks/bounds.py --peers-python /tmp/peers-venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import queue
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import steadyrun_loop as L  # noqa: E402  (the harness's agent, model and store)
from bench_pg import fresh_database  # noqa: E402

from steadyrun import MemoryStore, PostgresStore, Runtime, SqliteStore  # noqa: E402
from steadyrun._codec import decode_all  # noqa: E402
from steadyrun.chat import Message  # noqa: E402
from steadyrun.records import Step  # noqa: E402
from steadyrun.stores._call_rows import Spots, encode_row  # noqa: E402
from steadyrun.stores._encoded import encode_step  # noqa: E402
from steadyrun.stores._history import encode_entry, entry_of  # noqa: E402

PARTS = ("memory", "sqlite", "postgres", "trip", "decode", "commit")
N = 400


class _Docs:
    """A step's documents, encoded as today's stores encode them, as one row's bytes."""

    def __init__(self) -> None:
        self.seq = 0
        self._length = 0

    def of(self, run_id: str, step: Step) -> bytes:
        enc = encode_step(run_id, step)
        start = self._length
        spots = Spots()
        spots.add_messages(step.context.append, 0, start)
        self._length += len(step.context.append)
        self.seq += 1
        return b"\x1e".join(
            [
                enc.run,
                enc.checkpoint,
                *enc.append,
                *(data for _, _, data in enc.blocks),
                *(encode_row(call, spots) for call in step.calls),
                encode_entry(entry_of(step, 0, start)),
            ]
        )


class _StepLog(SqliteStore):
    """A sketch, not a store: each step is one row of ``steplog``; nothing can be read back."""

    on_loop = False

    def __init__(self, path: str) -> None:
        super().__init__(path, synchronous="FULL")
        self._docs = _Docs()
        self._direct: sqlite3.Connection | None = None

    async def save_step(self, run_id: str, step: Step) -> int | None:
        doc = self._docs.of(run_id, step)
        row = (run_id, self._docs.seq, doc)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO steplog (run_id, seq, doc) VALUES (?, ?, ?)", row)
            conn.execute("SELECT 1 FROM work WHERE run_id = ?", (run_id,)).fetchone()  # fence

        if not self.on_loop:
            await self._db.write(write)
            return 0  # no input waits (today's stores learn it in the commit: no read)
        if self._direct is None:
            self._direct = sqlite3.connect(self.path, isolation_level=None)
            self._direct.execute("PRAGMA synchronous = FULL")
        self._direct.execute("BEGIN IMMEDIATE")
        write(self._direct)
        self._direct.execute("COMMIT")
        return 0

    async def close(self) -> None:
        if self._direct is not None:
            self._direct.close()
        await super().close()


class _PgStepLog(PostgresStore):
    """The sketch on PostgreSQL: one statement per step (the fence's read and one insert),
    committed on its own (autocommit: one round trip, a synced commit)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn, schema=_PG_SCHEMA)
        self._dsn = dsn
        self._docs = _Docs()
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def save_step(self, run_id: str, step: Step) -> int | None:
        doc = self._docs.of(run_id, step)
        if self._conn is None:
            self._conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        await self._conn.execute(
            f"INSERT INTO {_PG_SCHEMA}.steplog (run_id, seq, doc) SELECT %b, %b, %b"
            f" WHERE EXISTS (SELECT 1 FROM {_PG_SCHEMA}.work WHERE run_id = %b)",
            (run_id, self._docs.seq, doc, run_id),
            prepare=True,
        )
        return 0

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        await super().close()


_PG_SCHEMA = "bounds"


def _env(db: str, *, inline: bool = False) -> L.Env:
    args = argparse.Namespace(
        db=db, n=N, tool="echo", async_tool=False, inline_tool=inline, sqlite_sync=None,
        no_warmup=False, mode="sqlite",
    )  # fmt: skip
    return L.Env(args, "FULL")


async def _memory_once(env: L.Env) -> tuple[float, float]:
    """One run of N iterations on a ``MemoryStore``: (CPU ms, wall ms) per iteration."""
    with L.C.Timer() as t:
        result = await Runtime(MemoryStore()).run(
            env.agent(L.FakeLoop(N, "echo"), None), run_id="r", input=L.RUN_INPUT
        )
    L.expect(result, "completed", L.C.final_text(N))
    return t.cpu / N * 1e3, t.s / N * 1e3


def part_memory(reps: int, peers_python: str) -> None:
    envs = {"def tool, thread": _env("unused.db"), "inline tool": _env("unused.db", inline=True)}
    rows: dict[str, list[tuple[float, float]]] = {w: [] for w in [*envs, "floor"]}

    async def runs() -> None:
        for env in envs.values():
            await L.warmup(env)
        for _ in range(reps):
            for way, env in envs.items():
                rows[way].append(await _memory_once(env))
            floor = _floor_once(peers_python, "memory", None)
            if floor is not None:
                rows["floor"].append(floor)

    asyncio.run(runs())
    _table(f"memory: the harness's loop, N={N}, median of {reps} (ms per iteration)", rows)


def _table(title: str, rows: dict[str, list[tuple[float, float]]]) -> None:
    floor = statistics.median(c for c, _ in rows["floor"]) if rows["floor"] else None
    floor_wall = statistics.median(w for _, w in rows["floor"]) if rows["floor"] else None
    print(f"\n{title}")
    print(f"{'way':<22} {'CPU':>7} {'wall':>7} {'CPU / floor':>12} {'wall - floor':>13}")
    for way, got in rows.items():
        if not got:
            print(f"{way:<22} (not run: no peers' Python or harness)")
            continue
        cpu, wall = statistics.median(c for c, _ in got), statistics.median(w for _, w in got)
        ratio = f"x{cpu / floor:.2f}" if floor else "-"
        over = f"{wall - floor_wall:+.3f}" if floor_wall is not None else "-"
        print(f"{way:<22} {cpu:>7.3f} {wall:>7.3f} {ratio:>12} {over:>13}")


async def _sqlite_once(env: L.Env, way: str) -> tuple[float, float]:
    """One run of N iterations: (CPU ms, wall ms) per iteration."""
    db = env.args.db
    L.C.remove_db(db)
    if way == "today":
        store: SqliteStore = env.store()
    else:
        sketch = _StepLog(db)
        sketch.on_loop = way == "one row, on the loop"
        await sketch.list_runs(limit=1)  # creates the tables
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("CREATE TABLE steplog (run_id TEXT, seq INTEGER, doc BLOB,"
                         " PRIMARY KEY (run_id, seq)) WITHOUT ROWID")  # fmt: skip
            conn.commit()
        store = sketch
    await store.list_runs(limit=1)
    fake = L.FakeLoop(N, "echo")
    with L.C.Timer() as t:
        result = await Runtime(store).run(env.agent(fake, None), run_id="r", input=L.RUN_INPUT)
    await store.close()
    L.expect(result, "completed", L.C.final_text(N))
    if isinstance(store, _StepLog):
        with contextlib.closing(sqlite3.connect(db)) as conn:
            (rows,) = conn.execute("SELECT count(*) FROM steplog").fetchone()
        _wrote_every_step(rows, store._docs.seq)
    return t.cpu / N * 1e3, t.s / N * 1e3


def _wrote_every_step(rows: int, steps: int) -> None:
    """A sketch whose fence refused a step would have measured less than the work."""
    if rows != steps:
        raise SystemExit(f"bounds.py: the sketch wrote {rows} rows for {steps} steps")


def _floor_once(
    peers_python: str, mode: str, db: str | None, extra: list[str] | None = None
) -> tuple[float, float] | None:
    """The harness's floor, one run in the peers' environment (``None``: not available)."""
    script = L._peers_dir() / "baseline_loop.py"
    if not Path(peers_python).exists() or not script.exists():
        return None
    where = (["--db", db] if db else []) + (extra or [])
    out = subprocess.run(
        [peers_python, str(script), str(N), mode, *where],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return float(rec["per_iter_cpu_ms"]), float(rec["per_iter_ms"])


def part_sqlite(reps: int, peers_python: str) -> None:
    ways = ["today", "one row, thread", "one row, on the loop"]
    rows: dict[str, list[tuple[float, float]]] = {w: [] for w in [*ways, "floor"]}
    with tempfile.TemporaryDirectory(prefix="steadyrun-bounds-") as tmp:
        env = _env(str(Path(tmp) / "loop.db"))

        async def runs() -> None:
            await L.warmup(env)
            for _ in range(reps):
                for way in ways:
                    rows[way].append(await _sqlite_once(env, way))
                floor = _floor_once(peers_python, "sqlite", str(Path(tmp) / "floor.db"))
                if floor is not None:
                    rows["floor"].append(floor)

        asyncio.run(runs())
    _table(f"sqlite: the harness's loop, N={N}, median of {reps} (ms per iteration)", rows)


async def _pg_once(env: L.Env, dsn: str, way: str) -> tuple[float, float]:
    """One run of N iterations on a new schema: (client CPU ms, wall ms) per iteration."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute(f"DROP SCHEMA IF EXISTS {_PG_SCHEMA} CASCADE")
    store: PostgresStore = (
        PostgresStore(dsn, schema=_PG_SCHEMA) if way == "today" else _PgStepLog(dsn)
    )
    await store.list_runs(limit=1)  # opens the pool and creates the tables
    if way != "today":
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
            await admin.execute(
                f"CREATE TABLE {_PG_SCHEMA}.steplog (run_id TEXT, seq BIGINT, doc BYTEA,"
                " PRIMARY KEY (run_id, seq))"
            )
    with L.C.Timer() as t:
        result = await Runtime(store).run(
            env.agent(L.FakeLoop(N, "echo"), None), run_id="r", input=L.RUN_INPUT
        )
    await store.close()
    L.expect(result, "completed", L.C.final_text(N))
    if isinstance(store, _PgStepLog):
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cur = await conn.execute(f"SELECT count(*) FROM {_PG_SCHEMA}.steplog")
            (rows,) = await cur.fetchone() or (0,)
        _wrote_every_step(rows, store._docs.seq)
    return t.cpu / N * 1e3, t.s / N * 1e3


def part_postgres(reps: int, peers_python: str, admin_dsn: str) -> None:
    ways = ["today", "one row"]
    rows: dict[str, list[tuple[float, float]]] = {w: [] for w in [*ways, "floor"]}
    env = _env("unused.db")
    with fresh_database(admin_dsn, "steadyrun_bounds", " or leave out --parts postgres") as dsn:

        async def runs() -> None:
            await L.warmup(env)
            for _ in range(reps):
                for way in ways:
                    rows[way].append(await _pg_once(env, dsn, way))

        asyncio.run(runs())
        for _ in range(reps):
            floor = _floor_once(peers_python, "postgres", None, ["--dsn", dsn])
            if floor is not None:
                rows["floor"].append(floor)
    _table(
        f"postgres: the harness's loop, N={N}, median of {reps} (ms per iteration; CPU is"
        " the client's)",
        rows,
    )


def _trip(pin: bool, count: int) -> tuple[float, float]:
    """(wall us, CPU us) per round trip to a thread waiting on a queue, answered on a lock."""
    jobs: queue.SimpleQueue[int] = queue.SimpleQueue()
    done = threading.Lock()
    done.acquire()
    every = os.sched_getaffinity(0)
    getcpu: Callable[[], int] = ctypes.CDLL(None).sched_getcpu
    tid: list[int] = []
    started = threading.Event()

    def work() -> None:
        tid.append(threading.get_native_id())
        started.set()
        while jobs.get():
            if pin:
                os.sched_setaffinity(0, every)  # the body runs free again
            done.release()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    started.wait()

    def one() -> None:
        if pin:
            os.sched_setaffinity(tid[0], {getcpu()})  # woken where the caller runs
        jobs.put(1)
        done.acquire()

    for _ in range(200):
        one()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(count):
        one()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    jobs.put(0)
    thread.join()
    return wall / count * 1e6, cpu / count * 1e6


def part_trip(reps: int) -> None:
    if not hasattr(os, "sched_setaffinity"):
        print("\ntrip: needs Linux (sched_setaffinity)")
        return
    got: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(reps):
        for pin in (False, True):
            got[pin].append(_trip(pin, 5000))
    print(f"\ntrip: one round trip to a waiting thread, median of {reps} x 5,000 (us)")
    for pin, label in ((False, "plain"), (True, "woken on the caller's CPU")):
        wall = statistics.median(w for w, _ in got[pin])
        cpu = statistics.median(c for _, c in got[pin])
        print(f"{label:<26} wall {wall:7.1f}  CPU {cpu:7.1f}")


def part_decode(reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="steadyrun-bounds-") as tmp:
        db = str(Path(tmp) / "paused.db")
        env = _env(db)

        async def paused() -> list[bytes]:
            await L.warmup(env)
            store = env.store()
            result = await Runtime(store).run(
                env.agent(L.FakeLoop(N, "echo"), N // 2), run_id="p", input=L.RUN_INPUT
            )
            L.expect(result, "suspended")
            await store.close()
            with contextlib.closing(sqlite3.connect(db)) as conn:
                rows = conn.execute("SELECT message FROM context ORDER BY idx").fetchall()
            return [bytes(m) for (m,) in rows]

        raws = asyncio.run(paused())
    parse = msgspec.json.Decoder().decode
    ways: dict[str, Callable[[], object]] = {
        "codec (pydantic-core, to Message)": lambda: decode_all(raws, Message),
        "msgspec, to dicts": lambda: [parse(r) for r in raws],
    }
    print(f"\ndecode: the context at N//2 ({len(raws)} messages), median of {reps} x 50 (ms)")
    for label, fn in ways.items():
        fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(50):
                fn()
            times.append((time.perf_counter() - t0) / 50 * 1e3)
        print(f"{label:<36} {statistics.median(times):7.3f}")


def part_commit(reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="steadyrun-bounds-") as tmp:
        conn = sqlite3.connect(Path(tmp) / "c.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
        row, times = b"x" * 1024, []
        for r in range(reps):
            t0 = time.perf_counter()
            for i in range(200):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t VALUES (?, ?)", (r * 1000 + i, row))
                conn.execute("COMMIT")
            times.append((time.perf_counter() - t0) / 200 * 1e3)
        conn.close()
    print(f"\ncommit: one synced commit of a 1 KB row, median of {reps} x 200 (ms, wall)")
    one = statistics.median(times)
    print(f"{'one':<8} {one:7.3f}\n{'three':<8} {3 * one:7.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--peers-python", default="/tmp/peers-venv/bin/python")
    p.add_argument(
        "--admin-dsn",
        default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
        help="a server where a scratch database is created for the postgres part, and dropped",
    )
    args = p.parse_args()
    if args.reps < 1:
        p.error("--reps must be at least 1")
    print(f"bounds: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if "memory" in args.parts:
        part_memory(args.reps, args.peers_python)
    if "sqlite" in args.parts:
        part_sqlite(args.reps, args.peers_python)
    if "postgres" in args.parts:
        part_postgres(args.reps, args.peers_python, args.admin_dsn)
    if "trip" in args.parts:
        part_trip(args.reps)
    if "decode" in args.parts:
        part_decode(args.reps)
    if "commit" in args.parts:
        part_commit(args.reps)


if __name__ == "__main__":
    main()
