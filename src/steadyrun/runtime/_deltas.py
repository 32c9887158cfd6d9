"""A model call that streams its fragments to the observers while it runs (issue 21).

Fragments are not journaled: the step saved after the response is the safe point, and a crash
mid-stream re-asks the model on resume. The response handed on is the accumulation of the
deltas (``chat.ResponseAccumulator``), which the ``StreamingModelClient`` contract makes equal
to what ``respond`` would have returned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from steadyrun.chat import ModelRequest, ModelResponse, ResponseAccumulator, ResponseDelta
from steadyrun.models import ModelClient, StreamingModelClient

__all__ = ["DeltaSink", "call_client"]

DeltaSink = Callable[[ResponseDelta], Awaitable[None]]
"""Takes one fragment of the running call (the observers' ``on_model_delta``)."""


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

    Returns:
        The response: the accumulated deltas when streamed.
    """
    if sink is None or not isinstance(client, StreamingModelClient):
        return await client.respond(request)
    acc = ResponseAccumulator()
    async for delta in client.stream(request):
        acc.add(delta)
        # The finish delta carries nothing to display; the response (and its usage) follows.
        if delta.part != "finish" and (delta.text or delta.arguments or delta.name):
            await sink(delta)
    return acc.response()
