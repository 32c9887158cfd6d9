"""What one trip to a thread costs: ``ThreadPoolExecutor(1).submit`` against steadyrun's ``Lane``.

The SQLite connections hand each commit (and each group or read done on their thread) to a
thread and are answered through their own asyncio futures. This measures one trip with the
caller waiting for it, as a commit is awaited: the process's CPU (user and system) per trip,
and the context switches, for each way, interleaved over a few rounds. Figures only.

Usage::

    .venv/bin/python benchmarks/thread_trip.py            # 5 rounds of 5,000 trips each way
    .venv/bin/python benchmarks/thread_trip.py --trips 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from steadyrun._lane import Lane


def trips(submit: Callable[[Callable[[], None]], object], count: int) -> tuple[float, float]:
    """CPU microseconds and context switches per trip, ``count`` trips one after another."""
    done = threading.Event()
    submit(done.set)  # the thread exists before the measure
    done.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(count):
        done.clear()
        submit(done.set)
        done.wait()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)
    return cpu / count * 1e6, switches / count


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trips", type=int, default=5000, help="trips per round and way")
    p.add_argument("--rounds", type=int, default=5, help="rounds, each way once per round")
    args = p.parse_args()
    executor = ThreadPoolExecutor(max_workers=1)
    lane = Lane("thread-trip")
    ways: dict[str, Callable[[Callable[[], None]], object]] = {
        "ThreadPoolExecutor.submit": executor.submit,
        "Lane.submit": lane.submit,
    }
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, submit in ways.items():
            got[name].append(trips(submit, args.trips))
    executor.shutdown()
    lane.shutdown()
    print("| way | CPU us per trip (median) | context switches per trip |")
    print("|---|---:|---:|")
    for name, rows in got.items():
        cpu = statistics.median(r[0] for r in rows)
        switches = statistics.median(r[1] for r in rows)
        print(f"| {name} | {cpu:.1f} | {switches:.2f} |")


if __name__ == "__main__":
    main()
