"""The stores' live feeds: messages reach followers, losses are told, nobody waits (issue 21)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pgkit
from steadyrun.stores import MemoryStore, SqliteStore
from steadyrun.stores._live import GAP, LiveHub, Sender
from steadyrun.stores._live_open import live_feed
from steadyrun.stores._live_sqlite import live_directory

pg_dsn = pgkit.database_fixture()


def _msg(run: str, n: int, t: str = "frag", owner: str = "other") -> dict[str, object]:
    return {"run": run, "t": t, "o": owner, "n": n}


async def test_a_subscription_gets_its_runs_messages_in_order() -> None:
    hub = LiveHub()
    sub = hub.subscribe("r", 10)
    for n in (1, 2, 3):
        hub.deliver(_msg("r", n))
    hub.deliver(_msg("other-run", 1))
    assert [(await sub.get())["n"] for _ in range(3)] == [1, 2, 3]
    assert hub.watched("r") and not hub.watched("other-run")
    sub.close()
    assert not hub.watched("r")


async def test_a_gap_in_a_senders_numbering_is_told_before_the_next_message() -> None:
    hub = LiveHub()
    sub = hub.subscribe("r", 10)
    hub.deliver(_msg("r", 1))
    hub.deliver(_msg("r", 3))  # 2 was lost on the way
    assert (await sub.get())["n"] == 1
    assert await sub.get() == GAP
    assert (await sub.get())["n"] == 3
    hub.deliver(_msg("r", 1, "start"))  # a new execution numbers from 1 again: no gap
    assert (await sub.get())["t"] == "start"


async def test_a_follower_that_never_reads_holds_a_bounded_buffer_and_gets_a_gap() -> None:
    hub = LiveHub()
    sub = hub.subscribe("r", 5)
    for n in range(1, 1001):
        hub.deliver(_msg("r", n))
    assert len(sub._items) <= 5
    assert await sub.get() == GAP


async def test_own_messages_echoed_by_a_transport_are_skipped() -> None:
    hub = LiveHub()
    sub = hub.subscribe("r", 5)
    hub.deliver(_msg("r", 1, owner=hub.token))
    hub.deliver(_msg("r", 1))
    assert (await sub.get())["o"] == "other"


def test_long_texts_are_split_into_frames_under_the_limit() -> None:
    frames = Sender("t").frames({"run": "r", "t": "frag", "text": "é" * 20_000})
    assert len(frames) > 1 and all(len(f) < 6000 for f in frames)


async def test_memory_feed_delivers_in_process_and_reports_followers() -> None:
    store = MemoryStore()
    feed = live_feed(store)
    assert feed is not None and live_feed(store) is feed
    assert not feed.followed()
    sub = await feed.subscribe("r")
    assert feed.followed()
    await feed.publish({"run": "r", "t": "saved"})
    assert (await asyncio.wait_for(sub.get(), 1))["t"] == "saved"


SENDER = """
import asyncio, sys
from steadyrun.stores import SqliteStore
from steadyrun.stores._live_open import live_feed
async def main():
    feed = live_feed(SqliteStore(sys.argv[1]))
    for i in range(int(sys.argv[2])):
        await feed.publish({"run": "r", "t": "frag", "text": f"x{i}"})
asyncio.run(main())
"""


async def test_sqlite_feed_crosses_processes_and_removes_dead_followers(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    feed = live_feed(store)
    assert feed is not None
    sub = await feed.subscribe("r")
    # A follower that died without unbinding left its socket file behind.
    stale = live_directory(path) / "12345-dead"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SENDER, str(path), "20")
    assert await proc.wait() == 0
    texts = [(await asyncio.wait_for(sub.get(), 5))["text"] for _ in range(20)]
    assert texts == [f"x{i}" for i in range(20)]
    assert not stale.exists(), "the sender removed the socket nobody listens on"
    await store.close()
    assert not os.listdir(live_directory(path)), "closing the store unbinds its socket"


async def test_sqlite_feed_with_no_follower_sends_nothing(tmp_path: Path) -> None:
    feed = live_feed(SqliteStore(tmp_path / "runs.db"))
    assert feed is not None and not feed.followed()
    await feed.publish({"run": "r", "t": "saved"})  # no directory, no socket: a no-op


async def test_postgres_feed_crosses_connections(pg_dsn: str) -> None:
    from steadyrun.stores import PostgresStore

    follower_store, owner_store = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        await follower_store.list_runs()
        follower, owner = live_feed(follower_store), live_feed(owner_store)
        assert follower is not None and owner is not None
        sub = await follower.subscribe("r")
        owner._others = True  # type: ignore[attr-defined]
        for i in range(30):
            await owner.publish({"run": "r", "t": "frag", "text": f"x{i}"})
        got = []
        while len(got) < 30:
            message = await asyncio.wait_for(sub.get(), 10)
            if message.get("t") == "frag" and message.get("o") != "gap":
                got.append(message["text"])
        assert got == [f"x{i}" for i in range(30)]
        # The owner sees that somebody listens (the follower's connection is named).
        await owner._look()  # type: ignore[attr-defined]
        assert owner.followed()
    finally:
        await follower_store.close()
        await owner_store.close()


async def test_a_processs_own_messages_of_runs_nobody_here_follows_are_not_decoded(
    tmp_path: Path, monkeypatch: object
) -> None:
    # The owner's messages come back to its own process's subscriptions without a transport;
    # those of a run nobody here follows (one executing here, say) are not decoded for nothing.
    import steadyrun.stores._live as live

    decoded: list[object] = []
    real = live.decode_frame

    def counting(raw: bytes | str) -> dict[str, object] | None:
        decoded.append(raw)
        return real(raw)

    monkeypatch.setattr(live, "decode_frame", counting)  # type: ignore[attr-defined]
    for store in (MemoryStore(), SqliteStore(tmp_path / "runs.db")):
        feed = live_feed(store)
        assert feed is not None
        sub = await feed.subscribe("watched")
        decoded.clear()
        for _ in range(5):
            await feed.publish({"run": "other", "t": "frag", "text": "x"})
        assert decoded == []
        await feed.publish({"run": "watched", "t": "frag", "text": "y"})
        assert (await sub.get())["text"] == "y"
        assert len(decoded) == 1
        sub.close()
        await store.close()
