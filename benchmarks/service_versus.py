#!/usr/bin/env python3
"""``benchmarks/service.py`` on two versions of the library, interleaved: issue 20's 3x.

    .venv/bin/python benchmarks/service_versus.py            # c017a56 against this tree, 6 reps
    .venv/bin/python benchmarks/service_versus.py --base ca94971 --reps 4 --runs 500
    .venv/bin/python benchmarks/service_versus.py --json     # one JSON line

Issue 20's service target is "at least 3x today's runs/s at 50 in flight, same machine, same
run", where *today* is main when the issue was filed: ``c017a56`` (2026-12-01 17:29 UTC, the
commit before the issue's first change), the default ``--base``. The base commit's ``src`` is
exported with ``git archive`` into a temporary directory; then this checkout's
``benchmarks/service.py`` runs ``--reps`` times against each library in turn (base first in
each rep), the library chosen by ``PYTHONPATH``, so both sides see the same script, the same
workload and the same moments of the machine. Each service run is a process of its own (its
client in a second one, ``service.py``'s default).

It prints each rep, the medians of runs/s and of the server's CPU a run, the ratio of the
medians and the ratio of each pair. Figures only: nothing is asserted, and a service run that
fails stops the script with its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "benchmarks" / "service.py"
ISSUE_FILED = "c017a56"
"""Main when issue 20 was filed (its "today")."""


def export_src(commit: str, into: Path) -> Path:
    """``commit``'s ``src`` directory, written under ``into``; returns that ``src``."""
    archive = into / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into / "src"


def one_run(src: Path, service_args: list[str]) -> dict[str, Any]:
    """One ``service.py --json`` on the library in ``src``: its figures."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, str(SERVICE), "--json", *service_args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"service.py on {src} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def _load() -> float:
    return os.getloadavg()[0]


def compare(base: Path, head: Path, reps: int, service_args: list[str]) -> dict[str, Any]:
    """``reps`` pairs of runs (base, then this tree) and what they add up to."""
    pairs: list[dict[str, Any]] = []
    for rep in range(1, reps + 1):
        load = _load()
        old, new = one_run(base, service_args), one_run(head, service_args)
        pairs.append(
            {
                "rep": rep,
                "at": time.strftime("%H:%M:%S"),
                "load": round(load, 2),
                "base_runs_per_s": old["runs_per_s"],
                "head_runs_per_s": new["runs_per_s"],
                "base_cpu_ms_per_run": old["cpu_ms_per_run"],
                "head_cpu_ms_per_run": new["cpu_ms_per_run"],
                "ratio": round(new["runs_per_s"] / old["runs_per_s"], 3),
            }
        )
    base_rps = statistics.median(p["base_runs_per_s"] for p in pairs)
    head_rps = statistics.median(p["head_runs_per_s"] for p in pairs)
    return {
        "pairs": pairs,
        "base_runs_per_s": base_rps,
        "head_runs_per_s": head_rps,
        "base_cpu_ms_per_run": statistics.median(p["base_cpu_ms_per_run"] for p in pairs),
        "head_cpu_ms_per_run": statistics.median(p["head_cpu_ms_per_run"] for p in pairs),
        "ratio_of_medians": round(head_rps / base_rps, 3),
        "load_after": round(_load(), 2),
    }


def table(rec: dict[str, Any], base: str) -> str:
    """The pairs and the summary as markdown."""
    rows = [
        f"| rep | time | load | {base} runs/s | this tree runs/s | {base} CPU ms/run "
        "| this tree CPU ms/run | ratio |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in rec["pairs"]:
        rows.append(
            f"| {p['rep']} | {p['at']} | {p['load']:.2f} | {p['base_runs_per_s']:.1f} "
            f"| {p['head_runs_per_s']:.1f} | {p['base_cpu_ms_per_run']:.2f} "
            f"| {p['head_cpu_ms_per_run']:.2f} | ×{p['ratio']:.2f} |"
        )
    rows.append(
        f"\nmedians: {base} {rec['base_runs_per_s']:.1f} runs/s "
        f"({rec['base_cpu_ms_per_run']:.2f} CPU ms a run), this tree {rec['head_runs_per_s']:.1f} "
        f"runs/s ({rec['head_cpu_ms_per_run']:.2f}): ×{rec['ratio_of_medians']:.2f} "
        f"(issue 20's target: ×3); load average {rec['load_after']:.2f} after"
    )
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", default=ISSUE_FILED, help="the commit to compare with")
    p.add_argument("--reps", type=int, default=6, help="pairs of runs")
    p.add_argument("--runs", type=int, default=1000, help="runs of each service run")
    p.add_argument("--json", action="store_true", help="one JSON line, no table")
    args, service_args = p.parse_known_args()
    if args.reps < 1 or args.runs < 1:
        p.error("--reps and --runs must be at least 1")
    service_args = ["--runs", str(args.runs), *service_args]
    with tempfile.TemporaryDirectory(prefix="steadyrun-versus-") as tmp:
        base = export_src(args.base, Path(tmp))
        rec = compare(base, ROOT / "src", args.reps, service_args)
    rec["base"] = args.base
    if args.json:
        print(json.dumps(rec))
        return
    print(
        f"benchmarks/service.py ({' '.join(service_args)}), {args.reps} pairs: "
        f"the library of {args.base} against this tree's src"
    )
    print(table(rec, args.base))


if __name__ == "__main__":
    main()
