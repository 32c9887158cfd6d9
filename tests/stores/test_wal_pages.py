"""The pages a SQLite loop step's commit writes (benchmarks/wal_pages.py), held as a bound.

A commit appends every page it changed to the WAL: a new index on a table each step writes,
or a row that starts spilling into overflow pages, shows here as more pages a commit.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from scriptkit import load_script

wal_pages = load_script(
    Path(__file__).resolve().parents[2] / "benchmarks" / "wal_pages.py", "wal_pages"
)

PAGES_A_COMMIT = 13.0
"""12.2 on 2026-12-07 (10 iterations): runs and its three listing indexes, context, step
history, calls, blocks and the work log each write about a page a commit."""


async def test_a_loop_steps_commit_writes_a_bounded_number_of_pages(tmp_path: Path) -> None:
    figures = wal_pages.tally(await wal_pages._run(tmp_path, 10))
    assert figures["commits"] >= 15
    assert figures["pages_per_commit"] <= PAGES_A_COMMIT, figures
    by_tree = figures["by_tree"]
    for tree in ("runs", "context", "step_history", "calls"):
        assert 0 < by_tree[tree] < 1.5, (tree, by_tree)


def _wal(frames: list[tuple[int, int, bytes]], page_size: int = 512) -> bytes:
    salt = b"SALTsalt"
    header = struct.pack(">IIII", 0x377F0682, 3007000, page_size, 0) + salt + b"\0" * 8
    body = b"".join(
        struct.pack(">II", page, size) + own + b"\0" * 8 + b"\0" * page_size
        for page, size, own in frames
    )
    return header + body


def test_frames_group_into_commits_and_stop_at_an_older_generation() -> None:
    salt, old = b"SALTsalt", b"OLDsalt!"
    wal = _wal([(3, 0, salt), (5, 9, salt), (2, 9, salt), (7, 0, old), (8, 9, old)])
    assert wal_pages.commits(wal) == [[3, 5], [2]]


def test_a_log_that_started_again_is_refused() -> None:
    wal = bytearray(_wal([(3, 9, b"SALTsalt")]))
    wal[12:16] = struct.pack(">I", 1)  # the checkpoint sequence: one restart
    with pytest.raises(SystemExit, match="started again"):
        wal_pages.commits(bytes(wal))
