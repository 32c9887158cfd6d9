"""A Temporal worker process with the default options, for the recovery-time test.

Run as ``python temporal_parity_worker.py TARGET QUEUE STORE EFFECTS block|free``; prints
``ready`` once it polls.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporal_parity_kit import build_parity_app
from temporalio.client import Client


async def main(target: str, queue: str, store: str, effects: str, mode: str) -> None:
    client = await Client.connect(target)
    app = build_parity_app(Path(store), Path(effects), task_queue=queue, block=mode == "block")
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
