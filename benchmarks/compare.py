#!/usr/bin/env python3
"""steadyrun side by side with LangGraph, PydanticAI and a plain-Python floor: one table.

    .venv/bin/python benchmarks/compare.py            # full run: REPS=3, N = 10 100 400, 1,000
                                                      # suspended runs; ~25-35 min on 2 cores
    .venv/bin/python benchmarks/compare.py --quick    # smoke test: REPS=1, N = 10 100, 50 runs
    .venv/bin/python benchmarks/compare.py --from-raw OUT/raw.jsonl   # re-print a past run
    .venv/bin/python benchmarks/compare.py --postgres  # the reference modes and PostgreSQL
    .venv/bin/python benchmarks/compare.py --modes postgres --ns 10 100 400   # PostgreSQL only

It runs the peer harness (``shared/peers/run_all.sh`` beside the repository, or ``$PEERS_DIR``)
with ``benchmarks/peers/steadyrun_loop.py`` as an extra framework. ``run_all.sh`` interleaves the
frameworks inside each repetition, so all of them see the same background load. The peers run
in their own virtual environment (``--peers-python``, default ``/tmp/peers-venv/bin/python``),
created from the harness's ``requirements.txt`` when it is missing; they are never dependencies
of steadyrun. steadyrun runs with the interpreter running this script.

``--modes`` picks the harness's jobs (``MODES``; its default leaves ``postgres`` out, so no
database server is needed); ``--postgres`` adds ``postgres`` to them. The PostgreSQL jobs use
the database of ``--pg-dsn`` (``PEERS_PG_DSN``; default the harness's ``peers_bench`` on
127.0.0.1), each process in a schema of its own that it drops at exit. Their commit counts
come from the server's transaction counter, so nothing else should write to that server
meanwhile.

The output is ONE markdown table: the median of each figure per framework over the
repetitions, and the ratios steadyrun / peer of those medians (below 1: steadyrun is faster or
smaller). It goes to stdout and to ``OUT/comparison.md``; the raw JSON lines stay in
``OUT/raw.jsonl`` and the harness's own tables in ``OUT/table.md``. No figure is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "peers" / "steadyrun_loop.py"
DEFAULT_PEERS_PY = "/tmp/peers-venv/bin/python"

Rec = dict[str, Any]


def peers_dir() -> Path:
    env = os.environ.get("PEERS_DIR")
    return Path(env).resolve() if env else REPO.parent / "shared" / "peers"


# -- which record is which framework's reference run -------------------------------------------


def _plain(r: Rec) -> bool:
    return "sqlite_sync" not in r  # the harness default (no --sqlite-sync)


COLUMNS: dict[str, tuple[str, Callable[[Rec], bool]]] = {
    # column -> (framework field, which of its variants)
    "steadyrun": ("steadyrun", lambda r: r.get("variant", "").startswith("sync-tool/")),
    "LangGraph": ("langgraph", lambda r: r.get("variant") == "sync/graph"),
    "PydanticAI": ("pydantic-ai", lambda r: r.get("persist", "snapshot") == "snapshot"),
    "baseline": ("baseline", lambda r: True),
}
PEERS = ("LangGraph", "PydanticAI", "baseline")


def pick(recs: list[Rec], column: str, mode: str, n: int | None) -> list[Rec]:
    framework, ok = COLUMNS[column]
    return [
        r
        for r in recs
        if r.get("framework") == framework
        and r.get("mode") == mode
        and (n is None or r.get("n") == n)
        and _plain(r)
        and ok(r)
    ]


def median_of(rs: list[Rec], key: str) -> float | None:
    xs = [r[key] for r in rs if isinstance(r.get(key), int | float) and not math.isnan(r[key])]
    return statistics.median(xs) if xs else None


# -- the table ---------------------------------------------------------------------------------


class Row:
    """One figure: how to get it from a column's records, and how to print it."""

    def __init__(
        self,
        label: str,
        mode: str,
        n: int | None,
        value: Callable[[list[Rec]], float | None],
        digits: int = 3,
    ) -> None:
        self.label, self.mode, self.n, self.value, self.digits = label, mode, n, value, digits


def field(key: str, scale: float = 1.0) -> Callable[[list[Rec]], float | None]:
    def get(rs: list[Rec]) -> float | None:
        m = median_of(rs, key)
        return None if m is None else m * scale

    return get


def growth(rs: list[Rec]) -> float | None:
    """Step time at the last 10% over the first 10% (ratio of the two medians)."""
    first, last = median_of(rs, "step_ms_first10pct"), median_of(rs, "step_ms_last10pct")
    return last / first if first and last is not None else None


def rows(ns: list[int], suspend_n: int | None, count: int | None) -> list[Row]:
    out: list[Row] = []
    big = ns[-1]
    for mode, what in (("memory", "memory"), ("sqlite", "SQLite")):
        for n in ns:
            out.append(Row(f"{what}: wall ms per iteration, N={n}", mode, n, field("per_iter_ms")))
        for n in ns:
            out.append(
                Row(f"{what}: CPU ms per iteration, N={n}", mode, n, field("per_iter_cpu_ms"))
            )
    for n in ns:
        out.append(
            Row(f"SQLite: MB on disk after the run, N={n}", "sqlite", n, field("db_bytes", 1e-6))
        )
    out.append(
        Row(f"SQLite: MB passed to write(), N={big}", "sqlite", big, field("io_wchar_bytes", 1e-6))
    )
    for mode, what in (("sqlite", "SQLite"), ("memory", "memory")):
        out.append(
            Row(f"{what}: step ms, first 10%, N={big}", mode, big, field("step_ms_first10pct"))
        )
        out.append(
            Row(f"{what}: step ms, last 10%, N={big}", mode, big, field("step_ms_last10pct"))
        )
        out.append(Row(f"{what}: step time last 10% / first 10%, N={big}", mode, big, growth))
    out.append(
        Row(
            f"SQLite: s from the last model call to the end (drain), N={big}",
            "sqlite",
            big,
            field("tail_after_last_model_call_s"),
        )
    )
    out += postgres_rows(ns)
    out += [
        Row(f"resume at N/2: load state ms, N={big}", "resume", big, field("load_state_s", 1e3)),
        Row(
            f"resume at N/2: ms to the first model call, N={big}",
            "resume",
            big,
            field("resume_to_first_model_call_s", 1e3),
        ),
        Row(f"resume at N/2: s to the end, N={big}", "resume", big, field("resume_s")),
        Row(
            f"resume at N/2: ms per iteration, N={big}", "resume", big, field("resume_per_iter_ms")
        ),
    ]
    if suspend_n is not None:
        k = f"{count:,} runs" if count else "K runs"
        s = f"suspended ({k} × N={suspend_n}, paused at {suspend_n // 2})"
        out += [
            Row(
                f"{s}: ms to create and suspend one", "suspended", None, field("suspend_per_run_ms")
            ),
            Row(f"{s}: DB MB", "suspended", None, field("db_bytes", 1e-6)),
            Row(f"{s}: load one ms", "suspended", None, field("load_state_one_s", 1e3)),
            Row(f"{s}: resume one to the end ms", "suspended", None, field("resume_one_s", 1e3)),
        ]
    return out


def postgres_rows(ns: list[int]) -> list[Row]:
    """The ``postgres`` mode: the SQLite figures, plus the server's share and its commits."""
    out: list[Row] = []
    for label, key, scale in (
        ("wall ms per iteration", "per_iter_ms", 1.0),
        ("client CPU ms per iteration", "per_iter_cpu_ms", 1.0),
        ("server CPU ms per iteration", "per_iter_server_cpu_ms", 1.0),
        ("commits per iteration", "write_xacts_per_iter", 1.0),
        ("MB in the database", "db_bytes", 1e-6),
    ):
        for n in ns:
            out.append(Row(f"PostgreSQL: {label}, N={n}", "postgres", n, field(key, scale)))
    big = ns[-1]
    out.append(
        Row(
            f"PostgreSQL: s from the last model call to the end (drain), N={big}",
            "postgres",
            big,
            field("tail_after_last_model_call_s"),
        )
    )
    return out


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "–"
    return f"×{fmt(a / b)}"


def build_table(recs: list[Rec]) -> str:
    modes = ("memory", "sqlite", "resume", "postgres")
    ns = sorted({r["n"] for r in recs if r.get("mode") in modes})
    susp = [r for r in recs if r.get("mode") == "suspended"]
    suspend_n = susp[0]["n"] if susp else None
    count = int(statistics.median(r["count"] for r in susp)) if susp else None
    if not ns:
        return "no results"
    head = ["figure (median)", *COLUMNS, *(f"steadyrun / {p}" for p in PEERS)]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for row in rows(ns, suspend_n, count):
        vals = {c: row.value(pick(recs, c, row.mode, row.n)) for c in COLUMNS}
        if all(v is None for v in vals.values()):
            continue  # a mode (or N) this run left out
        cells = [row.label, *(fmt(vals[c], row.digits) for c in COLUMNS)]
        cells += [ratio(vals["steadyrun"], vals[p]) for p in PEERS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def header(recs: list[Rec]) -> str:
    versions = {}
    for column, (framework, _) in COLUMNS.items():
        vs = sorted({r["version"] for r in recs if r.get("framework") == framework})
        versions[column] = "/".join(vs) if vs else "not run"
    cells = [
        (c, m, n)
        for c in COLUMNS
        for m in ("memory", "sqlite", "postgres")
        for n in {r["n"] for r in recs if r.get("mode") == m}
    ]
    reps = max((len(pick(recs, c, m, n)) for c, m, n in cells), default=0)
    syncs = sorted({r["sqlite_synchronous"] for r in recs if "sqlite_synchronous" in r})
    pythons = sorted({r["python"] for r in recs if "python" in r})
    text = (
        f"steadyrun {versions['steadyrun']}, LangGraph {versions['LangGraph']}, "
        f"PydanticAI {versions['PydanticAI']}; Python {', '.join(pythons)}; tool=echo "
        f"(1 KiB argument); up to {reps} runs per cell, interleaved; medians, and ratios of "
        "the medians (below 1: steadyrun is faster or smaller). "
    )
    if syncs:
        text += (
            f"SQLite in WAL with synchronous={'/'.join(syncs)} for every framework "
            "(the library default; steadyrun's SqliteStore is set to match). "
            "Peers: LangGraph = sync StateGraph + ToolNode with SqliteSaver, default "
            "'async' durability; PydanticAI = Agent.iter with a full-history snapshot row per "
            "step; baseline = plain Python loop with an append-only SQLite log. steadyrun "
            "'memory' is a MemoryStore, which still encodes every step. "
        )
    pg = [r for r in recs if r.get("mode") == "postgres"]
    if pg:
        servers = sorted({r.get("pg_server_version", "?") for r in pg})
        commit = sorted({r.get("pg_synchronous_commit", "?") for r in pg})
        text += (
            f"PostgreSQL {'/'.join(servers)} with synchronous_commit={'/'.join(commit)}: "
            "LangGraph = PostgresSaver (autocommit, default 'async' durability); PydanticAI "
            "= a full-history snapshot row per step; baseline = an append-only log, one "
            "INSERT per step; steadyrun = PostgresStore (its pool; a loop step is one "
            "statement, a call of its save_loop_step function). Commits per "
            "iteration come from the server's transaction counter (server-wide); server CPU "
            "is the CPU of the backends behind each framework's connections."
        )
    return text.rstrip()


def load(path: Path) -> list[Rec]:
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


# -- running the harness -----------------------------------------------------------------------


def sh(cmd: str) -> str:
    try:
        return subprocess.run(
            cmd, shell=True, capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def ensure_peers_venv(python: str, peers: Path, setup: bool) -> None:
    if Path(python).exists():
        return
    if not setup:
        sys.exit(f"compare.py: no peer interpreter at {python} (drop --no-setup to create it)")
    venv = Path(python).parents[1]
    print(f"creating the peers' venv {venv} from {peers / 'requirements.txt'}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [python, "-m", "pip", "install", "-q", "-r", str(peers / "requirements.txt")]
    subprocess.run(pip, check=True)


def run_harness(args: argparse.Namespace, peers: Path, out: Path) -> tuple[int, float]:
    """Run run_all.sh with steadyrun as an extra script; returns (failed jobs, seconds)."""
    env = dict(os.environ)
    env.update(
        {
            "PY": args.peers_python,
            "EXTRA_SCRIPTS": str(SCRIPT),
            "EXTRA_PY": sys.executable,
            "PEERS_DIR": str(peers),
            "REPS": str(args.reps),
            "NS": " ".join(map(str, args.ns)),
            "SUSPEND_COUNT": str(args.suspend_count),
            "OUT": str(out),
        }
    )
    if args.skip_suspended:
        env["SKIP_SUSPENDED"] = "1"
    if args.modes:
        env["MODES"] = " ".join(args.modes)
    if args.pg_dsn:
        env["PEERS_PG_DSN"] = args.pg_dsn
    t0 = time.perf_counter()
    failed = 0
    with subprocess.Popen(
        ["bash", str(peers / "run_all.sh")],
        env=env,
        stdout=subprocess.DEVNULL,  # its tables also go to OUT/table.md
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            failed += line.lstrip().startswith("FAIL")
    return failed, time.perf_counter() - t0


def machine() -> dict[str, str]:
    return {
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu_model(),
        "kernel": platform.release(),
        "python (steadyrun)": platform.python_version(),
        "load": sh("uptime"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="REPS=1, N = 10 100, 50 suspended runs")
    p.add_argument("--reps", type=int, default=3, help="repetitions per cell (default 3)")
    p.add_argument("--ns", type=int, nargs="+", default=[10, 100, 400], help="N values")
    p.add_argument("--suspend-count", type=int, default=1000, help="suspended runs (1000)")
    p.add_argument("--skip-suspended", action="store_true", help="skip the suspended mode")
    p.add_argument(
        "--modes",
        nargs="+",
        default=None,
        help="the harness's MODES (default: its reference set, without postgres)",
    )
    p.add_argument("--postgres", action="store_true", help="add the postgres mode to --modes")
    p.add_argument("--pg-dsn", default=None, help="PEERS_PG_DSN for the postgres mode")
    p.add_argument("--peers-python", default=DEFAULT_PEERS_PY, help="the peers' interpreter")
    p.add_argument("--no-setup", action="store_true", help="never create the peers' venv")
    p.add_argument("--out", type=Path, default=None, help="results folder")
    p.add_argument(
        "--from-raw", type=Path, default=None, help="only print the table of a raw.jsonl"
    )
    args = p.parse_args()
    if args.quick:
        args.reps, args.ns, args.suspend_count = 1, [10, 100], 50
    if args.postgres:
        reference = ["memory", "memsaver", "sqlite", "sqlite_delta", "resume", "suspended"]
        args.modes = [*(args.modes or reference), "postgres"]

    if args.from_raw is not None:
        recs = load(args.from_raw)
        print(header(recs) + "\n")
        print(build_table(recs))
        return

    peers = peers_dir()
    if not (peers / "run_all.sh").is_file():
        sys.exit(f"compare.py: no run_all.sh in {peers} (set PEERS_DIR)")
    ensure_peers_venv(args.peers_python, peers, not args.no_setup)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path(tempfile.gettempdir()) / "peers-results" / f"compare-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

    before = machine()
    failed, seconds = run_harness(args, peers, out)
    after = sh("uptime")
    recs = load(out / "raw.jsonl")
    facts = [
        f"date: {before['date']}",
        f"machine: {before['nproc']} CPUs, {before['cpu']}, Linux {before['kernel']}",
        f"python: steadyrun {before['python (steadyrun)']}; peers "
        + sh(f"{args.peers_python} -c 'import platform; print(platform.python_version())'"),
        f"load before: {before['load']}",
        f"load after:  {after}",
        f"harness wall time: {seconds / 60:.1f} min; failed jobs: {failed}",
        f"command: {' '.join([Path(sys.executable).name, *sys.argv])}",
    ]
    (out / "machine.txt").write_text("\n".join(facts) + "\n")
    table = header(recs) + "\n\n" + build_table(recs)
    (out / "comparison.md").write_text(table + "\n")
    print(table)
    print()
    print("\n".join(facts))
    print(f"raw: {out / 'raw.jsonl'}; the harness's own tables: {out / 'table.md'}")
    if failed:
        print(f"{failed} job(s) failed: see {out / 'errors.log'}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
