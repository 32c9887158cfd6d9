"""The owner's side of the live feed: what an executing run does, told to followers elsewhere.

A ``LiveBroadcaster`` is an observer the runtime adds when its store has a live feed (see
``steadyrun.stores._live``). It sends the model's fragments as they come and a short note after
each step of the run, so a display in another process shows the words as they are written and
reloads the run as soon as something is saved. It sends nothing while nobody follows, and the
model is streamed for it only then (``wants_now``, per run): a run nobody watches pays nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta
from steadyrun.records import CallRecord
from steadyrun.runtime._observers import RUN_CALLBACKS, Observer
from steadyrun.stores._live import LiveFeed

__all__ = ["LiveBroadcaster"]

log = logging.getLogger("steadyrun.live")


class LiveBroadcaster(Observer):
    """Publishes a run's progress on its store's live feed (see the module)."""

    # Every method only reads what it is given, and sends it on as text at once.
    shares = RUN_CALLBACKS | {"on_publish"}

    def __init__(self, feed: LiveFeed) -> None:
        self.feed = feed

    def wants_now(self, run_id: str) -> bool:
        """Whether anyone may follow the run now (so the model is streamed for this observer).

        A follower of another run in this process does not count: the runs executing here
        that nobody follows send nothing while it reads.
        """
        return self.feed.follows(run_id)

    async def _send(self, run_id: str, kind: str, **fields: Any) -> None:
        if not self.feed.follows(run_id):
            return
        try:
            await self.feed.publish({"run": run_id, "t": kind, **fields})
        except Exception:  # a display must never break a run
            log.debug("live message of run %r not sent", run_id, exc_info=True)

    async def on_run_start(self, run_id: str, agent: str) -> None:
        """An execution starts: followers drop fragments of any earlier one."""
        await self._send(run_id, "start", agent=agent)

    async def on_run_end(self, run_id: str, status: str, error: str | None = None) -> None:
        """The execution ended: followers reload the run."""
        await self._send(run_id, "end", status=status)

    async def on_model_request(
        self, run_id: str, model_call_id: str, request: ModelRequest
    ) -> None:
        """A model call starts (again, after a crash): its earlier fragments are void."""
        await self._send(run_id, "call", mc=model_call_id)

    async def on_model_delta(self, run_id: str, model_call_id: str, delta: ResponseDelta) -> None:
        """One fragment of the model's text, thinking or a tool call's arguments."""
        await self._send(
            run_id,
            "frag",
            mc=model_call_id,
            part=delta.part,
            index=delta.index,
            text=delta.text or delta.arguments,
            name=delta.name,
        )

    async def on_model_response(
        self, run_id: str, model_call_id: str, response: ModelResponse
    ) -> None:
        """The model call returned: its step is saved next."""
        await self._send(run_id, "resp", mc=model_call_id)

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        """A call's start was saved."""
        await self._send(run_id, "saved")

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        """A call's outcome was saved."""
        await self._send(run_id, "saved")

    async def on_publish(self, run_id: str, name: str, value: Any) -> None:
        """An extension's published value changed (the plan, say)."""
        await self._send(run_id, "saved")
