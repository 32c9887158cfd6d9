#!/usr/bin/env python3
"""steadyrun under the peer-harness contract: runtime overhead of a durable agent loop.

    .venv/bin/python benchmarks/peers/steadyrun_loop.py N MODE [--tool echo|add] [--count K]
                     [--resume-samples S] [--sqlite-sync FULL|NORMAL|OFF]
                     [--async-tool | --inline-tool] [--loop asyncio|uvloop]

Prints ONE JSON line (contract: ``../shared/peers/README.md``), so ``run_all.sh`` runs it
interleaved with LangGraph, PydanticAI and the plain baseline (``EXTRA_SCRIPTS``). The workload,
the argument parser and the measurements come from the harness's ``_common.py``; it is found in
``$PEERS_DIR`` or in ``shared/peers`` beside the repository.

How steadyrun is driven:

* The model is steadyrun's ``FunctionModel`` (a test double): its answer is a pure function of
  the request, as in the peers. Call *k* (``k`` = the number of ``tool`` messages in the request,
  each with the one result of its batch, counted over the whole history as the peers do) asks for
  ``call_<k>``; after N results it answers ``"done after N tool calls"``. The double keeps every
  request in ``.requests``; the fake empties that list on each call, because the peers' fakes
  keep nothing.
* The tool is a plain ``def`` (the runtime runs it in a worker thread), as in the peers'
  default runs; ``--async-tool`` makes it ``async def``; ``--inline-tool`` keeps the plain
  ``def`` and declares it ``@tool(inline=True)`` (a user's choice for a body that never
  blocks: it runs on the event loop, no thread hand-off). ``Limits(max_iterations=N+5)``.
* ``memory`` uses ``MemoryStore``. It is not "no persistence": it encodes every step and call
  record with the same codec as the durable stores. steadyrun has no store-less mode.
* ``sqlite`` uses ``SqliteStore`` with the same ``synchronous`` as the peers: ``--sqlite-sync``
  when given, otherwise the SQLite library's default on a WAL connection (what the peers get by
  not setting it; FULL on the reference machine, which is also ``SqliteStore``'s default). The
  value used is reported as ``sqlite_synchronous`` and in ``variant``.
* ``resume`` and ``suspended`` pause the call of step N//2 with steadyrun's own
  human-in-the-loop: a ``Confirm`` policy on the tool. The run suspends after its batch. The
  resume is a NEW ``SqliteStore`` + a newly built agent + a new ``Runtime``, then
  ``decide(run_id, call_id, approve=True)`` and ``resume(run_id)``. ``load_state_s`` is
  ``store.load`` (like LangGraph's ``get_state``); ``resume_s`` covers the decision write and
  the resume to the end (the peers pass the approval inside their resume call).
  ``open_and_compile_s`` includes opening the connection (``SqliteStore`` opens lazily, so one
  ``list_runs(limit=1)`` forces it).
* ``postgres`` is the ``sqlite`` run on a ``PostgresStore`` (the ``postgres`` extra: psycopg and
  psycopg-pool) in the harness's database (``--dsn``): ``_common.PgSchema`` creates the schema
  ``peers_steadyrun_<pid>`` (and the database if missing), the store keeps its tables there
  (``schema=``) and the schema is dropped at exit unless ``--keep-db``. The store's defaults
  are kept (a pool of 1 to 10 connections; a loop step is one statement, a call of the schema's
  ``save_loop_step`` function: one round trip and one commit); no server setting is changed. The
  pool is opened before the timer (``list_runs(limit=1)``), as the peers connect before theirs.
  ``server_cpu_s`` sums the CPU of every server backend of the store's connections (they carry
  ``application_name=peers_steadyrun_<pid>``); the other postgres fields are the harness's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _peers_dir() -> Path:
    env = os.environ.get("PEERS_DIR")
    if env:
        return Path(env).resolve()
    # benchmarks/peers/steadyrun_loop.py -> repository -> its parent -> shared/peers
    return Path(__file__).resolve().parents[2].parent / "shared" / "peers"


PEERS_DIR = _peers_dir()
if not (PEERS_DIR / "_common.py").is_file():
    sys.exit(f"steadyrun_loop.py: no _common.py in {PEERS_DIR} (set PEERS_DIR)")
sys.path.insert(0, str(PEERS_DIR))
import _common as C  # noqa: E402

_T_IMPORT = time.perf_counter()
import steadyrun  # noqa: E402
from steadyrun import (  # noqa: E402
    Agent,
    Limits,
    MemoryStore,
    ModelRequest,
    ModelResponse,
    PostgresStore,
    Runtime,
    SqliteStore,
)
from steadyrun.control import CallView, Confirm  # noqa: E402
from steadyrun.testing import FunctionModel, call, text, tool_calls  # noqa: E402

IMPORT_S = time.perf_counter() - _T_IMPORT  # framework import time (cold-start context)

FRAMEWORK = "steadyrun"
RUN_INPUT = "Run the tool loop."
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


# -- the workload ------------------------------------------------------------------------------


class FakeLoop:
    """The model: one tool call per model call until N tool results exist."""

    def __init__(self, n: int, tool: str) -> None:
        self.n, self.tool = n, tool
        self.call_times: list[float] = []
        self.model = FunctionModel(self._respond, name="peer-workload")

    def _respond(self, request: ModelRequest) -> ModelResponse:
        self.call_times.append(time.perf_counter())
        self.model.requests.clear()  # the peers' fakes keep no requests
        # Tool messages counted as the floor (``baseline_loop.py``) and LangGraph's script
        # count theirs: each holds the one result of its batch in this workload. Counting
        # the parts inside them walked twice the objects per model call (0.03-0.05 ms an
        # iteration at N=400, of the model's work, not the framework's).
        step = sum(1 for m in request.messages if m.role == "tool")
        if step < self.n:
            args = C.tool_args(self.tool, step)
            return tool_calls(call(self.tool, args, id=f"call_{step}"))
        return text(C.final_text(step))


def _step_of(tool: str, arguments: dict[str, Any]) -> int:
    if tool == "add":
        return C.step_from_add(arguments["a"])
    return C.step_from_echo(arguments["text"])


def make_tool(
    tool: str, pause_at: int | None, async_tool: bool, inline: bool = False
) -> steadyrun.Tool:
    """The workload's tool; the call of step ``pause_at`` waits for a person's approval."""

    def policy(view: CallView) -> Confirm | None:
        if _step_of(tool, view.arguments) == pause_at:
            return Confirm(prompt=f"run step {pause_at}?")
        return None

    traits: dict[str, Any] = {"policy": policy if pause_at is not None else None}
    if inline:
        traits["inline"] = True
    if tool == "add":
        if async_tool:

            async def add(a: int, b: int) -> int:
                """Add two integers.

                Args:
                    a: First.
                    b: Second.
                """
                return a + b
        else:

            def add(a: int, b: int) -> int:
                """Add two integers.

                Args:
                    a: First.
                    b: Second.
                """
                return a + b

        return steadyrun.tool(add, **traits)
    if async_tool:

        async def echo(text: str) -> str:
            """Return the text unchanged.

            Args:
                text: What to return.
            """
            return text
    else:

        def echo(text: str) -> str:
            """Return the text unchanged.

            Args:
                text: What to return.
            """
            return text

    return steadyrun.tool(echo, **traits)


def build_agent(
    fake: FakeLoop, pause_at: int | None, async_tool: bool, inline: bool = False
) -> Agent:
    return Agent(
        name="loop",
        model=fake.model,
        tools=[make_tool(fake.tool, pause_at, async_tool, inline)],
        limits=Limits(max_iterations=fake.n + 5),
    )


# -- SQLite ------------------------------------------------------------------------------------


def library_default_sync() -> str:
    """``synchronous`` of a fresh WAL connection that sets nothing: what the peers run with."""
    d = os.environ.get("PEERS_TMP", tempfile.gettempdir())
    path = os.path.join(d, f"peers-steadyrun-probe-{os.getpid()}.sqlite")
    try:
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            value = conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            conn.close()
    finally:
        C.remove_db(path)
    return SYNC_NAMES.get(value, "FULL")


PAYLOAD = (
    # (table, its encoded payload columns): what the store keeps, in both databases
    ("runs", ("record", "checkpoint")),
    ("context", ("message",)),
    ("calls", ("record",)),
    ("blocks", ("block",)),
    ("feed", ("message",)),
    ("step_history", ("entry",)),
    ("context_segments", ("message",)),
)


def sqlite_stats(path: str) -> dict[str, int]:
    """Rows and payload bytes the store keeps (the tables of ``PAYLOAD`` that exist)."""
    conn = sqlite3.connect(path)
    try:
        rows = payload = 0
        for table, cols in PAYLOAD:
            size = " + ".join(f"length({c})" for c in cols)
            try:
                q = f"SELECT count(*), coalesce(sum({size}), 0) FROM {table}"
                r = conn.execute(q).fetchone()
            except sqlite3.OperationalError:
                continue  # a table (or column) of another schema version
            rows += r[0]
            payload += r[1]
    finally:
        conn.close()
    return {"checkpoint_rows": rows, "checkpoint_payload_bytes": payload}


def postgres_stats(pg: Any) -> dict[str, int]:
    """``sqlite_stats`` for the schema of a ``_common.PgSchema`` (uncompressed bytes)."""
    import psycopg

    sql = pg._sql
    rows = payload = 0
    for table, cols in PAYLOAD:
        size = sql.SQL(" + ").join(
            sql.SQL("octet_length({})").format(sql.Identifier(c)) for c in cols
        )
        q = sql.SQL("SELECT count(*), coalesce(sum({}), 0)::bigint FROM {}").format(
            size, pg.table(table)
        )
        try:
            r = pg.admin.execute(q).fetchone()
        except psycopg.errors.UndefinedTable:
            continue
        except psycopg.errors.UndefinedColumn:
            continue
        rows += r[0]
        payload += r[1]
    return {"checkpoint_rows": rows, "checkpoint_payload_bytes": payload}


class Env:
    """What every mode needs: the options, the synchronous setting, the expected answer."""

    def __init__(self, args: argparse.Namespace, sync: str) -> None:
        self.args = args
        self.n: int = args.n
        self.tool: str = args.tool
        self.sync = sync
        self.async_tool: bool = args.async_tool
        self.inline_tool: bool = args.inline_tool

    def store(self) -> SqliteStore:
        return SqliteStore(self.args.db, synchronous=self.sync)  # type: ignore[arg-type]

    def agent(self, fake: FakeLoop, pause_at: int | None) -> Agent:
        return build_agent(fake, pause_at, self.async_tool, self.inline_tool)


def expect(result: steadyrun.RunResult, status: str, text_: str | None = None) -> None:
    if result.status != status or (text_ is not None and result.text != text_):
        raise SystemExit(
            f"steadyrun_loop.py: run {result.run_id} ended {result.status!r} with "
            f"{result.text!r} (error {result.error!r}); expected {status!r} {text_!r}"
        )


async def approve_pending(runtime: Runtime, run_id: str, snap: Any) -> str:
    """Approve the call the suspended run waits for (found in its loaded snapshot's open batch,
    as an approval screen finds it: ``batch_calls`` decodes those calls alone)."""
    waiting = [c for c in snap.batch_calls() if c.status == "awaiting_decision"]
    if len(waiting) != 1:
        raise SystemExit(f"steadyrun_loop.py: run {run_id} waits for {len(waiting)} decisions")
    await runtime.decide(run_id, waiting[0].id, approve=True)
    return waiting[0].id


# -- modes -------------------------------------------------------------------------------------


async def warmup(env: Env) -> None:
    """Tiny untimed run on a MemoryStore, with a pause and a resume, so one-time costs (type
    adapters of the codec, in both directions) are excluded, like the peers' warm-up."""
    if env.args.no_warmup:
        return
    fake = FakeLoop(3, env.tool)
    store = MemoryStore()
    rt = Runtime(store)
    agent = env.agent(fake, 1)
    expect(await rt.run(agent, run_id="warmup", input=RUN_INPUT), "suspended")
    await approve_pending(rt, "warmup", await store.load("warmup"))
    expect(await rt.resume("warmup"), "completed", C.final_text(3))


def backends_cpu(pg: Any, app: str) -> dict[int, float]:
    """CPU seconds so far of each server backend whose ``application_name`` is ``app``."""
    pids = pg.admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)
    ).fetchall()
    out = {}
    for (pid,) in pids:
        cpu = C._proc_cpu_s(pid)
        if cpu is not None:
            out[pid] = cpu
    return out


async def mode_run(env: Env, rec: dict[str, Any], pg: Any = None) -> None:
    """memory / sqlite / postgres: one full run of N iterations, timed."""
    fake = FakeLoop(env.n, env.tool)
    agent = env.agent(fake, None)
    mode = env.args.mode
    app = f"peers_steadyrun_{os.getpid()}"
    if mode == "sqlite":
        C.remove_db(env.args.db)
        store: Any = env.store()
    elif mode == "postgres":
        from psycopg import conninfo

        store = PostgresStore(
            conninfo.make_conninfo(pg.dsn, application_name=app), schema=pg.schema
        )
        await store.list_runs(limit=1)  # open the pool and create the tables before the timer
        mark, cpu0 = pg.mark(), backends_cpu(pg, app)
    else:
        store = MemoryStore()
    runtime = Runtime(store)
    rec["rss_before_mb"] = C.current_rss_mb()
    w0 = C.io_wchar()
    with C.Timer() as tm:
        result = await runtime.run(agent, run_id="run-main", input=RUN_INPUT)
    if isinstance(store, PostgresStore):
        # every backend the run used, those the pool opened during the run counted from zero
        cpu1 = backends_cpu(pg, app)
        server_cpu = sum(c - cpu0.get(pid, 0.0) for pid, c in cpu1.items()) if cpu1 else None
        await store.close()
    if isinstance(store, SqliteStore):
        await store.close()  # closing the last connection folds the WAL into the main file
    rec["io_wchar_bytes"] = C.io_wchar() - w0
    expect(result, "completed", C.final_text(env.n))
    if len(result.calls) != env.n or len(fake.call_times) != env.n + 1:
        raise SystemExit(
            f"steadyrun_loop.py: {len(result.calls)} calls and {len(fake.call_times)} model "
            f"calls; expected {env.n} and {env.n + 1}"
        )
    rec.update(
        {
            "model_calls": len(fake.call_times),
            "wall_s": tm.s,
            "per_iter_ms": tm.s / env.n * 1e3,
            "cpu_s": tm.cpu,
            "per_iter_cpu_ms": tm.cpu / env.n * 1e3,
            "tail_after_last_model_call_s": tm.t0 + tm.s - fake.call_times[-1],
            "steps_saved": len(store.step_bytes),
            "encoded_bytes_written": store.bytes_written,
            # a step holds only what changed: the last save is small whatever N is
            "last_checkpoint_bytes": store.step_bytes[-1] if store.step_bytes else 0,
        }
    )
    rec.update(C.step_latency_fields(fake.call_times))
    if mode == "sqlite":
        rec["db_bytes"] = C.db_bytes(env.args.db)
        rec.update(sqlite_stats(env.args.db))
    elif mode == "postgres":
        rec["pool_backends"] = len(cpu1)
        rec.update(
            C.pg_run_fields(pg, mark, env.n, 0.0 if server_cpu is not None else None, server_cpu)
        )
        rec.update(postgres_stats(pg))


async def mode_resume(env: Env, rec: dict[str, Any]) -> None:
    """Pause at step N//2, close the store, resume from a new store + agent + runtime."""
    pause = env.n // 2
    run_id = "run-resume"
    C.remove_db(env.args.db)

    store = env.store()
    runtime = Runtime(store)
    with C.Timer() as t1:
        result = await runtime.run(
            env.agent(FakeLoop(env.n, env.tool), pause), run_id=run_id, input=RUN_INPUT
        )
    expect(result, "suspended")
    await store.close()
    rec.update(
        {
            "first_half_s": t1.s,
            "first_half_per_iter_ms": t1.s / max(1, pause) * 1e3,
            "db_bytes_at_pause": C.db_bytes(env.args.db),
        }
    )

    # A restarted worker: new connection, newly built agent, new runtime.
    fake2 = FakeLoop(env.n, env.tool)
    with C.Timer() as t_open:
        store = env.store()
        runtime = Runtime(store, agents=[env.agent(fake2, pause)])
        await store.list_runs(limit=1)  # SqliteStore connects lazily: open it here
    with C.Timer() as t_load:
        snap = await store.load(run_id)
    with C.Timer() as tr:
        with C.Timer() as t_decide:
            await approve_pending(runtime, run_id, snap)
        result = await runtime.resume(run_id)
    await store.close()
    expect(result, "completed", C.final_text(env.n))
    rec.update(
        {
            "pause_at": pause,
            "open_and_compile_s": t_open.s,
            "load_state_s": t_load.s,
            "decide_s": t_decide.s,
            "resume_to_first_model_call_s": fake2.call_times[0] - tr.t0,
            "resume_s": tr.s,
            "resume_per_iter_ms": tr.s / (env.n - pause) * 1e3,
            "resume_cpu_s": tr.cpu,
            "db_bytes": C.db_bytes(env.args.db),
        }
    )
    rec.update(sqlite_stats(env.args.db))


async def mode_suspended(env: Env, rec: dict[str, Any]) -> None:
    """K runs paused at N//2 and held only in SQLite; resume a few from a new store."""
    pause, k = env.n // 2, env.args.count
    C.remove_db(env.args.db)
    store = env.store()
    runtime = Runtime(store)
    agent = env.agent(FakeLoop(env.n, env.tool), pause)
    rss0 = C.current_rss_mb()
    with C.Timer() as tm:
        for i in range(k):
            expect(await runtime.run(agent, run_id=f"run-{i}", input=RUN_INPUT), "suspended")
    rss1 = C.current_rss_mb()
    await store.close()
    size = C.db_bytes(env.args.db)
    rec.update(
        {
            "count": k,
            "pause_at": pause,
            "suspend_all_s": tm.s,
            "suspend_per_run_ms": tm.s / k * 1e3,
            "db_bytes": size,
            "db_bytes_per_run": size / k,
            "rss_growth_mb": rss1 - rss0,
        }
    )
    store = env.store()
    runtime = Runtime(store, agents=[env.agent(FakeLoop(env.n, env.tool), pause)])
    samples = env.args.resume_samples
    picks = sorted({int(j * (k - 1) / max(1, samples - 1)) for j in range(samples)})
    loads, resumes = [], []
    for i in picks:
        run_id = f"run-{i}"
        with C.Timer() as tl:
            snap = await store.load(run_id)
        with C.Timer() as tr:
            await approve_pending(runtime, run_id, snap)
            result = await runtime.resume(run_id)
        expect(result, "completed", C.final_text(env.n))
        loads.append(tl.s)
        resumes.append(tr.s)
    await store.close()
    rec.update(
        {
            "resume_samples": len(picks),
            "load_state_one_s": C.median(loads),
            "resume_one_s": C.median(resumes),
        }
    )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    sync = args.sqlite_sync or library_default_sync()
    if sync not in ("FULL", "NORMAL", "OFF"):
        sync = "FULL"  # EXTRA is not offered by SqliteStore; FULL is the closest
    env = Env(args, sync)
    rec = C.base_record(FRAMEWORK, steadyrun.__version__, args)
    on_sqlite = args.mode not in ("memory", "postgres")
    store_kind = {"memory": "MemoryStore", "postgres": "PostgresStore"}.get(
        args.mode, f"SqliteStore/synchronous={sync}"
    )
    origin = "" if not on_sqlite else ("(set)" if args.sqlite_sync else "(as peers)")
    tool_kind = (
        "async-tool" if args.async_tool else "inline-tool" if args.inline_tool else "sync-tool"
    )
    rec["variant"] = f"{tool_kind}/{store_kind}{origin}" + (
        "/uvloop" if args.loop == "uvloop" else ""
    )
    if on_sqlite:
        rec["sqlite_synchronous"] = sync
    rec["import_s"] = IMPORT_S
    await warmup(env)
    rec["rss_after_warmup_mb"] = C.peak_rss_mb()
    if args.mode == "postgres":
        pg = C.PgSchema(args.dsn, "steadyrun", keep=args.keep_db)
        try:
            rec.update(pg.server_fields())
            await mode_run(env, rec, pg)
        finally:
            pg.drop()
    elif args.mode in ("memory", "sqlite"):
        await mode_run(env, rec)
    elif args.mode == "resume":
        await mode_resume(env, rec)
    else:
        await mode_suspended(env, rec)
    rec["peak_rss_mb"] = C.peak_rss_mb()
    return rec


def main() -> None:
    p = C.make_parser("steadyrun_loop.py", extra_modes=C.POSTGRES_MODES)
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--async-tool",
        action="store_true",
        help="an async def tool (default: a plain def, run in a worker thread, as the peers)",
    )
    kind.add_argument(
        "--inline-tool",
        action="store_true",
        help="the plain def declared @tool(inline=True): run on the event loop, no thread",
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the event loop (default asyncio's, as the peers' async variants; uvloop: a "
        "user's choice, reported in variant)",
    )
    args = p.parse_args()
    if args.n < 2 and args.mode in ("resume", "suspended"):
        p.error("resume and suspended need N >= 2 (the pause is at step N//2)")
    if args.db is None:
        args.db = C.default_db_path("steadyrun")
    try:
        factory = None
        if args.loop == "uvloop":
            import uvloop

            factory = uvloop.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            rec = runner.run(main_async(args))
    finally:
        if not args.keep_db:
            C.remove_db(args.db)
    C.emit(rec)


if __name__ == "__main__":
    main()
