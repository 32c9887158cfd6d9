"""PostgresLeases: one holder at a time, expiry, fencing of stale writes, wake-ups."""

from __future__ import annotations

import asyncio

import pytest

import pgkit
import steadyrun as sr
from steadyrun.stores import FeedMessage, PostgresStore
from steadyrun.stores._leases import LeaseLostError, fenced
from steadyrun.stores._leases_postgres import PostgresLeases
from steadyrun.testing import ScriptedModel, text

pg_dsn = pgkit.database_fixture()


async def test_leases_fence_stale_writes_and_track_wake_ups(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        leases = PostgresLeases(store, poll_max=0.2)
        await store.append("r1", FeedMessage(id="r1:input", content="hi"))
        assert await leases.runnable() == ["r1"]
        first = await leases.acquire("r1", "w1", 0.3)
        assert first is not None and first.wake == 1
        assert await leases.acquire("r1", "w2", 5) is None  # held
        assert await leases.runnable() == []
        agent = sr.Agent(name="a", model=ScriptedModel([text("hello")]))
        with fenced(first.fence):
            await sr.Runtime(store).run(agent, run_id="r1", input="hi", input_id="r1:input")
        assert await leases.renew(first, 0.3)
        await asyncio.sleep(0.4)  # expired: another worker may take it
        second = await leases.acquire("r1", "w2", 5)
        assert second is not None and second.token == first.token + 1
        assert not await leases.renew(first, 5)
        snap = await store.load("r1")
        assert snap is not None
        with fenced(first.fence), pytest.raises(LeaseLostError):
            await store.save_call("r1", snap.calls[0] if snap.calls else _call())
        await leases.release(first)  # not held: changes nothing
        await leases.release(second)
        assert await leases.runnable() == []  # the wake-up was handled
        await store.append("r1", FeedMessage(id="m2", content="more"))
        assert await leases.runnable() == ["r1"]
        third = await leases.revoke("r1", "ops", 5)
        assert third.token == second.token + 1
        writers = await leases.writers("r1")
        assert writers and {w.owner for w in writers} == {"w1"}
        await leases.close()


def _call() -> sr.CallRecord:
    return sr.CallRecord(id="c1", name="t", arguments="{}")
