"""Two executors of one process race for a claim: the one the store granted it keeps it.

A store grants a claim when its transaction commits; the taker registers it as held by this
process only once its coroutine resumes. On PostgreSQL a few awaits lie between (the commit's
answer, the connection going back to the pool), and another executor of the same process that
looks at the claim in between must not take it for one left behind (``_stale``) and steal it
from a live executor. The random kill harness found this (``tests/chaos/racer.py``: a second
runtime in the child process); these tests make the window wide on purpose.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import steadyrun as sr
from steadyrun.runtime._claims import Claims, owner_id
from steadyrun.service._worker import Worker
from steadyrun.stores._leases import Lease


class SlowGrant:
    """Leases whose ``acquire`` returns a while after the store granted the claim."""

    def __init__(self, inner: Any, slow_owner: str) -> None:
        self.inner = inner
        self.slow_owner = slow_owner
        self.granted = asyncio.Event()
        self.go_on = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def acquire(self, run_id: str, owner: str, ttl: float, **kwargs: Any) -> Lease | None:
        lease: Lease | None = await self.inner.acquire(run_id, owner, ttl, **kwargs)
        if lease is not None and owner == self.slow_owner:
            self.granted.set()
            await self.go_on.wait()  # committed, not yet back in the taker's coroutine
        return lease


async def test_a_claim_granted_to_a_taker_of_this_process_is_not_taken_from_it() -> None:
    store = sr.MemoryStore()
    first = owner_id("first")
    leases = SlowGrant(store.leases, first)
    taking = asyncio.create_task(Claims(leases, first, 5).take("t"))
    await leases.granted.wait()
    # Another executor of this process looks now: the claim is live, it is busy.
    with pytest.raises(sr.RunBusyError):
        await Claims(leases, owner_id("second"), 5).take("t")
    leases.go_on.set()
    lease = await taking
    holder = await store.leases.holder("t")
    assert holder is not None and (holder.owner, holder.token) == (first, lease.token)


async def test_a_claim_a_worker_of_this_process_got_is_not_taken_from_it() -> None:
    store = sr.MemoryStore()
    worker = Worker(sr.Runtime(store), owner=owner_id("worker"))
    leases = SlowGrant(store.leases, worker.owner)
    worker.leases = leases
    worker._claims.leases = leases
    await store.leases.wake("t")
    filling = asyncio.create_task(worker._fill())
    await leases.granted.wait()
    with pytest.raises(sr.RunBusyError):
        await Claims(leases, owner_id("second"), 5).take("t")
    leases.go_on.set()
    assert await filling == 1
    task = worker._tasks["t"]
    await asyncio.gather(task, return_exceptions=True)  # no such run: it ends at once


async def test_a_claim_left_behind_by_this_process_is_still_taken_at_once() -> None:
    # Unchanged: nothing of this process holds it nor is taking it, so no need to wait.
    store = sr.MemoryStore()
    left = await store.leases.acquire("t", owner_id("gone"), 60)
    assert left is not None
    lease = await Claims(store.leases, owner_id("me"), 5).take("t")
    assert lease.token == left.token + 1
