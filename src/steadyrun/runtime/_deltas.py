"""A model call that streams its fragments to the observers while it runs (issue 21).

Fragments are not journaled: the step saved after the response is the safe point, and a crash
mid-stream re-asks the model on resume. The response handed on is the accumulation of the
deltas (``chat.ResponseAccumulator``), which the ``StreamingModelClient`` contract makes equal
to what ``respond`` would have returned.

The stream is read at the model's pace whatever the listeners do. A fragment is handed to
the listeners in place, in the run's own task, as it is read; a delivery that has to wait (an
observer that awaits something) goes on in a task of its own (``_Pump``), and while it does
the next fragments of the same part are joined into one and follow it. So a slow observer
sees fewer, longer fragments, never a held-up provider stream (which could time out), and
memory stays bounded by the number of parts. The call returns after everything was
delivered, so the listeners see every fragment before the response. Handing every fragment
to a task (a turn of the loop, an event and a task switch each) cost a service streaming
many runs about 20 us a fragment, when listeners that keep up (the display publisher of
runs nobody follows, say) never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from dataclasses import replace
from typing import Any

from steadyrun.chat import ModelRequest, ModelResponse, ResponseAccumulator, ResponseDelta
from steadyrun.models import ModelClient
from steadyrun.models._client import can_stream

__all__ = ["DeltaSink", "call_client"]

DeltaSink = Callable[[ResponseDelta], Coroutine[Any, Any, None]]
"""Takes one fragment of the running call (the observers' ``on_model_delta``): a coroutine
function, whose coroutine the pump may start in place."""


def _join(first: ResponseDelta, then: ResponseDelta) -> ResponseDelta:
    """Two fragments of one part as one (their concatenation; later markers win)."""
    details = first.provider_details
    if then.provider_details is not None:
        details = {**(details or {}), **then.provider_details}
    return replace(
        first,
        text=first.text + then.text,
        arguments=first.arguments + then.arguments,
        signature=then.signature or first.signature,
        call_id=first.call_id or then.call_id,
        name=first.name or then.name,
        provider_details=details,
    )


class _Resumed:
    """Awaiting it goes on with ``coro``, which was started and waits for ``first``.

    So a delivery begun in place (``coro.send(None)``) and found waiting continues in a task
    (the task waits for what the coroutine waits for, and passes on what it is sent or
    thrown), as ``await coro`` would have gone on had the task started it.
    """

    def __init__(self, coro: Coroutine[Any, Any, None], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, None]:
        coro, waiting = self._coro, self._first
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # cancelled (or thrown into) while it waits
                try:
                    waiting = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration:
                    return


class _Pump:
    """Hands fragments to ``sink``: in place while it keeps up, else in a task (see the module)."""

    def __init__(self, sink: DeltaSink) -> None:
        self._sink = sink
        self._waiting: deque[ResponseDelta] = deque()
        self._task: asyncio.Future[None] | None = None  # a delivery that had to wait

    @property
    def behind(self) -> bool:
        """Whether a delivery is still going on in its task (fragments queue behind it)."""
        return self._task is not None and not self._task.done()

    def put(self, delta: ResponseDelta) -> None:
        task = self._task
        if task is None or task.done():  # not behind
            coro = self._sink(delta)
            try:
                first = coro.send(None)  # in place, up to its first wait, if any
            except StopIteration:
                return  # delivered
            self._task = asyncio.ensure_future(self._catch_up(coro, first))
            return
        last = self._waiting[-1] if self._waiting else None
        if last is not None and (last.part, last.index) == (delta.part, delta.index):
            self._waiting[-1] = _join(last, delta)
        else:
            self._waiting.append(delta)

    async def _catch_up(self, coro: Coroutine[Any, Any, None], first: Any) -> None:
        await _Resumed(coro, first)
        while self._waiting:
            await self._sink(self._waiting.popleft())

    async def drain(self) -> None:
        """Deliver what waits."""
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        """Drop what waits (the call failed or was cancelled) and stop."""
        self._waiting.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def call_client(
    client: ModelClient, request: ModelRequest, sink: DeltaSink | None
) -> ModelResponse:
    """Ask ``client``: by streaming, fragment by fragment into ``sink``, when both can.

    Without a sink nobody listens, so the client's ``respond`` is used as before: a run with
    no delta listener calls its model exactly as it did before streaming existed.

    Args:
        client: The agent's model.
        request: The request.
        sink: Where each text, thinking and tool-call-argument fragment goes; ``None``: none.
            It must not raise (``ObserverSet.emit`` does not).

    Returns:
        The response: the accumulated deltas when streamed.
    """
    if sink is None or not can_stream(client):
        return await client.respond(request)
    acc = ResponseAccumulator()
    pump = _Pump(sink)
    try:
        async for delta in client.stream(request):
            acc.add(delta)
            # The finish delta carries nothing to display; the response (and usage) follows.
            if delta.part != "finish" and (delta.text or delta.arguments or delta.name):
                pump.put(delta)
                if pump.behind:
                    # A client that yields without awaiting would otherwise starve the waiting
                    # delivery until its end, and its listeners would get the rest in one piece.
                    await asyncio.sleep(0)
        response = acc.response()
        await pump.drain()
    finally:
        await pump.stop()
    return response
