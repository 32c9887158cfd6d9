"""``tune_gc``: a serving process's collector, set once its start-up heap is built.

A server's modules, classes and app live as long as its process; each full collection walked
them all again (about 40 ms here, three times in 1,000 runs of benchmarks/service.py), and
the default gen-0 threshold (700) ran a young collection every few runs' allocations.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steadyrun._cli import main
from steadyrun.service import tune_gc

HERE = Path(__file__).parent


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_tune_gc_freezes_the_heap_and_raises_the_young_threshold(restored_gc: None) -> None:
    kept = object()  # alive before: frozen with the rest
    gc.set_threshold(700, 10, 10)
    tune_gc()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (10_000, 10, 10)
    tune_gc(threshold=500)  # never lowered below what is set
    assert gc.get_threshold()[0] == 10_000
    assert kept is not None


def test_garbage_made_after_tuning_is_still_collected(restored_gc: None) -> None:
    tune_gc()

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    import weakref

    ref = weakref.ref(Node())
    gc.collect()
    assert ref() is None


@pytest.fixture
def untuned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, restored_gc: None) -> None:
    """CPython's collector, and ``serve_app:app`` on a file of the test's, for the CLI."""
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    monkeypatch.setenv("SERVE_DB", str(tmp_path / "runs.db"))
    monkeypatch.setenv("SERVE_EFFECTS", str(tmp_path / "effects.txt"))
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.chdir(HERE)


def _state() -> dict[str, Any]:
    return {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}


def test_serve_tunes_the_collector_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, untuned: None
) -> None:
    import uvicorn

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda api, **kwargs: seen.append(_state()))
    assert main(["serve", "--app", "serve_app:app", "--token", "t"]) == 0
    assert seen[0]["frozen"] > 0 and seen[0]["threshold"][0] == 10_000


def test_a_worker_process_tunes_the_collector_before_it_works(
    monkeypatch: pytest.MonkeyPatch, untuned: None
) -> None:
    from steadyrun.service._worker import Worker

    seen: list[dict[str, Any]] = []

    async def fake_run(self: Worker) -> None:
        seen.append(_state())

    monkeypatch.setattr(Worker, "run", fake_run)
    assert main(["worker", "--app", "serve_app:app", "--json"]) == 0
    assert seen[0]["frozen"] > 0 and seen[0]["threshold"][0] == 10_000
