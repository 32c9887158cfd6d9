"""Deleting runs and giving SQLite's space back; exporting and importing runs.

The workload: N runs of one agent on a ``SqliteStore`` (``synchronous="OFF"``: the figures are
about space, not fsyncs). Each run's input is ``--input-kb`` KiB of text; the model asks for
one ``ship`` call that waits for a decision. Half of the runs are approved and resumed to the
end (``completed``), at a clock 40 days back; the other half stay ``suspended``, now.

What it measures:

1. **retention on a new file** (incremental auto-vacuum, what ``SqliteStore`` makes): the file
   size after the fill, after a retention pass deleted the completed half (``Retention`` with
   ``reclaim=False``: the pages are free but still in the file), and after
   ``SqliteStore.reclaim()`` (an incremental vacuum and a truncating WAL checkpoint). The
   time per deleted run and of the reclaim;
2. **an older file** (made without auto-vacuum, as files of earlier releases are): the same
   deletion; ``reclaim()`` can only checkpoint there, ``reclaim(full=True)`` rewrites the file
   (``VACUUM``) and switches it to incremental mode; sizes and the time of the full vacuum;
3. **export and import**: every suspended run exported as its JSON document (through the
   text) and imported into a new SQLite file: milliseconds per run and bytes per document.

Sizes are of the database file plus its WAL. Figures, never pass/fail; the script exits
non-zero only when a run does not end as scripted.

Usage::

    .venv/bin/python benchmarks/lifecycle.py                 # 2,000 runs of 4 KiB, ~15 s
    .venv/bin/python benchmarks/lifecycle.py --runs 200 --input-kb 16
    .venv/bin/python benchmarks/lifecycle.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.service import Operations, Retention
from steadyrun.stores import SqliteStore
from steadyrun.testing import FunctionModel, text, tool_calls

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=40)


def _confirm(call: CallView) -> Confirm:
    return Confirm(prompt="Ship it?")


@sr.tool(side_effects=True, policy=_confirm)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    return f"shipped {len(item)} characters"


def _respond(request: sr.ModelRequest) -> sr.ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return tool_calls(("ship", {"item": request.messages[-1].text[:64]}))
    return text("shipped")


AGENT = sr.Agent(name="shipper", model=FunctionModel(_respond), tools=[ship])


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _checkpoint(path: Path) -> None:
    """Copy the WAL into the file and truncate it, from a connection of its own."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


async def _fill(path: Path, runs: int, kib: int) -> None:
    """``runs`` runs; the even ones completed 40 days ago, the odd ones suspended now."""
    clock = [OLD]
    async with SqliteStore(path, synchronous="OFF") as store:
        runtime = sr.Runtime(store, agents=[AGENT], clock=lambda: clock[0])
        body = "x" * (kib * 1024)
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with gate:
                result = await runtime.run(AGENT, run_id=f"r{i:05d}", input=f"{i} {body}")
                if result.status != "suspended":
                    raise SystemExit(f"run r{i:05d} ended {result.status}, not suspended")

        clock[0] = OLD
        await asyncio.gather(*(one(i) for i in range(0, runs, 2)))
        for i in range(0, runs, 2):
            [item] = await runtime.pending(f"r{i:05d}")
            await runtime.decide(f"r{i:05d}", item.call_id, approve=True)
            if (await runtime.resume(f"r{i:05d}")).status != "completed":
                raise SystemExit(f"run r{i:05d} did not complete")
        clock[0] = NOW
        await asyncio.gather(*(one(i) for i in range(1, runs, 2)))
        await store.reclaim()  # a checkpoint: the sizes below are of what is on disk


async def _retention(path: Path, *, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"filled": _size(path)}
    async with SqliteStore(path, synchronous="OFF") as store:
        ops = Operations(sr.Runtime(store, agents=[AGENT]))
        started = time.perf_counter()
        done = await ops.apply_retention(
            Retention(older_than=timedelta(days=30), reclaim=False, batch=10**9), now=NOW
        )
        out["deleted"] = len(done.deleted)
        out["delete_ms_per_run"] = (time.perf_counter() - started) * 1000 / max(1, out["deleted"])
        _checkpoint(path)  # the deleted rows' pages, free but still in the file
        out["after_delete"] = _size(path)
        started = time.perf_counter()
        reclaimed = await store.reclaim(full=full)
        out["reclaim_s"] = time.perf_counter() - started
        out["reclaim_mode"] = reclaimed.mode
        out["after_reclaim"] = _size(path)
    return out


async def _move(source: Path, target: Path, runs: int) -> dict[str, Any]:
    async with SqliteStore(source) as a, SqliteStore(target, synchronous="OFF") as b:
        here, there = Operations(sr.Runtime(a)), Operations(sr.Runtime(b))
        ids = [f"r{i:05d}" for i in range(1, runs, 2)]
        started = time.perf_counter()
        texts = [json.dumps(await here.export_run(run_id)) for run_id in ids]
        exported = time.perf_counter()
        for doc in texts:
            await there.import_run(doc)
        imported = time.perf_counter()
        sizes = [len(t.encode()) for t in texts]
        return {
            "runs": len(ids),
            "export_ms_per_run": (exported - started) * 1000 / len(ids),
            "import_ms_per_run": (imported - exported) * 1000 / len(ids),
            "document_bytes_median": int(statistics.median(sizes)),
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--input-kb", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        new, old = Path(tmp, "new.db"), Path(tmp, "old.db")
        with sqlite3.connect(old) as conn:  # as an earlier release made it: no auto-vacuum
            conn.execute("CREATE TABLE made_before (x INTEGER)")
        await _fill(new, args.runs, args.input_kb)
        await _fill(old, args.runs, args.input_kb)
        results = {
            "runs": args.runs,
            "input_kb": args.input_kb,
            "new_file": await _retention(new, full=False),
            "older_file": await _retention(old, full=True),
            "export_import": await _move(new, Path(tmp, "moved.db"), args.runs),
        }
    if args.json:
        print(json.dumps(results))
        return
    print(f"{args.runs} runs of {args.input_kb} KiB input; half completed 40 days ago")
    print(
        f"{'file':<12}{'filled':>11}{'deleted':>9}{'ms/run':>8}{'after del':>12}"
        f"{'reclaim':>13}{'after':>11}{'s':>7}"
    )
    for name in ("new_file", "older_file"):
        r = results[name]
        print(
            f"{name:<12}{_mib(r['filled']):>11}{r['deleted']:>9}{r['delete_ms_per_run']:>8.2f}"
            f"{_mib(r['after_delete']):>12}{r['reclaim_mode']:>13}{_mib(r['after_reclaim']):>11}"
            f"{r['reclaim_s']:>7.2f}"
        )
    m = results["export_import"]
    print(
        f"export/import of {m['runs']} runs (SQLite to SQLite): export "
        f"{m['export_ms_per_run']:.2f} ms/run, import {m['import_ms_per_run']:.2f} ms/run, "
        f"document {m['document_bytes_median']} bytes (median)"
    )


if __name__ == "__main__":
    asyncio.run(main())
