"""A worker process of the two-engine scenario suite; prints ``ready`` once it takes work.

``python engine_worker.py builtin STORE LEDGER``: a built-in ``Worker`` on a ``PostgresStore``
(``STORE`` a DSN) or a ``SqliteStore`` (``sqlite:<path>``), with claims of 2 s, so a killed
worker's runs are taken over within seconds.
``python engine_worker.py temporal TARGET QUEUE STORE LEDGER``: a ``TemporalApp`` worker with
the default ``TemporalOptions`` (only the task queue is the suite's own), records in a
``SqliteStore``.
Both run the same agents with the same ``on_handover`` hook, until SIGKILL or SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine_agents import Deps, builtin_store, handover_hook, scenario_agents

import steadyrun as sr

CLAIM_TTL = 2.0


async def builtin(spec: str, ledger: str) -> None:
    from steadyrun.service import Worker

    async with builtin_store(spec, pool=6) as store:
        runtime = sr.Runtime(
            store,
            agents=scenario_agents(Path(ledger)),
            on_handover=handover_hook(Deps(Path(ledger))),
            claim_ttl=CLAIM_TTL,
        )
        worker = Worker(runtime, ttl=CLAIM_TTL, poll=0.5, grace=2.0, handle_signals=True)
        await store.leases.runnable(limit=1)  # connected
        print("ready", flush=True)
        await worker.run()


async def temporal(target: str, queue: str, store: str, ledger: str) -> None:
    from temporalio.client import Client

    from steadyrun.temporal import TemporalApp, TemporalOptions

    client = await Client.connect(target)
    app = TemporalApp(
        agents=scenario_agents(Path(ledger)),
        store=sr.SqliteStore(store),
        options=TemporalOptions(task_queue=queue),
        on_handover=handover_hook(Deps(Path(ledger))),
    )
    async with app.worker(client):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    engine, *args = sys.argv[1:]
    asyncio.run(builtin(*args) if engine == "builtin" else temporal(*args))
