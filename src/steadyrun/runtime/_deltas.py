"""A model call that streams its fragments to the observers while it runs (issue 21).

Fragments are not journaled: the step saved after the response is the safe point, and a crash
mid-stream re-asks the model on resume. The response handed on is the accumulation of the
deltas (``chat.ResponseAccumulator``), which the ``StreamingModelClient`` contract makes equal
to what ``respond`` would have returned.

The stream is read at the model's pace whatever the listeners do: fragments go to them
through a ``_Pump``, a task of its own, and while a listener is still busy with one fragment the
next ones of the same part are joined into one. So a slow observer sees fewer, longer
fragments, never a held-up provider stream (which could time out), and memory stays bounded by
the number of parts. The call returns after the pump delivered everything, so the listeners
see every fragment before the response.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace

from steadyrun.chat import ModelRequest, ModelResponse, ResponseAccumulator, ResponseDelta
from steadyrun.models import ModelClient, StreamingModelClient

__all__ = ["DeltaSink", "call_client"]

DeltaSink = Callable[[ResponseDelta], Awaitable[None]]
"""Takes one fragment of the running call (the observers' ``on_model_delta``)."""


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


class _Pump:
    """Hands fragments to ``sink`` in a task, joining those that wait (see the module)."""

    def __init__(self, sink: DeltaSink) -> None:
        self._sink = sink
        self._waiting: deque[ResponseDelta] = deque()
        self._more = asyncio.Event()
        self._closed = False
        self._task = asyncio.ensure_future(self._deliver())

    def put(self, delta: ResponseDelta) -> None:
        last = self._waiting[-1] if self._waiting else None
        if last is not None and (last.part, last.index) == (delta.part, delta.index):
            self._waiting[-1] = _join(last, delta)
        else:
            self._waiting.append(delta)
        self._more.set()

    async def _deliver(self) -> None:
        while True:
            while self._waiting:
                await self._sink(self._waiting.popleft())
            if self._closed:
                return
            self._more.clear()  # no await since the check above: nothing slipped in between
            await self._more.wait()

    async def drain(self) -> None:
        """Deliver what waits, then stop."""
        self._closed = True
        self._more.set()
        await self._task

    async def stop(self) -> None:
        """Drop what waits (the call failed or was cancelled) and stop."""
        if not self._task.done():
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
    if sink is None or not isinstance(client, StreamingModelClient):
        return await client.respond(request)
    acc = ResponseAccumulator()
    pump = _Pump(sink)
    try:
        async for delta in client.stream(request):
            acc.add(delta)
            # The finish delta carries nothing to display; the response (and usage) follows.
            if delta.part != "finish" and (delta.text or delta.arguments or delta.name):
                pump.put(delta)
                # A client that yields without awaiting would otherwise starve the pump until
                # its end, and its listeners would get the text in one piece.
                await asyncio.sleep(0)
        response = acc.response()
        await pump.drain()
    finally:
        await pump.stop()
    return response
