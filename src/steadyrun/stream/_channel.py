"""A run's channel: its snapshot, recent deltas and followers, and the events they are sent.

Followers at one position share their events (the deltas joined, and each encoded, once), wait
on a future each, and are woken a batch per turn of the event loop; ``Publisher`` decides when.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from steadyrun._codec import encode
from steadyrun.stream._live import LiveCall
from steadyrun.stream._model import Delta, DisplaySnapshot, coalesce
from steadyrun.stream._pacing import wake_interval

__all__ = ["Channel", "StreamEvent", "release", "subscribed_first"]

_T = TypeVar("_T")

_EXPIRY_SLACK = 0.002
"""Seconds early a follower's wait may end (the loop runs a timer up to its resolution early)."""

_WAKE_BATCH = 16
"""Followers woken per turn of the event loop: between batches, the run's own timers fire."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamEvent:
    """One event for a follower.

    Attributes:
        kind: ``snapshot`` (start over from ``snapshot``), ``delta`` (apply ``delta``) or
            ``keepalive`` (nothing changed; lets a server notice a gone client).
        id: ``<epoch>.<seq>``: what a follower passes back to resume (``Last-Event-ID``).
        snapshot: The snapshot of a ``snapshot`` event.
        delta: The delta of a ``delta`` event.
    """

    kind: Literal["snapshot", "delta", "keepalive"]
    id: str = ""
    snapshot: DisplaySnapshot | None = None
    delta: Delta | None = None
    # Followers at one position receive one event object: what is made of it is made once.
    _data: bytes | None = field(default=None, init=False, repr=False, compare=False)
    _rendering: tuple[Callable[[Any], Any], Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def data(self) -> bytes:
        """The event's payload as versioned JSON (``{"format": 1, "data": ...}``)."""
        if self._data is None:
            if self.snapshot is not None:
                data = encode(self.snapshot)
            elif self.delta is not None:
                data = encode(self.delta, Delta)
            else:
                data = b""
            object.__setattr__(self, "_data", data)
            return data
        return self._data

    def rendered(self, render: Callable[[StreamEvent], _T]) -> _T:
        """``render(self)``, computed once for every follower that receives this event.

        A server passes its one rendering function (an SSE frame, say): the followers of a run
        at one position share their events, so a hundred clients cost one encoding.
        """
        cached = self._rendering
        if cached is not None and cached[0] is render:
            return cached[1]  # type: ignore[no-any-return]
        out = render(self)
        object.__setattr__(self, "_rendering", (render, out))
        return out


class Channel:
    """One run's snapshot, recent deltas and followers (the publisher's, see the module)."""

    def __init__(self, snapshot: DisplaySnapshot, buffer_size: int) -> None:
        # A new epoch whenever a channel is created: sequence numbers restart with it.
        self.epoch = secrets.token_hex(4)
        self.snapshot = snapshot
        self.deltas: deque[Delta] = deque(maxlen=buffer_size)
        self.lock = asyncio.Lock()
        self.followers = 0
        self.active = False
        self.touched = 0
        self.live: LiveCall | None = None
        self.feed_task: asyncio.Task[None] | None = None
        # What followers at one position are sent, made once for all of them (see ``events``);
        # both are dropped at each change.
        self.shared: dict[int, list[tuple[int, StreamEvent]]] = {}
        self.shown: StreamEvent | None = None
        # Followers waiting for a change, each on a future of its own (no task per wait), and
        # when each gives up; one timer for the earliest of them (not one per wait).
        self.waiters: list[tuple[asyncio.Future[int | None], float]] = []
        self.expiry: asyncio.TimerHandle | None = None
        self.round = 0  # wake-ups so far
        self.woken = 0.0  # the loop's time at the latest wake-up
        self.took_round = 0.0  # seconds from it to the latest follower it woke waiting again
        self.took = 0.0  # the same over the earlier wake-ups (smoothed)
        self.wake: asyncio.TimerHandle | None = None
        self.stale = False  # changed in the store since the snapshot; reloaded when read
        # A model response came while somebody followed: the run is reloaded at the next
        # callback after its save, or when this timer fires (``Publisher.on_model_response``).
        self.due: asyncio.TimerHandle | None = None
        # Live messages (a model call's start, its fragments) of a run executing here that
        # nobody followed when they came: applied when somebody reads (``Publisher``), dropped
        # when the execution ends unseen. Fragments of one part are joined as they come.
        self.held: list[dict[str, Any]] = []

    def undue(self) -> None:
        """A reload is under way (or no longer needed): the due one is not."""
        if self.due is not None:
            self.due.cancel()
            self.due = None

    def unwatched(self) -> bool:
        """Executing here with nobody following: a reload can wait until someone reads."""
        if self.active and self.followers == 0:
            self.stale = True
            return True
        return False

    def hold(self, message: dict[str, Any]) -> None:
        """Keep a live message for later (see ``held``): a call's start replaces what was held.

        Applying what is held (``take_held``) gives the snapshot that applying each message as
        it came gave.
        """
        if message.get("t") == "frag":
            name = message.get("name")
            self.hold_fragment(
                str(message.get("mc")),
                str(message.get("part", "")),
                int(message.get("index", 0) or 0),
                message.get("text"),
                name if isinstance(name, str) else None,
            )
            return
        if message.get("t") == "call":
            self.held.clear()  # its start drops the live blocks of any call before it
        self.held.append(message)

    def hold_fragment(
        self, mc: str, part: str, index: int, text: str | None, name: str | None
    ) -> None:
        """Keep a fragment for later: joined to the one before when of the same part."""
        held = self.held
        if held:
            last = held[-1]
            if (
                last["t"] == "frag"
                and last["mc"] == mc
                and last["part"] == part
                and last["index"] == index
            ):
                last["pieces"].append(text or "")
                if last["name"] is None:
                    last["name"] = name
                return
        piece = {"t": "frag", "mc": mc, "part": part, "index": index, "name": name}
        piece["pieces"] = [text or ""]  # joined once, when applied
        held.append(piece)

    def take_held(self) -> list[dict[str, Any]]:
        """The messages held (their fragments joined), no longer held."""
        held, self.held = self.held, []
        for message in held:
            pieces = message.pop("pieces", None)
            if pieces is not None:
                message["text"] = "".join(pieces)
        return held

    def event_id(self, seq: int) -> str:
        return f"{self.epoch}.{seq}"

    def since(self, seq: int) -> list[Delta] | None:
        """The deltas after ``seq``, or ``None`` when the buffer no longer holds them all."""
        if seq == self.snapshot.seq:
            return []
        if seq > self.snapshot.seq or not self.deltas or seq < self.deltas[0].seq - 1:
            return None
        # From the newest back: a follower keeping up is a few deltas behind.
        out: list[Delta] = []
        for delta in reversed(self.deltas):
            if delta.seq <= seq:
                break
            out.append(delta)
        out.reverse()
        return out

    def events(self, seq: int) -> list[tuple[int, StreamEvent]] | None:
        """A follower's events after ``seq`` (joined), or ``None`` when it needs a snapshot.

        Every follower at ``seq`` gets the same list: after a wake-up most followers are at
        one position, so the deltas are joined, and each event encoded, once.
        """
        if seq == self.snapshot.seq:
            return []
        out = self.shared.get(seq)
        if out is None:
            replay = self.since(seq)
            if replay is None:
                return None
            out = [
                (d.seq, StreamEvent(kind="delta", id=self.event_id(d.seq), delta=d))
                for d in coalesce(replay)
            ]
            self.shared[seq] = out
        return out

    def snapshot_event(self) -> StreamEvent:
        """The current snapshot as an event (one object for all followers until a change)."""
        if self.shown is None:
            seq = self.snapshot.seq
            self.shown = StreamEvent(kind="snapshot", id=self.event_id(seq), snapshot=self.snapshot)
        return self.shown

    def changed(self) -> None:
        """The snapshot changed: what was made for followers is out of date."""
        self.shared.clear()
        self.shown = None

    async def wait(self, seconds: float, woke: int) -> int | None:
        """Wait for the next wake-up (its number) or ``seconds`` (``None``).

        ``woke`` is the wake-up that brought this follower here: the first follower back from
        the latest one tells how long the followers take (see ``wake_interval``), the last one
        at the latest.
        """
        loop = asyncio.get_running_loop()
        now = loop.time()
        if woke == self.round:
            self.took_round = now - self.woken
        future: asyncio.Future[int | None] = loop.create_future()
        deadline = now + seconds
        self.waiters.append((future, deadline))
        if self.expiry is None or deadline < self.expiry.when():
            if self.expiry is not None:
                self.expiry.cancel()
            self.expiry = loop.call_at(deadline, self._expire)
        try:
            return await future
        finally:
            if future.cancelled():
                for i, (waiting, _) in enumerate(self.waiters):
                    if waiting is future:
                        del self.waiters[i]
                        break

    def wake_followers(self, longest: float) -> None:
        """Wake the followers now, or when the wake-up interval since the last one is over.

        ``longest``: the longest interval between two wake-ups (``Publisher``'s
        ``max_wake_interval``).
        """
        if self.wake is not None:
            return  # a wake-up is due: it brings this change too
        if self.followers < 2:
            self.wake_now()  # one follower costs little: it sees each change at once
            return
        # Each wake-up costs every follower a turn of the event loop (and a server a write
        # per client): waking 100 SSE clients per fragment of a model writing every 5 ms took
        # more than those 5 ms, so a run slowed with its audience (benchmarks/stream_fanout).
        took = max(self.took, self.took_round)
        interval = wake_interval(followers=self.followers, took=took, longest=longest)
        loop = asyncio.get_running_loop()
        due = self.woken + interval - loop.time()
        if due > 0:
            self.wake = loop.call_later(due, self.wake_now)
        else:
            self.wake_now()

    def wake_now(self) -> None:
        """Wake every waiting follower (a round of wake-ups)."""
        self.wake = None
        if self.took_round:
            self.took = (self.took + self.took_round) / 2
        self.took_round = 0.0
        self.round += 1
        self.woken = asyncio.get_running_loop().time()
        waiters = self.take_waiters()
        if waiters:
            release(waiters, 0, self.round)

    def take_waiters(self) -> list[tuple[asyncio.Future[int | None], float]]:
        """The waiting followers, to be woken (see ``release``): none waits after this."""
        waiters, self.waiters = self.waiters, []
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        return waiters

    def _expire(self) -> None:
        """Followers whose time is up stop waiting (``None``); the others wait on."""
        loop = asyncio.get_running_loop()
        self.expiry = None
        soon = loop.time() + _EXPIRY_SLACK  # the loop runs timers this much early
        waiting = []
        for future, deadline in self.waiters:
            if deadline <= soon:
                _settle(future, None)
            elif not future.done():
                waiting.append((future, deadline))
        self.waiters = waiting
        if waiting:
            self.expiry = loop.call_at(min(d for _, d in waiting), self._expire)


def _settle(future: asyncio.Future[int | None], value: int | None) -> None:
    if not future.done():
        future.set_result(value)


def release(waiters: list[tuple[asyncio.Future[int | None], float]], start: int, woke: int) -> None:
    """Wake ``waiters`` from ``start`` (with ``woke``), a batch per turn of the loop."""
    end = start + _WAKE_BATCH
    for future, _ in waiters[start:end]:
        _settle(future, woke)
    if end < len(waiters):
        asyncio.get_running_loop().call_soon(release, waiters, end, woke)


async def subscribed_first(subscribed: asyncio.Future[None], task: asyncio.Task[None]) -> bool:
    """Whether the feed's reader got as far as subscribing (false: it was cancelled first)."""
    if not subscribed.done():
        await asyncio.wait((subscribed, task), return_when=asyncio.FIRST_COMPLETED)
    return subscribed.done() and not subscribed.cancelled() and not task.cancelled()
