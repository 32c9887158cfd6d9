"""A cancel from another process fences out the run's executor: it stops at its next write."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.service._ops import Operations
from steadyrun.stores import LeaseLostError
from steadyrun.testing import FunctionModel, text, tool_calls


async def test_a_cancel_through_another_connection_stops_the_executor(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    executing, other = sr.SqliteStore(path), sr.SqliteStore(path)  # two "processes"
    started, release = asyncio.Event(), asyncio.Event()
    asked: list[int] = []

    @sr.tool(side_effects=False)
    async def slow(n: int) -> str:
        """Work a while.

        Args:
            n: Which.
        """
        started.set()
        await release.wait()
        return "ok"

    def respond(request: ModelRequest) -> ModelResponse:
        asked.append(len(request.messages))
        return tool_calls(("slow", {"n": 1})) if len(asked) == 1 else text("done")

    agent = sr.Agent(name="a", model=FunctionModel(respond), tools=[slow])
    try:
        run = asyncio.create_task(sr.Runtime(executing).run(agent, run_id="t", input="go"))
        await started.wait()
        cancelling = asyncio.create_task(Operations(other).cancel("t"))
        for _ in range(1000):  # the claim is revoked: the cancel now waits for the body
            holder = await other.leases.holder("t")
            if holder is not None and holder.owner == "steadyrun.operations":
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the cancel never revoked the claim")
        release.set()
        cancelled = await cancelling
        assert cancelled.runs == ["t"] and cancelled.calls == []
        with pytest.raises(LeaseLostError):
            await run
        assert asked == [1]  # no model call after the cancel
        snap = await other.load("t")
        assert snap is not None and snap.run.status == "cancelled"
        # The call finished: it is recorded as it ended, not as cancelled.
        assert [(c.status, c.result) for c in snap.calls] == [("succeeded", "ok")]
        with pytest.raises(sr.RunCancelledError):
            await sr.Runtime(other, agents=[agent]).resume("t")
    finally:
        await executing.close()
        await other.close()


async def test_a_body_still_running_after_the_grace_is_cancelled_with_unknown_effect(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    executing, other = sr.SqliteStore(path), sr.SqliteStore(path)
    started = asyncio.Event()

    @sr.tool(side_effects=True)
    async def stuck(n: int) -> str:
        """Never end.

        Args:
            n: Which.
        """
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = FunctionModel(lambda request: tool_calls(("stuck", {"n": 1})))
    agent = sr.Agent(name="a", model=model, tools=[stuck])
    try:
        run = asyncio.create_task(sr.Runtime(executing).run(agent, run_id="t", input="go"))
        await started.wait()
        cancelled = await Operations(other).cancel("t", grace=0.3)
        assert len(cancelled.calls) == 1
        snap = await other.load("t")
        assert snap is not None and snap.run.status == "cancelled"
        call = snap.calls[0]
        assert call.status == "cancelled" and "unknown" in (call.error or "")
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    finally:
        await executing.close()
        await other.close()
