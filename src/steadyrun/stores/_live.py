"""The live feed of a store: what an executing run does between its saves, for followers elsewhere.

A run's owner publishes small messages (a model's text fragments as they are written, and
"something was saved") that followers in any process on the same store receive at once, so a
display can show words as they come and reload a run right after a save instead of polling.

Nothing here is durable and nothing here is needed for correctness: messages may be dropped
(a full follower buffer, a process that dies), and every receiver detects a drop by the
per-sender sequence number and answers it by reloading the run from the store. The store stays
the truth; the feed only says when to look and what is being written meanwhile.

Each store has its own transport: ``MemoryLive`` (in process), ``SqliteLive`` (datagram sockets
beside the file, one per listening process) and ``PostgresLive`` (``NOTIFY``). A message is a
JSON object with ``run`` (the run id), ``o`` (the sending process's token), ``n`` (its
sequence number in that process) and ``t`` (its type); the runtime's ``LiveBroadcaster`` writes
them and the display stream's ``Publisher`` reads them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "GAP",
    "LiveFeed",
    "LiveHub",
    "LiveSubscription",
    "MemoryLive",
    "PROCESS_TOKEN",
    "close_live",
]

log = logging.getLogger("steadyrun.live")

PROCESS_TOKEN = secrets.token_hex(6)
"""This process's part of the feeds' tokens (a feed skips its own messages coming back)."""

GAP: dict[str, Any] = {"t": "gap"}
"""What a subscription yields after it lost messages: reload the run from the store."""

MAX_MESSAGE = 6000
"""Longest encoded message; longer texts are split (PostgreSQL's NOTIFY takes under 8000)."""


class LiveSubscription:
    """One follower's messages of one run, in a bounded buffer.

    A follower that lets ``limit`` messages pile up loses the oldest and gets ``GAP`` next (it
    reloads the run), so a follower that never reads costs the sender nothing and holds at most
    ``limit`` messages.
    """

    def __init__(self, hub: LiveHub, run_id: str, limit: int) -> None:
        self.run_id = run_id
        self._hub = hub
        self._limit = limit
        self._items: list[dict[str, Any]] = []
        self._ready = asyncio.Event()
        self._lost = False
        self.closed = False

    def put(self, message: dict[str, Any]) -> None:
        """Queue a message (never blocks; drops and marks a gap when full)."""
        if len(self._items) >= self._limit:
            self._items.clear()
            self._lost = True
        self._items.append(message)
        self._ready.set()

    def gap(self) -> None:
        """Messages were lost on the way: ``GAP`` comes after what is already queued."""
        if len(self._items) >= self._limit:
            self._items.clear()
            self._lost = True
        else:
            self._items.append(dict(GAP))
        self._ready.set()

    async def get(self) -> dict[str, Any]:
        """The next message (``GAP`` first when messages were lost)."""
        while True:
            if self._lost:
                self._lost = False
                return dict(GAP)
            if self._items:
                item = self._items.pop(0)
                if not self._items:
                    self._ready.clear()
                return item
            self._ready.clear()
            await self._ready.wait()

    def close(self) -> None:
        """Stop receiving."""
        if not self.closed:
            self.closed = True
            self._hub.drop(self)


class LiveHub:
    """This process's subscriptions of one store, and the dispatch of received messages."""

    def __init__(self, token: str = "") -> None:
        self.token = token or new_token()
        self._subs: dict[str, set[LiveSubscription]] = {}
        self._last: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._subs.values())

    def subscribe(self, run_id: str, limit: int) -> LiveSubscription:
        """A new subscription to ``run_id``'s messages."""
        sub = LiveSubscription(self, run_id, limit)
        self._subs.setdefault(run_id, set()).add(sub)
        return sub

    def drop(self, sub: LiveSubscription) -> None:
        """Forget a closed subscription."""
        subs = self._subs.get(sub.run_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.run_id]

    def watched(self, run_id: str) -> bool:
        """Whether anything in this process follows ``run_id``."""
        return run_id in self._subs

    def deliver(self, message: dict[str, Any]) -> None:
        """Hand a received message to the run's subscriptions (a sequence gap: ``GAP`` too)."""
        run_id = message.get("run")
        owner, number = message.get("o"), message.get("n")
        if not isinstance(run_id, str) or not isinstance(owner, str):
            return
        if owner == self.token and message.get("local") is not True:
            return  # our own message, echoed back by the transport
        subs = self._subs.get(run_id)
        lost = False
        if isinstance(number, int):
            last = self._last.get((owner, run_id))
            # A sender numbers each execution's messages from 1 again.
            lost = last is not None and number != last + 1 and number != 1
            self._last[(owner, run_id)] = number
            if message.get("t") == "end":
                self._last.pop((owner, run_id), None)
        if not subs:
            return
        for sub in list(subs):
            if lost:
                sub.gap()
            sub.put(message)

    def deliver_own(self, run_id: str, frames: list[bytes]) -> None:
        """Hand this feed's own frames of ``run_id`` to this process's subscriptions.

        (No transport.) Nothing is decoded for a run nobody here follows: one executing here is
        shown by its runtime's callbacks, so its fragments would be decoded for nothing.
        """
        if run_id not in self._subs:
            return
        for frame in frames:
            decoded = decode_frame(frame)
            if decoded is not None:
                self.deliver({**decoded, "local": True})

    def gap_all(self) -> None:
        """Every subscription lost messages (the transport broke and reconnected)."""
        for subs in self._subs.values():
            for sub in subs:
                sub.gap()


class LiveFeed(Protocol):
    """A store's live feed (see the module)."""

    hub: LiveHub

    def followed(self) -> bool:
        """Whether any process may follow runs of this store now (cheap, may be stale)."""

    def follows(self, run_id: str) -> bool:
        """Whether ``run_id`` may be followed now: here, or in any other process (cheap).

        Another process's followers are not known by run: any of them counts.
        """

    async def publish(self, message: dict[str, Any]) -> None:
        """Send one message (with ``run`` and ``t``) to every follower; never raises."""

    async def subscribe(self, run_id: str, *, limit: int = 1000) -> LiveSubscription:
        """Start receiving ``run_id``'s messages."""

    async def close(self) -> None:
        """Stop sending and receiving."""


def new_token() -> str:
    """A feed's token: this process's, and the feed's own (two stores of one file differ)."""
    return f"{PROCESS_TOKEN}{secrets.token_hex(2)}"


class Sender:
    """Numbers a feed's messages per run and splits long texts."""

    def __init__(self, token: str) -> None:
        self.token = token
        self._numbers: dict[str, int] = {}

    def frames(self, message: dict[str, Any]) -> list[bytes]:
        """The message as encoded frames, each under ``MAX_MESSAGE`` bytes."""
        parts = [message]
        text = message.get("text")
        if isinstance(text, str) and len(text.encode()) > MAX_MESSAGE - 500:
            step = max(1, (MAX_MESSAGE - 500) // 6)  # a character is at most 6 bytes in JSON
            parts = [{**message, "text": text[i : i + step]} for i in range(0, len(text), step)]
        out = []
        run_id = str(message["run"])
        for part in parts:
            number = self._numbers.get(run_id, 0) + 1
            self._numbers[run_id] = number
            if message.get("t") == "end":
                self._numbers.pop(run_id, None)
            out.append(
                json.dumps(
                    {**part, "o": PROCESS_TOKEN, "n": number}, separators=(",", ":")
                ).encode()
            )
        return out


def decode_frame(raw: bytes | str) -> dict[str, Any] | None:
    """A received frame, or ``None`` when it is not one of ours."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class MemoryLive:
    """The live feed of a ``MemoryStore``: in this process only."""

    def __init__(self) -> None:
        self.hub = LiveHub()
        self._sender = Sender(self.hub.token)

    def followed(self) -> bool:
        """Whether anything follows a run of this store."""
        return len(self.hub) > 0

    def follows(self, run_id: str) -> bool:
        """Whether anything follows ``run_id``."""
        return self.hub.watched(run_id)

    async def publish(self, message: dict[str, Any]) -> None:
        """Deliver to this process's subscriptions of the run (none: not even encoded)."""
        run_id = str(message["run"])
        if self.hub.watched(run_id):
            self.hub.deliver_own(run_id, self._sender.frames(message))

    async def subscribe(self, run_id: str, *, limit: int = 1000) -> LiveSubscription:
        """Start receiving ``run_id``'s messages."""
        return self.hub.subscribe(run_id, limit)

    async def close(self) -> None:
        """Nothing to release."""


class Cached:
    """A boolean probe answered from a cache at most ``ttl`` seconds old."""

    def __init__(self, probe: Callable[[], bool], ttl: float) -> None:
        self._probe = probe
        self._ttl = ttl
        self._at = -1e9
        self._value = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._at >= self._ttl:
            self._at = now
            try:
                self._value = self._probe()
            except Exception:  # a probe that fails says "maybe": publish anyway
                log.debug("live feed probe failed", exc_info=True)
                self._value = True
        return self._value


async def close_live(store: object) -> None:
    """Close ``store``'s live feed if one was made (the stores' ``close`` calls it)."""
    feed = getattr(store, "_steadyrun_live", None)
    if feed is not None:
        store._steadyrun_live = None  # type: ignore[attr-defined]
        await feed.close()
