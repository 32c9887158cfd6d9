"""A run whose execution raised in a worker (a store that failed for a moment) is tried again.

It used to wait for its next wake-up: the failed execution marked the wake-up (a person's
decision, say) handled, and a run suspended with its decision recorded stayed there forever.
Now the worker releases it unhandled and tries it again after a backoff (growing, per run),
so a transient failure delays the run and a lasting one costs a retry now and then.
"""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun._errors import StoreError
from steadyrun.control import Confirm
from steadyrun.service import Worker
from steadyrun.stores import MemoryStore
from steadyrun.testing import ScriptedModel, text, tool_calls


class FlakyStore(MemoryStore):
    """A fake store (tests only) whose next ``failures`` loads fail."""

    failures = 0

    async def load(self, run_id: str):  # type: ignore[no-untyped-def]
        if self.failures:
            self.failures -= 1
            raise StoreError("the database went away for a moment")
        return await super().load(run_id)


def _agent(shipped: list[str]) -> sr.Agent:
    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Ship?"))
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: The order.
        """
        shipped.append(order)
        return "shipped"

    model = ScriptedModel([tool_calls(("ship", {"order": "A-1"})), text("done")])
    return sr.Agent(name="shipper", model=model, tools=[ship])


async def test_a_run_whose_resume_failed_is_retried_after_a_backoff() -> None:
    shipped: list[str] = []
    store = FlakyStore()
    agent = _agent(shipped)
    runtime = sr.Runtime(store, agents=[agent])
    result = await runtime.run(agent, run_id="r1", input="ship A-1")
    assert result.status == "suspended"
    (item,) = await runtime.pending("r1")
    await runtime.decide("r1", item.call_id, approve=True)  # a wake-up for the workers
    store.failures = 2
    worker = Worker(runtime, poll=0.05)
    await worker.run_until_idle()  # the resume fails: the run is not given up
    assert worker.stats.errors == 1
    assert await store.leases.runnable() == ["r1"], "still runnable, not marked handled"
    for _ in range(100):  # the backoff passes (0.5 s, then 1 s): tried again, and again
        await worker.run_until_idle()
        snap = await MemoryStore.load(store, "r1")  # the store as it is, no failure
        if snap is not None and snap.run.status == "completed":
            break
        await asyncio.sleep(0.1)
    assert snap is not None and snap.run.status == "completed"
    assert shipped == ["A-1"] and worker.stats.errors == 2
    assert await store.leases.runnable() == []
