"""A Temporal worker process for the crash test.

Run as ``python temporal_worker.py TARGET QUEUE STORE EFFECTS [free]``.

Prints ``ready`` once it polls; ``slow_refund`` and the ``slow`` agent's model block in it, so
the test can kill it mid-activity (``free``: they do not block, for the worker that takes over).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporal_kit import build_app
from temporalio.client import Client


async def main(target: str, queue: str, store: str, effects: str, mode: str = "block") -> None:
    client = await Client.connect(target)
    app = build_app(Path(store), Path(effects), task_queue=queue, block=mode != "free")
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
