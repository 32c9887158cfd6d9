"""A writer agent whose fake model streams its answer slowly (tests of live streaming).

Its first model call asks for a ``pause`` tool (time for a follower to join: an owner streams
a model call only when somebody follows as it starts); the second writes ``count`` words,
``delay`` seconds apart: ``w0 w1 ...``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage, deltas_of
from steadyrun.testing import text, tool_calls


def words(count: int) -> list[str]:
    """The answer's fragments: ``w0 w1 ...``."""
    return [f"w{i} " for i in range(count)]


class SlowStreamingModel:
    """A fake streaming model (tests only); ``produced`` holds each word's wall-clock time."""

    def __init__(self, count: int, delay: float, pause: float) -> None:
        self.count, self.delay, self.pause = count, delay, pause
        self.produced: list[float] = []

    def _paused(self, request: ModelRequest) -> bool:
        return any(m.role == "tool" for m in request.messages)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if not self._paused(request):
            return tool_calls(("pause", {"seconds": self.pause}))
        return text("".join(words(self.count)))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        if not self._paused(request):
            for delta in deltas_of(await self.respond(request)):
                yield delta
            return
        for i, word in enumerate(words(self.count)):
            if i == 0:
                print("streaming", flush=True)
            self.produced.append(time.time())
            yield ResponseDelta(part="text", index=0, text=word)
            await asyncio.sleep(self.delay)
        yield ResponseDelta(part="finish", finish_reason="stop", usage=Usage(output_tokens=1))


@sr.tool(side_effects=False)
async def pause(seconds: float) -> str:
    """Wait a moment.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return "ok"


def writer_agent(count: int, delay: float, pause_s: float, name: str = "writer") -> sr.Agent:
    """The writer agent (see the module)."""
    return sr.Agent(name=name, model=SlowStreamingModel(count, delay, pause_s), tools=[pause])


async def until(check: Callable[[], bool], within: float = 20.0) -> None:
    """Poll ``check`` until it holds (every 2 ms, for at most ``within`` seconds)."""
    for _ in range(int(within / 0.002)):
        if check():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("not reached in time")
