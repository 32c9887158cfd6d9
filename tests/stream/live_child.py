"""A process that executes one run whose model streams slowly, for followers elsewhere.

``python live_child.py <store url> <run id> <fragments> <delay s> [<pause s>]``: starts (or
resumes) the run on the store with a fake model that first calls a tool that pauses ``<pause>``
seconds (time for a follower to join: an owner streams a model call only when somebody follows
as it starts), then writes ``<fragments>`` words of text, ``<delay>`` seconds apart. Prints
``streaming`` when the first word is written and ``done <status>`` at the end, so a test can
SIGKILL it mid-stream.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import steadyrun as sr
from steadyrun._cli_target import open_store
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage, deltas_of
from steadyrun.testing import text, tool_calls


def words(count: int) -> list[str]:
    """The answer's fragments: ``w0 w1 ...``."""
    return [f"w{i} " for i in range(count)]


class SlowStreamingModel:
    """A fake streaming model (tests only): the answer word by word, ``delay`` apart."""

    def __init__(self, count: int, delay: float, wait: float) -> None:
        self.count, self.delay, self.wait = count, delay, wait

    def _paused(self, request: ModelRequest) -> bool:
        return any(m.role == "tool" for m in request.messages)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if not self._paused(request):
            return tool_calls(("pause", {"seconds": self.wait}))
        return text("".join(words(self.count)))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        if not self._paused(request):
            for delta in deltas_of(await self.respond(request)):
                yield delta
            return
        for i, word in enumerate(words(self.count)):
            if i == 0:
                print("streaming", flush=True)
            yield ResponseDelta(part="text", index=0, text=word)
            await asyncio.sleep(self.delay)
        yield ResponseDelta(part="finish", finish_reason="stop", usage=Usage(output_tokens=1))


async def main(url: str, run_id: str, count: int, delay: float, wait: float) -> None:
    store = open_store(url)

    @sr.tool(side_effects=False)
    async def pause(seconds: float) -> str:
        """Wait a moment.

        Args:
            seconds: How long.
        """
        await asyncio.sleep(seconds)
        return "ok"

    model = SlowStreamingModel(count, delay, wait)
    agent = sr.Agent(name="writer", model=model, tools=[pause])
    runtime = sr.Runtime(store, agents=[agent], claim_ttl=2.0)
    if await store.load(run_id) is None:
        result = await runtime.run(agent, run_id=run_id, input="write")
    else:
        result = await runtime.resume(run_id, wait=10)
    print(f"done {result.status}", flush=True)
    await store.close()


if __name__ == "__main__":
    wait = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), wait))
