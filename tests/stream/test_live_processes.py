"""Runs executed by another process stream live to followers here (issue 21 item 3).

A child process executes a run whose fake model writes words slowly; a ``Publisher`` in this
process, on the same store (a SQLite file, a PostgreSQL database), shows the words as they are
written (fragment deltas on a live block, before the run ends), then the stored answer in their
place. Killed mid-stream, the child leaves a live block that the next execution (a resume in
another process) drops; the model is asked again and the stored context holds the answer once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

import pgkit
from steadyrun._cli_target import open_store
from steadyrun.stores import Store
from steadyrun.stream import (
    BlockRemoved,
    DisplaySnapshot,
    Publisher,
    RunStatusChanged,
    TextFragment,
    apply,
)

CHILD = str(Path(__file__).with_name("live_child.py"))
pg_dsn = pgkit.database_fixture()


async def _child(url: str, run_id: str, count: int, delay: float, wait: float):  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable, CHILD, url, run_id, str(count), str(delay), str(wait),
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip


async def _wait_for_run(store: Store, run_id: str) -> None:
    for _ in range(400):
        if await store.load(run_id) is not None:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} never appeared")


class Watch:
    """Follows a run, folding its events into a snapshot and noting what came when."""

    def __init__(self, publisher: Publisher, run_id: str) -> None:
        self.publisher, self.run_id = publisher, run_id
        self.snap: DisplaySnapshot | None = None
        self.events: list[object] = []
        self.live_texts: list[str] = []

    async def until(self, done) -> None:  # type: ignore[no-untyped-def]
        async for event in self.publisher.follow(self.run_id, poll_interval=30):
            if event.kind == "snapshot":
                self.snap = event.snapshot
            elif event.kind == "delta":
                assert self.snap is not None and event.delta is not None
                self.snap = apply(self.snap, event.delta)
                self.events.append(event.delta)
            live = [b.text for b in self.snap.blocks if b.live] if self.snap else []
            if live:
                self.live_texts.append(live[0])
            if self.snap is not None and done(self.snap):
                return


def _stored_answer(snap: DisplaySnapshot) -> str:
    return "".join(b.text for b in snap.blocks if b.kind == "content" and not b.live)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_run_in_another_process_streams_its_words_live(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = str(tmp_path / "runs.db") if kind == "sqlite" else request.getfixturevalue("pg_dsn")
    store = open_store(url, create=True)
    publisher = Publisher(store)
    await store.list_runs()  # the file or schema exists before the child opens it
    child = await _child(url, "r1", 60, 0.02, 1.0)
    try:
        await _wait_for_run(store, "r1")
        watch = Watch(publisher, "r1")
        await asyncio.wait_for(watch.until(lambda s: s.status == "completed"), 60)
    finally:
        await child.wait()
        await store.close()
    fragments = [e for e in watch.events if isinstance(e, TextFragment)]
    ended = next(i for i, e in enumerate(watch.events) if isinstance(e, RunStatusChanged))
    assert len(fragments) >= 10, "the words came one by one, not with the saved step"
    assert watch.events.index(fragments[0]) < ended, "words were seen before the run ended"
    assert len(set(watch.live_texts)) >= 10, "the live block grew in place"
    assert watch.snap is not None
    expected = "".join(f"w{i} " for i in range(60))
    assert watch.snap.text == expected.rstrip() or watch.snap.text == expected
    assert not any(b.live for b in watch.snap.blocks), "the stored answer replaced the live one"
    assert _stored_answer(watch.snap) == watch.snap.text


async def test_a_sigkill_mid_stream_drops_the_partial_text_and_the_resume_asks_again(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "runs.db")
    store = open_store(url, create=True)
    publisher = Publisher(store)
    await store.list_runs()
    first = await _child(url, "r1", 400, 0.02, 0.5)
    try:
        await _wait_for_run(store, "r1")
        watch = Watch(publisher, "r1")
        # Follow until the live block holds a few words, then kill the writer.
        await asyncio.wait_for(
            watch.until(lambda s: any(b.live and len(b.text) > 20 for b in s.blocks)), 60
        )
        first.send_signal(signal.SIGKILL)
        await first.wait()
        assert watch.snap is not None and any(b.live for b in watch.snap.blocks)
        second = await _child(url, "r1", 30, 0.01, 0.0)
        await asyncio.wait_for(watch.until(lambda s: s.status == "completed"), 60)
        out = (await second.communicate())[0].decode()
        assert "done completed" in out
    finally:
        await store.close()
    dropped = [e for e in watch.events if isinstance(e, BlockRemoved) and "live-" in e.block_id]
    assert dropped, "the partial text of the lost call was dropped by a delta"
    assert watch.snap is not None and not any(b.live for b in watch.snap.blocks)
    answer = "".join(f"w{i} " for i in range(30))
    stored = await open_store(url, create=True).load("r1")
    assert stored is not None
    texts = [m.text for m in stored.context if m.role == "assistant" and m.text]
    assert [t.strip() for t in texts] == [answer.strip()], "the answer is stored once"


async def test_runs_tail_prints_the_words_as_they_are_written(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.db")
    store = open_store(url, create=True)
    await store.list_runs()
    # The pause leaves time for the tail process to start (and listen) before the words.
    writer = await _child(url, "r1", 80, 0.02, 4.0)
    try:
        await _wait_for_run(store, "r1")
        tail = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyrun", "runs", "tail", "r1", "--store", url,
            stdout=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert tail.stdout is not None
        chunks: list[bytes] = []
        while chunk := await asyncio.wait_for(tail.stdout.read(4096), 60):
            chunks.append(chunk)
        assert await tail.wait() == 0
    finally:
        await writer.wait()
        await store.close()
    out = b"".join(chunks).decode()
    answer = "".join(f"w{i} " for i in range(80)).strip()
    assert out.count(answer) == 1, f"the answer printed once:\n{out}"
    before_end = [c for c in chunks if b"completed" not in c]
    assert len(before_end) >= 5, "the words came in many pieces, not in one at the end"
    assert out.rstrip().endswith("completed")
    assert "pause  succeeded" in out
