"""A run whose execution hit a passing store error is executed again (found by scale.py).

In ``benchmarks/scale.py`` (built-in, 2 worker processes on PostgreSQL, 2026-12-01) two
approved runs (``order-00109``, ``order-00129``) stayed ``suspended`` for good with their
decision recorded: the worker that took the decision's wake-up failed in ``store.load`` with
``StoreError ... SET TRANSACTION ISOLATION LEVEL must be called before any query`` and
logged "run ... raised in worker ...; it waits for its next wake-up", marking the wake-up
handled. Nothing else wakes an approved run, so it never ran its approved call. Here the
store error is made by hand (the first ``load`` of the run raises) on the in-memory store.
"""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun._errors import StoreError
from steadyrun.records import RunSnapshot
from steadyrun.service import Operations, Worker
from steadyrun.stores import MemoryStore
from steadyrun.stores._leases import current_fence
from steadyrun.testing import ScriptedModel, text


class FlakyStore(MemoryStore):
    """The worker's first ``load`` of run ``r1`` raises a ``StoreError`` (a broken connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def load(self, run_id: str) -> RunSnapshot | None:
        if run_id == "r1" and not self.failed and current_fence() is not None:
            self.failed = True
            raise StoreError("PostgreSQL store ...: a passing error")
        return await super().load(run_id)


async def test_a_run_whose_execution_hit_a_store_error_is_executed_again() -> None:
    store = FlakyStore()
    agent = sr.Agent(name="a", model=ScriptedModel([text("hello")]))
    runtime = sr.Runtime(store, agents=[agent])
    worker = Worker(runtime, concurrency=1, ttl=1.0, poll=0.05)
    task = asyncio.create_task(worker.run())
    try:
        await Operations(runtime, leases=store.leases).start("r1", "a", "hi")
        status = None
        for _ in range(400):  # a cap against hanging (20 s), not a timing assertion
            snap = await MemoryStore.load(store, "r1")
            status = snap.run.status if snap is not None else None
            if status == "completed":
                break
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await task
    assert store.failed and worker.stats.errors == 1
    assert status == "completed"
