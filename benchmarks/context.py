"""Context management over a long run: the largest request, summaries, bytes saved per step.

Runs R rounds (default 2,000) of a tool returning 4 KB on a 32k-token window with the default
ContextPolicy (keep_rounds=3, a pinned note every 250 rounds) on a fake model that answers at
once, and prints one markdown table. Figures, never pass/fail.

    .venv/bin/python benchmarks/context.py [--rounds 2000] [--window 32000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter

import steadyrun as sr
from steadyrun.chat import ModelRequest
from steadyrun.context import DEFAULT_SUMMARY_INSTRUCTION, ContextEvent, ContextPolicy
from steadyrun.context import estimate_request as tokens_of
from steadyrun.testing import FunctionModel, call, text, tool_calls


def build(rounds: int, window: int) -> tuple[sr.Agent, list[ModelRequest]]:
    requests: list[ModelRequest] = []
    step = 0

    def respond(request: ModelRequest) -> sr.ModelResponse:
        nonlocal step
        requests.append(request)
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            return text("SUMMARY: the steps so far, and the notes to keep.")
        step += 1
        if step > rounds:
            return text(f"finished {rounds} steps")
        if step % 250 == 0:
            return tool_calls(call("note", {"n": step}, id=f"n{step}"))
        return tool_calls(call("work", {"n": step}, id=f"w{step}"))

    @sr.tool(concurrency_key="")
    def work(n: int) -> str:
        """A step whose result is 4 KB."""
        return f"result {n}: " + "z" * 4096

    @sr.tool(concurrency_key="", retain="keep")
    def note(n: int) -> str:
        """A note kept verbatim."""
        return f"note {n}"

    agent = sr.Agent(
        name="long",
        model=FunctionModel(respond),
        tools=[work, note],
        context=ContextPolicy(window=window, keep_rounds=3),
        limits=sr.Limits(max_iterations=rounds + 10),
    )
    return agent, requests


async def measure(rounds: int, window: int) -> dict[str, object]:
    events: Counter[str] = Counter()

    class Count(sr.Observer):
        def on_context(self, run_id: str, event: ContextEvent) -> None:
            events[event.kind] += 1

    agent, requests = build(rounds, window)
    store = sr.MemoryStore()
    started, cpu = time.perf_counter(), time.process_time()
    result = await sr.Runtime(store, observers=[Count()]).run(agent, run_id="r", input="go")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    if result.text != f"finished {rounds} steps":
        raise SystemExit(f"unexpected end of the run: {result.status} {result.text!r}")
    sizes = [tokens_of(r) for r in requests]
    steps = store.step_bytes
    tenth = max(1, len(steps) // 10)
    return {
        "rounds": rounds,
        "window": window,
        "largest_request_tokens": max(sizes),
        "over_window": sum(s > window for s in sizes),
        "summaries": events["summarized"],
        "clearings": events["cleared"],
        "steps": len(steps),
        "step_bytes_median": statistics.median(steps),
        "step_bytes_first10pct": statistics.mean(steps[:tenth]),
        "step_bytes_last10pct": statistics.mean(steps[-tenth:]),
        "step_bytes_max": max(steps),
        "bytes_per_round": round(store.bytes_written / rounds),
        "ms_per_round": round(1000 * wall / rounds, 3),
        "cpu_ms_per_round": round(1000 * cpu / rounds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2_000)
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = asyncio.run(measure(args.rounds, args.window))
    if args.json:
        print(json.dumps(row))
        return
    print(f"steadyrun {sr.__version__}: {args.rounds} rounds of 4 KB results, window {args.window}")
    print()
    print("| figure | value |")
    print("|---|---|")
    for key, value in row.items():
        shown = f"{value:,.0f}" if isinstance(value, float) and value > 100 else value
        print(f"| {key.replace('_', ' ')} | {shown} |")


if __name__ == "__main__":
    main()
