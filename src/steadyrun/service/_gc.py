"""The garbage collector of a serving process: its start-up heap frozen, young collections rarer.

A server imports FastAPI, pydantic and steadyrun and builds its app once; those objects live
as long as the process. CPython's collector walked all of them again at each full collection
(about 40 ms on a 2-core VM, three times in 1,000 runs of ``benchmarks/service.py``), and its
default gen-0 threshold (700 allocations) ran a young collection every few runs: 9% of the
serving process's CPU in that benchmark, 1.5% once tuned (docs/benchmarks.md).
``steadyrun serve`` and ``steadyrun worker`` call ``tune_gc`` once their app is built.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_gc"]

YOUNG_THRESHOLD = 10_000
"""Allocations between young collections in a tuned process (CPython's default: 700)."""


def tune_gc(threshold: int = YOUNG_THRESHOLD) -> None:
    """Prepare this process's garbage collector for serving; call it once, after start-up.

    What exists now is collected once, then frozen (``gc.freeze``): later collections skip
    it, so a full collection walks only what was made since. The gen-0 threshold is raised to
    ``threshold`` (never lowered). Objects made later are collected as before, cycles included;
    garbage frozen here would never be, which the collection first rules out.

    For a process that embeds an ``App`` in a server of its own, call it the same way once
    the app is built (``steadyrun serve`` does).

    Args:
        threshold: Allocations between young collections, at least.
    """
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, threshold), middle, old)
