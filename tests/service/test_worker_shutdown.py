"""A worker that stops, and a run cancelled while a worker executes it (PostgreSQL).

Each run calls one side-effecting tool, ``work``, whose body writes an effect (with the owner
of the lease it runs under) and then waits at a gate the test opens; then the model answers.

- **Graceful shutdown** (``stop()`` or SIGTERM): worker A holds some runs, their ``work``
  bodies waiting at the gate. A is told to stop, then the gate opens: each body finishes, the
  run stops right after its next checkpoint and its lease is released unhandled; worker B
  finishes every run. No ``work`` body ran twice; the step log shows A, then B.
- **Past the grace period**: bodies that never finish are cancelled like a crash; B recovers
  the runs without running ``work`` again (the interrupted calls need review).
- **Cancel while executing** (``Operations.cancel``): the run's lease is revoked while its
  ``work`` body runs; when the body returns, the worker's write is refused
  (``LeaseLostError``, counted as lost), the run is ``cancelled`` with its call ``cancelled``,
  nothing written under the worker's lease after the cancel, and the run is never resumed.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

import pgkit
import steadyrun as sr
from steadyrun._errors import RunCancelledError
from steadyrun.service._ops import Operations
from steadyrun.service._worker import Worker
from steadyrun.stores import PostgresStore
from steadyrun.stores._leases import current_fence
from steadyrun.stores._leases_postgres import PostgresLeases
from steadyrun.testing import FunctionModel, text, tool_calls

pg_dsn = pgkit.database_fixture()

AGENT = "worker"
WAIT = 60.0  # seconds before a test gives up waiting (a hang guard, never a measurement)


@dataclass
class Effects:
    """What the ``work`` bodies did, and the gate they wait at."""

    done: list[tuple[str, str, str]] = field(default_factory=list)  # run, call, lease owner
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def wait_entered(self, count: int) -> None:
        """Wait until ``count`` bodies have written their effect."""
        async with self.entered:
            await asyncio.wait_for(self.entered.wait_for(lambda: len(self.done) >= count), WAIT)


def final_text(run_id: str) -> str:
    """What a run answers once its work is done."""
    return f"work for {run_id} done"


def make_agent(effects: Effects) -> sr.Agent:
    """One ``work`` call (side effects, waits at the gate), then the final text."""

    @sr.tool(side_effects=True)
    async def work(job: str, ctx: sr.ToolContext) -> str:
        """Do the job.

        Args:
            job: The job.
        """
        fence = current_fence()
        async with effects.entered:
            effects.done.append((ctx.run_id, ctx.call_id, fence.owner if fence else "-"))
            effects.entered.notify_all()
        await effects.gate.wait()
        return f"did {job}"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        run_id = request.messages[0].text.split()[-1]
        if not any(m.role == "tool" for m in request.messages):
            return tool_calls(("work", {"job": run_id}))
        return text(final_text(run_id))

    return sr.Agent(name=AGENT, model=FunctionModel(respond), tools=[work])


@dataclass
class Setup:
    """A store, its leases, the operations and the agent's effects."""

    store: PostgresStore
    leases: PostgresLeases
    ops: Operations
    effects: Effects

    def worker(self, owner: str, **options: float | bool) -> Worker:
        """A worker on the store with short timings."""
        runtime = sr.Runtime(self.store, agents=[make_agent(self.effects)])
        defaults: dict[str, float | bool] = {"concurrency": 3, "ttl": 5.0, "poll": 0.2}
        return Worker(runtime, self.leases, owner=owner, **{**defaults, **options})  # type: ignore[arg-type]

    async def held_by(self, owner: str) -> int:
        """How many leases ``owner`` holds now."""
        async with self.store._connection() as conn:
            cur = await conn.execute(
                f"SELECT count(*) FROM {self.store._s}.work WHERE owner = %s", (owner,)
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0


@pytest.fixture
async def setup(pg_dsn: str) -> AsyncIterator[Setup]:
    async with PostgresStore(pg_dsn) as store:
        leases = PostgresLeases(store, poll_max=0.2)
        effects = Effects()
        ops = Operations(store, agents=[make_agent(effects)], leases=leases)
        try:
            yield Setup(store, leases, ops, effects)
        finally:
            await leases.close()


async def _start(ops: Operations, runs: list[str]) -> None:
    for run_id in runs:
        await ops.start(run_id, AGENT, f"job {run_id}")


async def _stopped_by(how: str, worker: Worker) -> None:
    if how == "stop":
        worker.stop()
    else:
        os.kill(os.getpid(), signal.SIGTERM)  # the worker's handler calls stop()
        for _ in range(1000):  # the handler runs on the loop; let it
            if worker.stopping:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("SIGTERM did not stop the worker")


@pytest.mark.parametrize("how", ["stop", "sigterm"])
async def test_a_stopping_worker_checkpoints_and_another_finishes(setup: Setup, how: str) -> None:
    runs = [f"s{i}" for i in range(5)]
    await _start(setup.ops, runs)
    a = setup.worker("worker-a", handle_signals=how == "sigterm")
    running = asyncio.create_task(a.run())
    await setup.effects.wait_entered(3)  # A holds three runs, each inside its work body
    held = sorted(a.executing())
    assert len(held) == 3 and await setup.held_by("worker-a") == 3
    await _stopped_by(how, a)
    setup.effects.gate.set()  # the bodies finish; the runs stop at their next checkpoint
    await asyncio.wait_for(running, WAIT)

    assert (a.stats.drained, a.stats.executed, a.stats.lost, a.stats.errors) == (3, 0, 0, 0)
    assert await setup.held_by("worker-a") == 0  # every lease released
    for run_id in held:  # checkpointed with the work's result, still to be finished
        snap = await setup.store.load(run_id)
        assert snap is not None and snap.run.status == "running"
        assert [(c.name, c.status) for c in snap.calls] == [("work", "succeeded")]
    assert sorted(await setup.leases.runnable(limit=10)) == runs  # released unhandled

    b = setup.worker("worker-b")
    await asyncio.wait_for(b.run_until_idle(), WAIT)
    assert b.stats.executed == len(runs) and b.stats.drained == 0

    for run_id in runs:
        snap = await setup.store.load(run_id)
        assert snap is not None and snap.run.status == "completed", run_id
        answers = [m.text for m in snap.context if m.role == "assistant" and m.text]
        assert answers == [final_text(run_id)]
        writers = await setup.leases.writers(run_id)
        owners = [w.owner for w in writers]
        tokens = [w.token for w in writers]
        assert tokens == sorted(tokens), writers
        if run_id in held:  # A up to its checkpoint, then B
            assert owners[0] == "worker-a" and owners[-1] == "worker-b", writers
        else:
            assert set(owners) == {"worker-b"}, writers

    # Every work body ran once: A's three, then B's two; B did not run A's again.
    bodies = Counter((run, call) for run, call, _ in setup.effects.done)
    assert len(bodies) == len(runs) and max(bodies.values()) == 1
    by = {run: owner for run, _, owner in setup.effects.done}
    assert {r for r, o in by.items() if o == "worker-a"} == set(held)
    assert {r for r, o in by.items() if o == "worker-b"} == set(runs) - set(held)


async def test_runs_that_miss_the_grace_period_are_recovered_without_running_again(
    setup: Setup,
) -> None:
    runs = ["g0", "g1"]
    await _start(setup.ops, runs)
    a = setup.worker("worker-a", grace=0.1)
    running = asyncio.create_task(a.run())
    await setup.effects.wait_entered(2)
    a.stop()  # the gate stays shut: the bodies outlive the grace period and are cancelled
    await asyncio.wait_for(running, WAIT)
    assert a.executing() == [] and await setup.held_by("worker-a") == 0
    assert a.stats.executed == 0 and a.stats.errors == 0

    setup.effects.gate.set()
    b = setup.worker("worker-b")
    await asyncio.wait_for(b.run_until_idle(), WAIT)
    for run_id in runs:
        snap = await setup.store.load(run_id)
        assert snap is not None
        calls = [(c.name, c.status) for c in snap.calls]
        # The interrupted body may have had its effect: it is not run again, a person reviews.
        assert calls == [("work", "needs_review")], (run_id, calls)
        assert snap.run.status == "completed", snap.run.status  # the model was told
    bodies = Counter(run for run, _, _ in setup.effects.done)
    assert bodies == {"g0": 1, "g1": 1}
    assert {owner for _, _, owner in setup.effects.done} == {"worker-a"}


async def test_a_run_cancelled_while_a_worker_executes_it(setup: Setup) -> None:
    await _start(setup.ops, ["c0", "c1"])
    w = setup.worker("worker-w", concurrency=2)
    running = asyncio.create_task(w.run())
    await setup.effects.wait_entered(2)  # both runs are inside their work bodies
    before = await setup.leases.writers("c0")
    assert {x.owner for x in before} == {"worker-w"}

    # Its body is held at the gate past the cancel's grace: it is settled with an unknown effect.
    done = await setup.ops.cancel("c0", grace=0.5)
    call_id = next(c for r, c, _ in setup.effects.done if r == "c0")
    assert done.runs == ["c0"] and done.calls == [("c0", call_id)]
    setup.effects.gate.set()  # c0's body returns into a run that is no longer the worker's
    for _ in range(int(WAIT / 0.05)):
        if not w.executing():
            break
        await asyncio.sleep(0.05)
    assert w.executing() == []
    assert w.stats.lost == 1 and w.stats.executed == 1 and w.stats.errors == 0

    snap = await setup.store.load("c0")
    assert snap is not None and snap.run.status == "cancelled"
    (call,) = snap.calls
    assert call.id == call_id and call.status == "cancelled"
    assert call.error is not None and "unknown" in call.error  # it was running when cancelled
    assert not [m for m in snap.context if m.role == "tool"]  # the refused result is not in
    after = await setup.leases.writers("c0")
    assert after[: len(before)] == before
    cancels = after[len(before) :]
    assert [x.owner for x in cancels] == ["steadyrun.operations"]
    assert cancels[0].token > max(x.token for x in before)
    assert await setup.leases.runnable() == []

    # The other run went on; the cancelled one is never resumed, by a worker or by hand.
    other = await setup.store.load("c1")
    assert other is not None and other.run.status == "completed"
    await setup.leases.wake("c0")  # even when something wakes it
    await asyncio.wait_for(setup.worker("worker-x").run_until_idle(), WAIT)
    with pytest.raises(RunCancelledError):
        # worker-w, still running, may hold the claim for a moment to find it cancelled too
        await setup.ops.runtime.resume("c0", wait=WAIT)
    again = await setup.store.load("c0")
    assert again is not None and again.run.status == "cancelled"
    assert again.run.steps == snap.run.steps
    assert Counter(r for r, _, _ in setup.effects.done) == {"c0": 1, "c1": 1}
    w.stop()
    await asyncio.wait_for(running, WAIT)
