"""A worker process of ``scale.py``: built-in ``Worker`` or Temporal worker, on PostgreSQL.

Run as ``python scale_worker.py builtin DSN SCHEMA LEDGER TTL CONCURRENCY`` or
``python scale_worker.py temporal DSN SCHEMA LEDGER TTL TARGET QUEUE``. Prints ``ready``
once it takes work, then nothing; the driver SIGKILLs it or stops it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from scale_kit import build_agent

import steadyrun as sr


async def builtin(dsn: str, schema: str, ledger: str, ttl: str, concurrency: str) -> None:
    from steadyrun.service import Worker

    store = sr.PostgresStore(dsn, schema=schema, max_size=8)
    runtime = sr.Runtime(store, agents=[build_agent(Path(ledger))])
    worker = Worker(
        runtime,
        concurrency=int(concurrency),
        ttl=float(ttl),
        poll=1.0,
        grace=2.0,
        handle_signals=True,
    )
    await store.list_runs(limit=1)  # connect before saying ready
    print("ready", flush=True)
    try:
        await worker.run()
    finally:
        await store.close()


async def temporal(dsn: str, schema: str, ledger: str, ttl: str, target: str, queue: str) -> None:
    from temporalio.client import Client

    from steadyrun.temporal import TemporalApp, TemporalOptions

    store = sr.PostgresStore(dsn, schema=schema, max_size=8)
    options = TemporalOptions(
        task_queue=queue,
        heartbeat_timeout=timedelta(seconds=float(ttl)),
        retry_interval=timedelta(milliseconds=200),
    )
    app = TemporalApp(agents=[build_agent(Path(ledger))], store=store, options=options)
    client = await Client.connect(target)
    await store.list_runs(limit=1)
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    engine, *rest = sys.argv[1:]
    asyncio.run(builtin(*rest) if engine == "builtin" else temporal(*rest))
