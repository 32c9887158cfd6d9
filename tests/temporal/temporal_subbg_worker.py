"""A Temporal worker process for the sub-agent background crash test.

Run as ``python temporal_subbg_worker.py TARGET QUEUE STORE JOBS EFFECTS``; prints ``ready``
once it polls.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporal_subbg_kit import build_app
from temporalio.client import Client


async def main(target: str, queue: str, store: str, jobs: str, effects: str) -> None:
    client = await Client.connect(target)
    app = build_app(Path(store), Path(jobs), Path(effects), task_queue=queue)
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
