"""A second process on the lazy-load tests' store: approve the waiting call and resume.

    python lazychild.py sqlite PATH [hold]
    python lazychild.py postgres DSN [hold]

Prints ``body`` when the approved call's body began (with ``hold`` it then waits, to be
killed) and the run's final status.
"""

from __future__ import annotations

import asyncio
import sys

from lazykit import RUN, lazy_agent

import steadyrun as sr
from steadyrun.stores import PostgresStore


async def main(kind: str, where: str, hold: bool) -> None:
    store: sr.Store = sr.SqliteStore(where) if kind == "sqlite" else PostgresStore(where)
    async with store:
        snap = await store.load(RUN)
        assert snap is not None
        (waiting,) = [c for c in snap.batch_calls() if c.status == "awaiting_decision"]
        runtime = sr.Runtime(store, agents=[lazy_agent(4, resumed=True, hold=hold)])
        await runtime.decide(RUN, waiting.id, approve=True)
        result = await runtime.resume(RUN)
        print(result.status, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["hold"]))
