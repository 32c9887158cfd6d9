"""Which pages a SQLite loop step's commit writes: its WAL frames, by the b-tree they belong to.

A commit in WAL mode appends one frame (a 24-byte header and the whole page) for every page
it changed, so the pages a step touches are its write volume (the ``pwrite`` calls, the
checksums) whatever the size of the rows. This runs the loop of ``benchmarks/counts.py``
(one ``echo`` call with a 1 KiB argument per model call) on a ``SqliteStore``, copies the
database and its WAL before the store closes (its last checkpoint would empty the log), and
maps each frame's page to its table or index with SQLite's ``dbstat`` table. Commits at the
start and the end of the run are left out. Counts, not times: the same on every machine.

Usage::

    .venv/bin/python benchmarks/wal_pages.py                  # 20 iterations
    .venv/bin/python benchmarks/wal_pages.py --iterations 25 --json

The floor of the peer harness (``../shared/peers/baseline_loop.py``) writes one row per step
to one rowid table with a primary key: about 3 pages a commit on the same measure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import TypedDict

import steadyrun as sr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import countkit  # noqa: E402

_WAL_HEADER = 32
_FRAME_HEADER = 24
_SKIP_FIRST, _SKIP_LAST = 4, 3  # the run's creation and its ending are not loop steps
MAX_ITERATIONS = 25
"""Beyond this the idle writer's first checkpoint (after 64 commits) would restart the log."""


async def _run(folder: Path, iterations: int) -> Path:
    """Run the loop in ``folder``; the copied database (its WAL beside it)."""
    store = sr.SqliteStore(folder / "loop.db")
    try:
        result = await sr.Runtime(store, live=False).run(
            countkit.loop_agent(iterations), run_id="pages", input="Run the loop."
        )
        if result.status != "completed":
            raise SystemExit(f"the run ended {result.status!r}: {result.error!r}")
        copy = folder / "copy.db"
        shutil.copyfile(folder / "loop.db", copy)
        shutil.copyfile(folder / "loop.db-wal", folder / "copy.db-wal")
        return copy
    finally:
        await store.close()


def commits(wal: bytes) -> list[list[int]]:
    """The page numbers of each commit in ``wal``, in order (frames of its current salt)."""
    page_size, restarts = struct.unpack(">II", wal[8:16])
    if restarts:
        raise SystemExit("the log was checkpointed and started again: run fewer iterations")
    salt = wal[16:24]
    out: list[list[int]] = []
    pages: list[int] = []
    at = _WAL_HEADER
    while at + _FRAME_HEADER + page_size <= len(wal):
        page, size_after = struct.unpack(">II", wal[at : at + 8])
        if wal[at + 8 : at + 16] != salt:
            break  # a frame of an earlier generation of the log: the current one ends here
        pages.append(page)
        if size_after:  # the commit's last frame carries the database's size
            out.append(pages)
            pages = []
        at += _FRAME_HEADER + page_size
    return out


class Tally(TypedDict):
    """The loop's commits in a WAL: how many, and their pages, in all and by b-tree."""

    commits: int
    pages_per_commit: float
    kb_per_commit: float
    by_tree: dict[str, float]


def tally(copy: Path) -> Tally:
    """Pages per commit, in all and by b-tree, of the loop's commits in ``copy``'s WAL."""
    wal = (copy.parent / f"{copy.name}-wal").read_bytes()
    page_size = struct.unpack(">I", wal[8:12])[0]
    with sqlite3.connect(copy) as conn:
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
    found = commits(wal)
    middle = found[_SKIP_FIRST : len(found) - _SKIP_LAST]
    if not middle:
        raise SystemExit("too few commits in the log: run more iterations")
    by_tree: Counter[str] = Counter()
    for pages in middle:
        by_tree.update(str(owner.get(page, f"page {page} (freed)")) for page in pages)
    frames = sum(len(pages) for pages in middle)
    return {
        "commits": len(middle),
        "pages_per_commit": frames / len(middle),
        "kb_per_commit": frames * (page_size + _FRAME_HEADER) / len(middle) / 1024,
        "by_tree": {name: n / len(middle) for name, n in by_tree.most_common()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--json", action="store_true", help="one JSON object, no table")
    args = p.parse_args()
    if not 5 <= args.iterations <= MAX_ITERATIONS:
        p.error(f"--iterations must be between 5 and {MAX_ITERATIONS}")
    with tempfile.TemporaryDirectory() as tmp:
        figures = tally(asyncio.run(_run(Path(tmp), args.iterations)))
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{figures['commits']} commits of the loop (2 an iteration)")
    print(f"pages a commit: {figures['pages_per_commit']:.2f}, {figures['kb_per_commit']:.1f} KB")
    print("| b-tree | pages a commit |\n|---|---:|")
    for name, n in figures["by_tree"].items():
        print(f"| {name} | {n:.2f} |")


if __name__ == "__main__":
    main()
