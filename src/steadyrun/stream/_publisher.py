"""The publisher: turns what runs do into numbered deltas, and serves them to followers.

It is an ``Observer`` (register it with the runtime) that keeps, per run, the current display
snapshot and a bounded buffer of its last deltas. Tool starts and settlements and plan changes
become deltas at once; everything else (new blocks, usage, the run's status) comes from the
store: the publisher reloads the run once a model response is saved (at the next callback:
the calls' start, the next model call, the end) and when an execution starts or ends
(``on_run_start`` / ``on_run_end``, or ``run_started`` / ``run_ended``), and diffs.

While nobody follows a run executing here, what would need a reload only marks its snapshot
stale, also when the execution ends (``on_run_end``): the reload comes when the snapshot is
read or followed. A service executing many runs that nobody watches so reads none of them
for its displays, where it read each at every model response and call.

A run that does not execute in this process (another worker's, say) is not watched by any
callback here: its snapshot is reloaded from the store whenever it is read (``snapshot``) and
every ``poll_interval`` while followed, so no reader sees it as it was long ago.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from steadyrun._codec import to_plain
from steadyrun._errors import RunNotFoundError
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta
from steadyrun.records import CallRecord
from steadyrun.records._copy import copied
from steadyrun.runtime import Observer
from steadyrun.runtime._observers import RUN_CALLBACKS
from steadyrun.stores import Store
from steadyrun.stores._live import LiveFeed
from steadyrun.stores._live_open import live_feed
from steadyrun.stream._channel import Channel, StreamEvent, subscribed_first
from steadyrun.stream._diff import diff, display_call, display_from_run, pending_items
from steadyrun.stream._live import LiveCall, add_fragment, stored_end, with_live, without_live
from steadyrun.stream._model import DisplaySnapshot

__all__ = ["Publisher", "StreamEvent"]

log = logging.getLogger("steadyrun.stream")


class Publisher(Observer):
    """Display streams of runs, kept in memory for followers that join late.

    Args:
        store: Where runs are loaded from.
        buffer_size: Deltas kept per run for followers resuming after a disconnect.
        max_wake_interval: Two or more followers of a run are woken at most every 0.25 ms per
            follower, and far enough apart that taking the wake-ups (their reading, a server's
            writes to its clients) is at most a twentieth of the event loop that also executes
            the run (``steadyrun.stream._pacing``), but never less often than every this many
            seconds; the changes in between come to them together (fragments joined), and a
            change after a quiet moment wakes them at once. Followers at one position share
            their events (one encoding for all), and are woken a batch per turn of the loop.
        max_idle: Runs kept in memory that are neither executing here nor followed; the least
            recently changed beyond that are dropped (and rebuilt from the store on demand),
            a quarter of the bound at a time.
        strict_settlement: Returns whether a run's agent (by name) settles strictly, which
            makes calls needing review block the run.

    Example:
        ``publisher = Publisher(store); runtime = Runtime(store, observers=[publisher])``
    """

    # Callbacks that keep nothing of what they are given (a fragment's text is a new string
    # in the display): they share the runtime's objects, no copy made (``Observer.shares``).
    # The tool callbacks keep the call's arguments in the display: they copy the record
    # themselves, and only for a run somebody follows (a copy per call of every run was 3% of
    # a service's CPU a run).
    shares = RUN_CALLBACKS

    def __init__(
        self,
        store: Store,
        *,
        buffer_size: int = 1000,
        max_wake_interval: float = 0.25,
        max_idle: int = 200,
        strict_settlement: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.buffer_size = buffer_size
        self.max_wake_interval = max_wake_interval
        self.max_idle = max_idle
        self._strict = strict_settlement or (lambda agent: False)
        self._channels: dict[str, Channel] = {}
        self._evict_skip = 0  # calls of _evict that cannot pass max_idle (see there)
        self._clock = 0
        self._tasks: set[asyncio.Task[None]] = set()

    # -- reading -----------------------------------------------------------------------------

    def current(self, run_id: str) -> DisplaySnapshot | None:
        """The snapshot held in memory for ``run_id``, or ``None``."""
        channel = self._channels.get(run_id)
        return channel.snapshot if channel is not None else None

    async def snapshot(self, run_id: str) -> DisplaySnapshot:
        """The current snapshot of a run.

        A run executing in this process is as the callbacks left it; any other run is
        reloaded from the store (another process may have executed it since).

        Raises:
            RunNotFoundError: The run is neither in memory nor in the store.
        """
        channel = self._channels.get(run_id)
        if channel is None:
            return (await self._open(run_id)).snapshot
        if not channel.active or channel.stale:
            await self._refresh(channel, run_id)
        return channel.snapshot

    async def follow(
        self, run_id: str, last_event_id: str | None = None, *, poll_interval: float = 2.0
    ) -> AsyncIterator[StreamEvent]:
        """Events of a run, forever: a snapshot or catch-up deltas, then each new delta.

        With ``last_event_id`` (an event's ``id``) the deltas after it are replayed when the
        buffer still holds them; otherwise a snapshot comes first (also for a follower that
        falls behind the buffer). Runs not executing in this process (another worker's, say)
        are reloaded from the store every ``poll_interval`` seconds while followed; a
        ``keepalive`` event follows each quiet interval.

        Raises:
            RunNotFoundError: The run is neither in memory nor in the store.
        """
        known = run_id in self._channels
        channel = await self._open(run_id)
        channel.followers += 1
        listening = self._listen(channel, run_id)
        try:
            # Stale: changed in the store since the snapshot. Kept while nobody listened (a
            # start's placeholder, say): another process may have saved since, and no note
            # reached it. Refreshed once subscribed (a new subscription: what was saved before
            # it came no note of): none lost, one load.
            subscribed = listening is not None and await listening
            if channel.stale or (
                not channel.active and (subscribed or (known and channel.followers == 1))
            ):
                await self._refresh(channel, run_id)
            seq = -1
            if last_event_id:
                epoch, _, number = last_event_id.partition(".")
                if epoch == channel.epoch and number.isdigit():
                    seq = int(number)
            woke = -1
            while True:
                events = channel.events(seq) if seq >= 0 else None
                if events is None:
                    seq = channel.snapshot.seq
                    yield channel.snapshot_event()
                    continue
                for seq, event in events:  # noqa: B007 (seq is where the follower is)
                    yield event
                if events:
                    continue
                # Nothing new: wait, with no await since the look, so no change is missed.
                got = await channel.wait(poll_interval, woke)
                if got is not None:
                    woke = got
                    continue
                woke = -1  # back from a quiet interval, not from taking a wake-up
                if not channel.active:
                    await self._refresh(channel, run_id)
                if channel.snapshot.seq == seq:
                    yield StreamEvent(kind="keepalive", id=channel.event_id(seq))
        finally:
            channel.followers -= 1
            if channel.followers == 0:
                self._unlisten(channel)
            self._evict()

    # -- publishing --------------------------------------------------------------------------

    async def refresh(self, run_id: str) -> DisplaySnapshot:
        """Reload the run from the store and publish what changed.

        Raises:
            RunNotFoundError: The run is neither in memory nor in the store.
        """
        channel = await self._open(run_id)
        await self._refresh(channel, run_id)
        return channel.snapshot

    async def expect(self, run_id: str, agent: str, *, stored: bool = True) -> None:
        """A run was started but no worker executed it yet: show it (``running``) meanwhile.

        Without this a follower asking right after the start would get a 404, the store
        having nothing of the run but its first input. ``stored=False`` says the caller just
        found the run not stored (a new start): it is not looked up again.
        """
        if run_id in self._channels:
            return
        snap = await self.store.load(run_id) if stored else None
        if snap is None:
            first = DisplaySnapshot(run_id=run_id, agent=agent)
        else:
            first = display_from_run(snap, strict_settlement=self._strict(snap.run.agent))
        self._channels.setdefault(run_id, Channel(first, self.buffer_size))
        self._clock += 1
        self._channels[run_id].touched = self._clock
        self._evict()

    async def run_started(self, run_id: str, agent: str) -> None:
        """A run begins executing in this process: it shows as ``running`` until it ends."""
        channel = self._channels.get(run_id)
        if channel is None:
            snap = await self.store.load(run_id)
            if snap is None:
                first = DisplaySnapshot(run_id=run_id, agent=agent)
            else:
                first = display_from_run(snap, strict_settlement=self._strict(snap.run.agent))
            channel = self._channels.setdefault(run_id, Channel(first, self.buffer_size))
        channel.active = True
        channel.live = None  # an earlier execution's streaming call, if any, was lost
        channel.held.clear()
        self._unlisten(channel)  # this process's callbacks show it now
        async with channel.lock:
            shown = without_live(channel.snapshot)
            self._publish(channel, copied(shown, status="running"))

    async def run_ended(self, run_id: str) -> None:
        """A run stopped executing in this process (completed, suspended, failed or crashed)."""
        channel = self._channels.get(run_id)
        if channel is None:
            return
        channel.active = False
        channel.live = None
        channel.held.clear()  # fragments nobody saw: the saved response stands for them
        # Another process may execute it next: listen, and reload once subscribed (what it
        # saved before the subscription came no note of).
        listening = self._listen(channel, run_id) if channel.followers else None
        try:
            if listening is not None:
                await listening
            await self._refresh(channel, run_id)
        finally:
            self._evict()

    async def wait_idle(self) -> None:
        """Wait for the reloads scheduled by observer callbacks (tests use it).

        A reload still due after a model response (``on_model_response``) is made now.
        """
        for run_id, channel in list(self._channels.items()):
            if channel.due is not None:
                channel.undue()
                self._reload_later(run_id)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- Observer ----------------------------------------------------------------------------

    async def on_run_start(self, run_id: str, agent: str) -> None:
        """An execution of the run starts in this process: ``run_started``."""
        try:
            await self.run_started(run_id, agent)
        except Exception:  # a display must never break a run
            log.exception("display stream of run %r could not start", run_id)

    async def on_run_end(self, run_id: str, status: str, error: str | None = None) -> None:
        """The execution ended: ``run_ended``, or only marked stale when nobody follows it.

        A run not executing here is reloaded whenever it is read or followed, so reloading
        one nobody follows as its execution ends (while its claim is still held) was work
        for no one: a read of the whole run per execution.
        """
        channel = self._channels.get(run_id)
        if channel is not None and channel.followers == 0:
            channel.active = False
            channel.live = None
            channel.held.clear()
            channel.stale = True
            channel.undue()  # reloaded when read
            self._clock += 1
            channel.touched = self._clock  # it changed now: the last to be dropped
            self._evict()
            return
        try:
            await self.run_ended(run_id)
        except Exception:  # a display must never break a run
            log.exception("display stream of run %r could not reload it", run_id)

    async def on_model_request(
        self, run_id: str, model_call_id: str, request: ModelRequest
    ) -> None:
        """A model call starts: live blocks of an earlier attempt of it are dropped.

        The response before it is saved by now: shown first (``on_model_response``).
        """
        await self._live_event(run_id, {"t": "call", "mc": model_call_id})

    def on_model_delta(
        self, run_id: str, model_call_id: str, delta: ResponseDelta
    ) -> Awaitable[None] | None:
        """A fragment of the streaming call: its live block grows.

        Of a run nobody follows the fragment is held in place (see ``Channel.held``), nothing
        to await: a coroutine and its awaits per fragment were most of what a fragment cost a
        service executing many runs that nobody watches.
        """
        channel = self._channels.get(run_id)
        if channel is None:
            return None  # nobody shows this run here: a follower's first snapshot will
        text = delta.text or delta.arguments
        if channel.unwatched():
            channel.hold_fragment(model_call_id, delta.part, delta.index, text, delta.name)
            return None
        message = {
            "t": "frag",
            "mc": model_call_id,
            "part": delta.part,
            "index": delta.index,
            "text": text,
            "name": delta.name,
        }
        return self._live_event(run_id, message)

    def on_model_response(self, run_id: str, model_call_id: str, response: ModelResponse) -> None:
        """Reload the run once its response is saved (its new blocks, calls and usage).

        The runtime saves the response's step right after this, then starts its calls, asks
        the model again or ends the run: the reload comes with the first of those callbacks
        (reloading at once read the run before the save as often as not), or after
        ``max_wake_interval`` when none comes (a slow observer before this one, say).
        """
        channel = self._channels.get(run_id)
        if channel is not None and channel.held:
            channel.held.append({"t": "resp"})  # applies after what is held
        elif channel is not None and channel.live is not None:
            channel.live.open = False
        if channel is None or channel.unwatched():
            return  # nobody reads it now: reloaded when somebody does, or when it ends
        self._mark_due(channel, run_id)

    def _mark_due(self, channel: Channel, run_id: str) -> None:
        """A response is being saved: reload at the next callback, or after the interval."""
        if channel.due is None:
            loop = asyncio.get_running_loop()
            channel.due = loop.call_later(self.max_wake_interval, self._reload_later, run_id)

    def _reload_later(self, run_id: str) -> None:
        """Reload the run in a task of its own (tracked for ``wait_idle``)."""
        task = asyncio.get_running_loop().create_task(self._later(run_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        """Publish the call's new status."""
        await self._call_changed(run_id, call)

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        """Publish the call's new status."""
        await self._call_changed(run_id, call)

    async def on_publish(self, run_id: str, name: str, value: Any) -> None:
        """Publish the plan when the ``planning`` extension changed it."""
        if name != "planning":
            return
        channel = await self._open(run_id)
        async with channel.lock:
            plan = to_plain(value) if value is not None else None
            self._publish(channel, copied(channel.snapshot, plan=plan))

    # -- live --------------------------------------------------------------------------------

    async def _live_event(self, run_id: str, message: dict[str, Any]) -> None:
        """Apply a live message (from this process's runtime, or another's over the feed)."""
        try:
            channel = self._channels.get(run_id)
            if channel is None:
                return  # nobody shows this run here: a follower's first snapshot will
            await self._apply_live(channel, run_id, message)
        except Exception:  # a display must never break a run
            log.exception("display stream of run %r could not show a live message", run_id)

    async def _apply_live(self, channel: Channel, run_id: str, message: dict[str, Any]) -> None:
        kind = message.get("t")
        mc = message.get("mc")
        if kind in ("call", "frag") and isinstance(mc, str):
            if channel.unwatched():
                # Nobody reads it now: applied when somebody does (``_refresh``), dropped when
                # the execution ends unseen. Each fragment applied and diffed at once cost a
                # service executing many runs nobody follows most of its time per fragment.
                channel.hold(message)
                return
            if kind == "call" and channel.due is not None:
                await self._refresh(channel, run_id)  # the response before it is saved by now
            async with channel.lock:
                snap = self._live_applied(channel, channel.snapshot, message)
                self._publish(channel, snap)
            return
        if kind == "resp":
            # Another process's response: it saves the step after this note, and its next
            # note (a call's start, the next model call, the end) comes after that save.
            if channel.live is not None:
                channel.live.open = False
            self._mark_due(channel, run_id)
            return
        if kind in ("start", "end", "gap"):
            channel.live = None  # an execution began or ended: no call streams now
            async with channel.lock:
                self._publish(channel, without_live(channel.snapshot))
        if kind in ("saved", "start", "end", "gap"):
            await self._refresh(channel, run_id)

    @staticmethod
    def _live_applied(
        channel: Channel, snap: DisplaySnapshot, message: dict[str, Any]
    ) -> DisplaySnapshot:
        """``snap`` with a model call's start or fragment applied (``channel.live`` follows)."""
        kind, mc = message.get("t"), message.get("mc")
        if kind == "resp":  # held by ``on_model_response``: no more fragments of the call
            if channel.live is not None:
                channel.live.open = False
            return snap
        if not isinstance(mc, str):
            return snap
        if channel.live is None or channel.live.model_call_id != mc or kind == "call":
            snap = without_live(snap)
            channel.live = LiveCall(model_call_id=mc, base=stored_end(snap))
        if kind == "frag":
            snap = add_fragment(
                snap,
                channel.live,
                part=str(message.get("part", "")),
                index=int(message.get("index", 0) or 0),
                text=str(message.get("text") or ""),
                name=message.get("name") if isinstance(message.get("name"), str) else None,
            )
        return snap

    def _catch_up(self, channel: Channel) -> None:
        """Apply the live messages held while nobody read the run (one diff for them all)."""
        if not channel.held:
            return
        held = channel.take_held()
        snap = channel.snapshot
        for message in held:
            snap = self._live_applied(channel, snap, message)
        self._publish(channel, snap)

    def _listen(self, channel: Channel, run_id: str) -> Awaitable[bool] | None:
        """Follow the run's messages on the store's live feed while anyone follows it here.

        Not while it executes here: this process's callbacks show it, and a subscription would
        have its owner send (and this process decode) every fragment only to ignore it.

        Returns, for a new subscription, what to await before reloading the run: true once
        the reader subscribed (or failed to: followers then rely on the poll), false when it
        was cancelled first (the run began executing here, or nobody follows it now). The
        caller reloads (what was saved before the subscription came no note of); the feed's
        reader does not reload it again.
        """
        feed = live_feed(self.store)
        if feed is None or channel.feed_task is not None or channel.active:
            return None
        loop = asyncio.get_running_loop()
        subscribed: asyncio.Future[None] = loop.create_future()
        task = loop.create_task(self._read_feed(feed, channel, run_id, subscribed))
        channel.feed_task = task
        return subscribed_first(subscribed, task)

    @staticmethod
    def _unlisten(channel: Channel) -> None:
        if channel.feed_task is not None:
            channel.feed_task.cancel()
            channel.feed_task = None

    async def _read_feed(
        self, feed: LiveFeed, channel: Channel, run_id: str, subscribed: asyncio.Future[None]
    ) -> None:
        try:
            sub = await feed.subscribe(run_id)
        finally:
            # What was saved before this is reloaded by whoever listened (``_listen``).
            if not subscribed.done():
                subscribed.set_result(None)
        try:
            while True:
                message = await sub.get()
                if channel.active:
                    continue  # executing here: this process's callbacks already show it
                await self._apply_live(channel, run_id, message)
        except asyncio.CancelledError:
            raise
        except Exception:  # a display must never break: followers fall back to polling
            log.exception("live feed of run %r stopped", run_id)
        finally:
            sub.close()

    # -- inside --------------------------------------------------------------------------------

    async def _later(self, run_id: str) -> None:
        await asyncio.sleep(0)
        try:
            await self.refresh(run_id)
        except Exception:  # a display must never break a run
            log.exception("display stream of run %r could not reload it", run_id)

    async def _call_changed(self, run_id: str, record: CallRecord) -> None:
        channel = self._channels.get(run_id)
        if channel is None or channel.unwatched():
            return  # nobody reads it now: reloaded when somebody does, or when it ends
        record = copy.deepcopy(record)  # shared with the runtime (``shares``); kept here
        shown = display_call(record)
        async with channel.lock:
            snap = channel.snapshot
            waits = pending_items([record], strict_settlement=self._strict(snap.agent))
            known = snap.call(record.id) is not None
            if known:
                calls = tuple(shown if c.id == record.id else c for c in snap.calls)
                pending = snap.pending
                if not waits:
                    pending = tuple(p for p in pending if p.call_id != record.id)
                self._publish(channel, copied(snap, calls=calls, pending=pending))
        if not known or waits or channel.due is not None:
            # A call's first sight (with its block), what it waits for, and the response that
            # asked for it (saved by now: ``on_model_response``) come from the store.
            await self._refresh(channel, run_id)

    async def _open(self, run_id: str) -> Channel:
        channel = self._channels.get(run_id)
        if channel is not None:
            return channel
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        first = display_from_run(snap, strict_settlement=self._strict(snap.run.agent))
        channel = self._channels.setdefault(run_id, Channel(first, self.buffer_size))
        self._clock += 1
        channel.touched = self._clock
        self._evict()
        return channel

    async def _refresh(self, channel: Channel, run_id: str) -> None:
        channel.undue()  # this reload shows a response saved before it
        async with channel.lock:
            channel.stale = False  # a change from now on marks it again
            self._catch_up(channel)
            snap = await self.store.load(run_id)
            if snap is None:
                return
            now = display_from_run(snap, strict_settlement=self._strict(snap.run.agent))
            if channel.active:
                now = copied(now, status="running", text=None, error=None)
            live = channel.live
            if live is not None and live.replaced_by(now):
                channel.live = None  # the saved response takes the live blocks' place
            elif live is not None:
                now = with_live(now, channel.snapshot)
            self._publish(channel, now)

    def _publish(self, channel: Channel, target: DisplaySnapshot) -> None:
        deltas = diff(channel.snapshot, target)
        if not deltas:
            return
        snapshot = target.normalized()
        channel.snapshot = copied(snapshot, seq=deltas[-1].seq)
        channel.deltas.extend(deltas)
        channel.changed()
        self._clock += 1
        channel.touched = self._clock
        channel.wake_followers(self.max_wake_interval)

    def _evict(self) -> None:
        # Called where one channel may have turned idle (a run's end, a follower gone, a new
        # channel): each call adds at most one idle channel. A look visits every channel,
        # executing ones included (a thousand in a busy service), so after a look that left
        # ``kept`` idle the next ``max_idle - kept`` calls cannot pass the bound and skip it;
        # and a look that must drop some drops a quarter of the bound more, so the looks come
        # at most every quarter of it.
        if self._evict_skip > 0:
            self._evict_skip -= 1
            return
        idle = [
            (c.touched, run_id)
            for run_id, c in self._channels.items()
            if not c.active and c.followers == 0
        ]
        keep = len(idle)
        if keep > self.max_idle:
            keep = self.max_idle - self.max_idle // 4
            idle.sort()
            for _, run_id in idle[: len(idle) - keep]:
                del self._channels[run_id]
        self._evict_skip = self.max_idle - keep
