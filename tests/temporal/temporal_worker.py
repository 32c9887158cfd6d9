"""A Temporal worker process for the crash test.

Run as ``python temporal_worker.py TARGET QUEUE STORE EFFECTS``.

Prints ``ready`` once it polls; ``slow_refund`` blocks in it, so the test can kill it mid-activity.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporal_kit import build_app
from temporalio.client import Client


async def main(target: str, queue: str, store: str, effects: str) -> None:
    client = await Client.connect(target)
    app = build_app(Path(store), Path(effects), task_queue=queue, block=True)
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
