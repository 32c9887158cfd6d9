"""Runtime overhead of a steadyrun tool loop: time, CPU and bytes saved per iteration.

No network and no real model: a ``FunctionModel`` answers at once and an ``echo`` tool returns
its argument, so everything measured is the runtime itself (state, checkpoints, the store's
serialisation). The workload is the one of the peer harness (``../shared/peers``), rewritten
here so this script depends on nothing outside the project:

* model call *k* (``k`` = the number of tool results already in the request) asks for exactly
  one tool call, id ``call_<k>``: ``echo{text: 1 KiB string whose first 6 chars are k}``;
* once there are N results it answers ``"done after N tool calls"``, which ends the run.

Usage::

    .venv/bin/python benchmarks/loop_overhead.py                # N = 10 100 400, 3 reps
    .venv/bin/python benchmarks/loop_overhead.py --ns 50 --reps 5 --json

Every repetition runs in a fresh ``MemoryStore`` after one untimed warm-up run. The script
fails loudly when a run does not end with the expected text; it never asserts on timing.
See ``benchmarks/README.md`` for what the columns mean.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import steadyrun
from steadyrun import Agent, Limits, MemoryStore, ModelRequest, ModelResponse, Runtime
from steadyrun.testing import FunctionModel, call, text, tool_calls

ECHO_BYTES = 1024
EARLY_STEP = 10  # indices into store.step_bytes (0-based); both even, i.e. after a batch
LATE_STEP = 400


# -- the workload ------------------------------------------------------------------------------


def echo_text(k: int) -> str:
    """A 1 KiB string whose first 6 characters encode the step number."""
    return f"{k:06d}" + "x" * (ECHO_BYTES - 6)


def final_text(n: int) -> str:
    return f"done after {n} tool calls"


def tool_results_in(request: ModelRequest) -> int:
    """How many tool results the conversation holds (O(history), as in the peer harness).

    A ``tool`` message holds only the results of one batch, so its parts are counted as is.
    """
    return sum(len(m.parts) for m in request.messages if m.role == "tool")


@dataclass
class ModelLog:
    """What the fake model saw: the start of each call, and the time spent inside it."""

    stamps: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the process's CPU time at each start
    inside_s: float = 0.0


def make_model(n: int, log: ModelLog) -> FunctionModel:
    """The scripted model: its answer depends on how many tool results the request holds."""

    def respond(request: ModelRequest) -> ModelResponse:
        t0 = time.perf_counter()
        log.stamps.append(t0)
        log.cpu.append(time.process_time())
        k = tool_results_in(request)
        if k < n:
            out = tool_calls(call("echo", {"text": echo_text(k)}, id=f"call_{k}"))
        else:
            out = text(final_text(k))
        log.inside_s += time.perf_counter() - t0
        return out

    return FunctionModel(respond, name="loop-overhead")


@steadyrun.tool
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: What to return.
    """
    return text


@steadyrun.tool(name="echo")
def echo_sync(text: str) -> str:
    """Return the text unchanged (a sync tool: the runtime runs it in a worker thread).

    Args:
        text: What to return.
    """
    return text


# -- one run -----------------------------------------------------------------------------------


@dataclass
class Sample:
    n: int
    wall_s: float
    cpu_s: float
    step_bytes: list[int]
    bytes_written: int
    model: ModelLog


async def run_once(n: int, *, sync_tool: bool, run_id: str) -> Sample:
    log = ModelLog()
    store = MemoryStore()
    agent = Agent(
        name="loop",
        model=make_model(n, log),
        instructions="Call echo until told otherwise.",
        tools=[echo_sync if sync_tool else echo],
        limits=Limits(max_iterations=n + 5),
    )
    runtime = Runtime(store)
    c0, t0 = time.process_time(), time.perf_counter()
    result = await runtime.run(agent, run_id=run_id, input="Start.")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    expected = final_text(n)
    if result.status != "completed" or result.text != expected:
        raise SystemExit(
            f"FAILED at N={n}: run ended {result.status!r} with text {result.text!r} "
            f"(error: {result.error!r}); expected {expected!r}"
        )
    if len(result.calls) != n or len(log.stamps) != n + 1:
        raise SystemExit(
            f"FAILED at N={n}: {len(result.calls)} call records and {len(log.stamps)} model "
            f"calls; expected {n} and {n + 1}"
        )
    return Sample(n, wall, cpu, list(store.step_bytes), store.bytes_written, log)


# -- figures -----------------------------------------------------------------------------------


def cold_import_s() -> float | None:
    """Seconds to import steadyrun (and its test doubles) in a new interpreter."""
    code = (
        "import time; t = time.perf_counter(); import steadyrun, steadyrun.testing; "
        "print(time.perf_counter() - t)"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        return float(out.stdout.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def late_index(count: int) -> int | None:
    """Step ``LATE_STEP``, or the last step of the same kind before the final one."""
    last = count - 2  # the final step completes the run; it is of neither kind
    if last < EARLY_STEP:
        return None
    idx = min(LATE_STEP, last)
    if (idx - EARLY_STEP) % 2:
        idx -= 1
    return idx


def step_latency(stamps: list[float]) -> dict[str, float]:
    d = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    k = max(1, len(d) // 10)
    return {
        "step_ms_median": statistics.median(d) * 1e3,
        "step_ms_first10pct": statistics.median(d[:k]) * 1e3,
        "step_ms_last10pct": statistics.median(d[-k:]) * 1e3,
        "step_ms_max": max(d) * 1e3,
    }


def summarize(n: int, samples: list[Sample], rss_before_mb: float) -> dict[str, Any]:
    med = statistics.median
    steps = samples[0].step_bytes
    late = late_index(len(steps))
    early_b = steps[EARLY_STEP] if len(steps) > EARLY_STEP else None
    late_b = steps[late] if late is not None else None
    # the other kind of step: saved after a model response (odd indices)
    early_m = steps[EARLY_STEP + 1] if len(steps) > EARLY_STEP + 2 else None
    late_m = steps[late + 1] if late is not None and late + 1 < len(steps) - 1 else None
    bytes_written = samples[0].bytes_written
    lat = [step_latency(s.model.stamps) for s in samples]
    rec: dict[str, Any] = {
        "framework": "steadyrun",
        "version": steadyrun.__version__,
        "python": platform.python_version(),
        "mode": "memory",
        "n": n,
        "tool": "echo",
        "reps": len(samples),
        "wall_s": med(s.wall_s for s in samples),
        "per_iter_ms": med(s.wall_s / n for s in samples) * 1e3,
        "cpu_s": med(s.cpu_s for s in samples),
        "per_iter_cpu_ms": med(s.cpu_s / n for s in samples) * 1e3,
        "fake_model_ms_per_iter": med(s.model.inside_s / n for s in samples) * 1e3,
        "steps_saved": len(steps),
        "step_bytes_early_idx": EARLY_STEP if early_b is not None else None,
        "step_bytes_early": early_b,
        "step_bytes_late_idx": late,
        "step_bytes_late": late_b,
        "step_bytes_late_over_early": late_b / early_b if early_b and late_b else None,
        "model_step_bytes_early": early_m,
        "model_step_bytes_late": late_m,
        "step_bytes_total": sum(steps),
        "bytes_written": bytes_written,
        "bytes_written_per_iter": bytes_written / n,
        "other_bytes_per_iter": (bytes_written - sum(steps)) / n,
        **{key: med(x[key] for x in lat) for key in lat[0]},
        "rss_before_mb": rss_before_mb,
        "peak_rss_mb": peak_rss_mb(),
    }
    return rec


def fmt(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def table(records: list[dict[str, Any]]) -> str:
    head = [
        "N",
        "wall ms/iter",
        "CPU ms/iter",
        "of which fake model",
        "steps saved",
        "B/step @10",
        "B/step @≈400 (idx)",
        "ratio",
        "bytes_written/iter (not in steps)",
        "step ms first→last 10%",
        "peak RSS MB",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        late = (
            f"{r['step_bytes_late']:,} ({r['step_bytes_late_idx']})"
            if r["step_bytes_late"] is not None
            else "–"
        )
        q = r["step_bytes_late_over_early"]
        ratio = f"{q:.3f}" if q is not None else "–"
        cells = [
            str(r["n"]),
            fmt(r["per_iter_ms"]),
            fmt(r["per_iter_cpu_ms"]),
            fmt(r["fake_model_ms_per_iter"], 2),
            f"{r['steps_saved']:,}",
            f"{r['step_bytes_early']:,}" if r["step_bytes_early"] is not None else "–",
            late,
            ratio,
            f"{r['bytes_written_per_iter']:,.0f} ({r['other_bytes_per_iter']:,.0f})",
            f"{fmt(r['step_ms_first10pct'])} → {fmt(r['step_ms_last10pct'])}",
            f"{r['peak_rss_mb']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace, import_s: float | None) -> list[dict[str, Any]]:
    await run_once(10, sync_tool=args.sync_tool, run_id="warm-up")  # untimed
    records = []
    for n in args.ns:
        rss_before = peak_rss_mb()
        samples = [
            await run_once(n, sync_tool=args.sync_tool, run_id=f"n{n}-r{rep}")
            for rep in range(args.reps)
        ]
        rec = summarize(n, samples, rss_before)
        rec["import_s"] = import_s
        if args.sync_tool:
            rec["variant"] = "sync-tool"
        records.append(rec)
        if args.json:
            rounded = {k: round(v, 6) if isinstance(v, float) else v for k, v in rec.items()}
            print(json.dumps(rounded))
            sys.stdout.flush()
    return records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ns", type=int, nargs="+", default=[10, 100, 400], help="tool iterations")
    p.add_argument("--reps", type=int, default=3, help="measured runs per N (median reported)")
    p.add_argument("--json", action="store_true", help="print one JSON line per N, no table")
    p.add_argument(
        "--sync-tool", action="store_true", help="a sync echo tool (runs in a worker thread)"
    )
    args = p.parse_args()
    if any(n < 1 for n in args.ns) or args.reps < 1:
        p.error("--ns values and --reps must be at least 1")
    t0 = time.perf_counter()
    import_s = cold_import_s()
    records = asyncio.run(main_async(args, import_s))
    if not args.json:
        imp = f"{import_s * 1e3:.0f} ms" if import_s is not None else "n/a"
        print(
            f"steadyrun {steadyrun.__version__}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, tool=echo{' (sync)' if args.sync_tool else ''}, "
            f"MemoryStore, {args.reps} reps per N (medians); cold import {imp}\n"
        )
        print(table(records))
        print(f"\nall checks passed; total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
