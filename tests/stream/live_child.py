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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import steadyrun as sr  # noqa: E402
from steadyrun._cli_target import open_store  # noqa: E402
from streamkit import writer_agent  # noqa: E402


async def main(url: str, run_id: str, count: int, delay: float, wait: float) -> None:
    store = open_store(url, create=True)

    agent = writer_agent(count, delay, wait)
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
