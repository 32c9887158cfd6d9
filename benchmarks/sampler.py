"""cProfile of every thread of a process, for ``scale_worker.py``.

cProfile sees the thread that enables it only, and a Temporal worker runs its workflow
activations on executor threads; ``ThreadProfiles`` gives each thread started after it (and
the one that starts it) a profile of its own and merges them at the end. Set
``STEADYRUN_SCALE_PROFILE=<file>`` for a worker of ``scale.py`` to write one on SIGTERM.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import threading
from pathlib import Path
from typing import Any


class ThreadProfiles:
    """One ``cProfile.Profile`` per thread, merged by ``write``."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """Profile this thread, and every thread started from now on."""
        threading.setprofile(self._first_call)
        self._begin()

    def _begin(self) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def _first_call(self, frame: Any, event: str, arg: Any) -> None:
        # Called once per new thread: it replaces itself with the thread's own profile.
        sys.setprofile(None)
        self._begin()

    def write(self, path: Path, top: int = 70) -> None:
        """The merged profiles' top ``top`` functions by own time and by cumulative time."""
        threading.setprofile(None)  # type: ignore[arg-type]
        with self._lock:
            profiles = list(self.profiles)
        for profile in profiles:
            profile.snapshot_stats()
        out = io.StringIO()
        stats = pstats.Stats(profiles[0], stream=out)
        for profile in profiles[1:]:
            stats.add(profile)
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
        stats.dump_stats(str(path) + ".pstats")
        path.write_text(f"{len(profiles)} threads\n" + out.getvalue())


def thread_cpu() -> str:
    """CPU seconds of each thread of this process by thread name (from ``/proc``), one a line.

    Python's threads (the event loop, the workflow executor's) and the Temporal core's Rust
    threads (tokio workers) apart.
    """
    tick = os.sysconf("SC_CLK_TCK")
    # Python threads by their Python name, pool threads' numbers dropped (they add up).
    python = {t.native_id: t.name.rsplit("_", 1)[0] for t in threading.enumerate()}
    by_name: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = python.get(int(task.name)) or stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        by_name[name] = by_name.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    rows = sorted(by_name.items(), key=lambda kv: -kv[1])
    return "".join(f"{cpu:8.2f} s  {name}\n" for name, cpu in rows)
