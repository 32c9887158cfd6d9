"""The random fault-injection suite's counts, and their summary at the end of a pytest run.

``randomrun.run_suite`` adds each suite's counts to ``TOTALS``; the root conftest prints
``write_summary`` in the terminal summary. Under pytest-xdist the suites run in worker
processes and the summary is printed by the controller, which ran none: each worker sends its
counts (``dump``) when its session ends and the controller adds them up (``load``). This module
imports nothing of the suite, so the controller can import it cheaply.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["TOTALS", "Totals", "dump", "load", "summary_line", "write_summary"]


@dataclass
class Totals:
    """Counts for the session summary, per store."""

    runs: Counter[str] = field(default_factory=Counter)
    kills: Counter[str] = field(default_factory=Counter)
    kill_kinds: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    violations: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    seeds: dict[str, str] = field(default_factory=dict)
    races: dict[str, Counter[str]] = field(default_factory=dict)


TOTALS = Totals()
"""Filled by ``randomrun.run_suite`` (or by ``load``); ``write_summary`` prints it."""

_COUNTERS = ("runs", "kills", "kill_kinds", "checked", "violations", "statuses", "seen", "seconds")


def dump() -> dict[str, Any]:
    """``TOTALS`` as plain dicts: what an xdist worker can send to its controller."""
    out: dict[str, Any] = {name: dict(getattr(TOTALS, name)) for name in _COUNTERS}
    out["seeds"] = dict(TOTALS.seeds)
    out["races"] = {store: dict(c) for store, c in TOTALS.races.items()}
    return out


def load(data: dict[str, Any]) -> None:
    """Add a worker's ``dump`` to ``TOTALS``."""
    for name in _COUNTERS:
        getattr(TOTALS, name).update(data.get(name, {}))
    TOTALS.seeds.update(data.get("seeds", {}))
    for store, races in data.get("races", {}).items():
        TOTALS.races.setdefault(store, Counter()).update(races)


def summary_line(store: str) -> str:
    """One line of counts for ``store`` (or ``all``)."""
    stores = list(TOTALS.runs) if store == "all" else [store]
    runs = sum(TOTALS.runs[s] for s in stores)
    kills = sum(TOTALS.kills[s] for s in stores)
    checked = sum(TOTALS.checked[s] for s in stores)
    bad = sum(TOTALS.violations[s] for s in stores)
    seeds = ", ".join(f"{s} {TOTALS.seeds[s]}" for s in stores)
    r: Counter[str] = Counter()
    for s in stores:
        r.update(TOTALS.races.get(s, Counter()))
    tries = sum(r[o] for o in ("busy", "idle", "ran", "absent"))
    return (
        f"chaos random {store}: {runs} runs, {kills} kills, {checked} invariants checked, "
        f"{bad} violations; racer: {tries} tries, {r['busy']} busy, {r['idle']} found nothing "
        f"to do, {r['ran']} took the run first, {r['absent']} before it existed; it wrote "
        f"{r['racer steps']} steps and ran {r['racer bodies']} bodies of the checked runs "
        f"(CHAOS_SEED: {seeds})"
    )


class _Reporter(Protocol):
    def write_sep(self, sep: str, title: str) -> None: ...
    def write_line(self, line: str) -> None: ...


def write_summary(reporter: _Reporter) -> None:
    """The counts of the suites that ran, as the end of the pytest output shows them."""
    if not TOTALS.runs:
        return
    reporter.write_sep("=", "chaos: random fault injection")
    for store in sorted(TOTALS.runs):
        reporter.write_line(summary_line(store))
    if len(TOTALS.runs) > 1:
        reporter.write_line(summary_line("all"))
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(TOTALS.kill_kinds.items()))
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(TOTALS.statuses.items()))
    reporter.write_line(f"kills by point: {kinds}; final call statuses: {statuses}")
    seen = ", ".join(f"{n} {s}" for s, n in sorted(TOTALS.seen.items()))
    reporter.write_line(f"situations met: {seen or 'none'}")
