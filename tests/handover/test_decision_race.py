"""Host answers are final across processes: two processes decide the same calls at once.

Each of two processes (its own ``Runtime`` and ``SqliteStore`` on one file) waits at a barrier,
then decides the same call, one approving and one rejecting: for every call exactly one wins
and the other gets ``ConflictError``; the stored decision is the winner's.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import steadyrun as sr
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, tool_calls

CALLS = 12


@sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="refund?"), concurrency_key="")
def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return f"refunded {order_id}"


def _decide_all(path: str, approve: bool, barrier: Barrier, results: Queue[object]) -> None:
    async def main() -> dict[str, str]:
        store = sr.SqliteStore(path)
        runtime = sr.Runtime(store)
        outcome: dict[str, str] = {}
        try:
            for i in range(CALLS):
                call_id = f"m1.c{i + 1}"
                barrier.wait(timeout=60)  # both processes decide this call at the same moment
                try:
                    await runtime.decide("r", call_id, approve=approve, reason=str(approve))
                    outcome[call_id] = "won"
                except sr.ConflictError:
                    outcome[call_id] = "conflict"
        finally:
            await store.close()
        return outcome

    results.put((approve, asyncio.run(main())))


def test_two_processes_deciding_at_once_one_wins_the_other_conflicts(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")

    async def start() -> None:
        store = sr.SqliteStore(path)
        model = ScriptedModel(
            [tool_calls(*(("refund", {"order_id": str(i)}) for i in range(CALLS)))]
        )
        agent = sr.Agent(name="support", model=model, tools=[refund])
        result = await sr.Runtime(store).run(agent, run_id="r", input="refund all")
        assert result.status == "suspended"
        await store.close()

    asyncio.run(start())
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results: Queue[object] = ctx.Queue()
    procs = [
        ctx.Process(target=_decide_all, args=(path, a, barrier, results)) for a in (True, False)
    ]
    for proc in procs:
        proc.start()
    by_side = dict(results.get(timeout=180) for _ in procs)  # type: ignore[misc]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    approver, rejecter = by_side[True], by_side[False]

    async def stored() -> dict[str, bool]:
        store = sr.SqliteStore(path)
        snap = await store.load("r")
        await store.close()
        assert snap is not None
        return {c.id: c.decision.approve for c in snap.calls if c.decision is not None}

    decisions = asyncio.run(stored())
    assert len(decisions) == CALLS
    for call_id, approved in decisions.items():
        outcomes = (approver[call_id], rejecter[call_id])
        assert sorted(outcomes) == ["conflict", "won"], (call_id, outcomes)
        assert approved is (approver[call_id] == "won"), call_id
