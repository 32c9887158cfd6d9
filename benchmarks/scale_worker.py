"""A worker process of ``scale.py``: built-in ``Worker`` or Temporal worker, on PostgreSQL.

Run as ``python scale_worker.py builtin DSN SCHEMA LEDGER TTL CONCURRENCY`` or
``python scale_worker.py temporal DSN SCHEMA LEDGER TTL TARGET QUEUE``. Prints ``ready``
once it takes work, then nothing; the driver SIGKILLs it or stops it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from scale_kit import build_agent

import steadyrun as sr

READY: list[float] = []  # the process's CPU seconds when it said ready


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
        READY.append(time.process_time())
        await asyncio.Event().wait()


def _run(work: Any) -> None:
    """``asyncio.run``, on uvloop with ``STEADYRUN_SCALE_LOOP=uvloop`` (an A/B of the loop)."""
    if os.environ.get("STEADYRUN_SCALE_LOOP") == "uvloop":
        import uvloop

        uvloop.run(work)
        return
    asyncio.run(work)


def main() -> None:
    """Run the worker; with ``STEADYRUN_SCALE_PROFILE`` set, profile it until SIGTERM."""
    engine, *rest = sys.argv[1:]
    work = builtin(*rest) if engine == "builtin" else temporal(*rest)
    profile = os.environ.get("STEADYRUN_SCALE_PROFILE")
    threads = os.environ.get("STEADYRUN_SCALE_THREADS")
    if not profile and not threads:
        _run(work)
        return
    from sampler import ThreadProfiles, thread_cpu

    sampler = ThreadProfiles()
    if profile:
        sampler.start()

    def stop(*_: object) -> None:
        # Written here and exit at once: a graceful shutdown is not what is measured.
        spent = time.process_time()
        at_ready = f"cpu s: {READY[0] if READY else 0:.3f} at ready, {spent:.3f} at exit"
        if threads:
            Path(f"{threads}.{os.getpid()}").write_text(thread_cpu() + at_ready + "\n")
        if profile:
            path = Path(f"{profile}.{os.getpid()}")
            sampler.write(path)
            with path.open("a") as out:
                print(at_ready, file=out)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    _run(work)


if __name__ == "__main__":
    main()
