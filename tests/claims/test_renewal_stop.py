"""An execution's claim is released when it ends, even if stopping its renewal was swallowed.

``Claims.holding`` renews the claim in a task and, when the execution ends, cancels that task
and releases the claim. Under load on PostgreSQL a renewal in flight was seen to lose that
cancel (it returned normally with its task's ``cancelling()`` at 1: the wait inside the driver
dropped it; Python 3.11's ``asyncio.wait_for`` is known to do the same, bpo-42130). The
renewer then went on renewing for ever: the release never came, the claim stayed live, and a
run suspended by that execution was never resumed after its decision (seen as
tests/service/test_serve_workers_pg.py leaving a run ``suspended`` with its decision recorded,
its claim renewed by a process that no longer executed it).

``SwallowingLeases`` makes that deterministic: a renewal in flight loses the cancel and
completes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.runtime._claims import Claims
from steadyrun.service import Operations
from steadyrun.service._worker import Worker
from steadyrun.stores._leases import Lease
from steadyrun.testing import FunctionModel, text, tool_calls

TTL = 0.3  # renewals every 0.1 s: the first one starts while the execution still works
DEADLINE = 10.0  # for what takes milliseconds; a hang fails the test instead of stalling it


class SwallowingLeases:
    """Leases whose renewals, once ``swallow`` is set, hang until cancelled and then complete.

    The cancellation is lost, as the PostgreSQL driver's waits were seen to lose it under load.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.renewing = asyncio.Event()
        self.swallow = True
        self.renewals = 0
        self.swallowed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def renew(self, lease: Lease, ttl: float) -> bool:
        self.renewals += 1
        if self.swallow:
            self.renewing.set()
            try:
                await asyncio.Event().wait()  # a pool with no free connection, say
            except asyncio.CancelledError:
                self.swallowed += 1  # the connection came in the same turn: renewed
        return bool(await self.inner.renew(lease, ttl))


async def _stop(task: asyncio.Task[Any], leases: SwallowingLeases) -> None:
    """End a task stuck behind a renewer that swallows cancels (a failed test's clean-up)."""
    leases.swallow = False
    while not task.done():
        task.cancel()  # each cancel may land in a renewal (lost) or in its sleep (taken)
        await asyncio.wait({task}, timeout=0.2)


async def _within(seconds: float, check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        await asyncio.sleep(0.01)


async def test_the_claim_is_released_when_the_renewal_swallows_its_cancel() -> None:
    store = sr.MemoryStore()
    leases = SwallowingLeases(store.leases)
    claims = Claims(leases, "w1", TTL)
    lease = await claims.acquire("r")
    assert lease is not None

    async def execute() -> None:
        async with claims.holding(lease):
            await leases.renewing.wait()  # the execution ends while a renewal is in flight

    executing = asyncio.create_task(execute())
    # Before the fix this never ended: the renewer, its cancel lost, renewed for ever.
    done, _ = await asyncio.wait({executing}, timeout=DEADLINE)
    if not done:
        await _stop(executing, leases)
    assert done, "the execution did not end: its claim's renewer outlived it"
    assert leases.swallowed == 1
    assert await store.leases.holder("r") is None  # released
    renewals = leases.renewals
    await asyncio.sleep(TTL)  # a renewer still alive would renew (and hang) again meanwhile
    assert leases.renewals == renewals


def _agent(reached: asyncio.Event, go_on: asyncio.Event) -> sr.Agent:
    def confirm(call: CallView) -> Confirm:
        return Confirm(prompt="Ship?")

    @sr.tool
    async def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order.
        """
        reached.set()
        await go_on.wait()  # until a renewal is in flight
        return "paid"

    @sr.tool(side_effects=True, policy=confirm)
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: The order.
        """
        return "shipped"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        tools = [m for m in request.messages if m.role == "tool"]
        if not tools:
            return tool_calls(("lookup", {"order": "A-1"}))
        if len(tools) == 1:
            return tool_calls(("ship", {"order": "A-1"}))
        return text("shipped A-1")

    return sr.Agent(name="shipper", model=FunctionModel(respond), tools=[lookup, ship])


async def test_a_run_suspended_while_its_claim_renewed_resumes_after_its_decision() -> None:
    store = sr.MemoryStore()
    reached, go_on = asyncio.Event(), asyncio.Event()
    agent = _agent(reached, go_on)
    leases = SwallowingLeases(store.leases)
    runtime = sr.Runtime(store, agents=[agent])
    worker = Worker(runtime, leases, ttl=TTL, poll=0.05, grace=0.5)
    working = asyncio.create_task(worker.run())
    try:
        await Operations(store, agents=[agent]).start("r", "shipper", "Ship A-1.")
        await asyncio.wait_for(reached.wait(), DEADLINE)
        await asyncio.wait_for(leases.renewing.wait(), DEADLINE)
        go_on.set()  # the run goes on to ``ship`` and suspends for its decision

        async def suspended() -> bool:
            snap = await store.load("r")
            return snap is not None and snap.run.status == "suspended"

        await _within(DEADLINE, suspended, "the run suspended")
        leases.swallow = False  # from now on renewals behave
        ship = next(c for c in (await store.load("r")).calls if c.name == "ship")  # type: ignore[union-attr]
        await runtime.decide("r", ship.id, approve=True)

        async def completed() -> bool:
            snap = await store.load("r")
            return snap is not None and snap.run.status == "completed"

        # Before the fix the first execution's claim stayed renewed, so no worker took the
        # run again: it stayed suspended with its decision recorded.
        await _within(DEADLINE, completed, "the run completed after its decision")
    finally:
        worker.stop()
        await _stop(working, leases)
    assert leases.swallowed == 1
