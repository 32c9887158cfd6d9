"""Watch a run that another process executes, word by word.

Run it: ``python examples/streaming.py``. It starts a *writer* process that runs an agent on a
SQLite file, and follows that run from this process with ``steadyrun.stream.follow``: the
model's words are printed as they are written (the writer publishes them on the store's live
feed while somebody follows), then the run's end. The model is a fake that writes slowly, so
the example needs no API key; with a real provider the words come the same way.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage, deltas_of
from steadyrun.stores import SqliteStore
from steadyrun.stream import apply, follow
from steadyrun.testing import text, tool_calls

ANSWER = "Durable runs keep their work through crashes, and nobody waits for a refresh."


class SlowWriter:
    """A fake model (no provider): first looks something up, then writes word by word."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return text(ANSWER)
        return tool_calls(("look_up", {"topic": "durable runs"}))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        response = await self.respond(request)
        if response.message.text != ANSWER:
            for delta in deltas_of(response):
                yield delta
            return
        for i, word in enumerate(ANSWER.split(" ")):
            yield ResponseDelta(part="text", index=0, text=word if i == 0 else " " + word)
            await asyncio.sleep(0.08)
        yield ResponseDelta(part="finish", finish_reason="stop", usage=Usage(output_tokens=12))


@sr.tool(side_effects=False)
async def look_up(topic: str) -> str:
    """Look a topic up (slowly: time for the follower to join).

    Args:
        topic: What to look up.
    """
    await asyncio.sleep(1.0)
    return f"notes on {topic}"


async def write(path: str) -> None:
    """The writer process: runs the agent on the SQLite file."""
    agent = sr.Agent(name="writer", model=SlowWriter(), tools=[look_up])
    await sr.Runtime(SqliteStore(path)).run(agent, run_id="essay-1", input="Why durable runs?")


async def watch(path: str) -> None:
    """This process: follows the run and prints the words as they come."""
    store = SqliteStore(path)
    for _ in range(200):  # the writer process may not have saved the run yet
        if await store.load("essay-1") is not None:
            break
        await asyncio.sleep(0.05)
    snap, printed = None, ""
    async for event in follow(store, "essay-1"):
        snap = event.snapshot if event.kind == "snapshot" else apply(snap, event.delta)
        live = "".join(b.text for b in snap.blocks if b.live and b.kind == "content")
        if live.startswith(printed) and len(live) > len(printed):
            print(live[len(printed) :], end="", flush=True)
            printed = live
        if snap.status != "running":
            break
    print(f"\n{snap.status}: {snap.text}")
    await store.close()


def main() -> None:
    if sys.argv[1:2] == ["write"]:
        asyncio.run(write(sys.argv[2]))
        return
    path = str(Path(tempfile.mkdtemp()) / "runs.db")
    writer = subprocess.Popen([sys.executable, __file__, "write", path])
    try:
        asyncio.run(watch(path))
    finally:
        writer.wait(timeout=60)


if __name__ == "__main__":
    main()
