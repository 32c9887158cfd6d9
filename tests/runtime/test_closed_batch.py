"""A run's coroutine closed in the middle of a batch (Temporal evicting a cached workflow)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import steadyrun as sr
from steadyrun.runtime._state import RunState
from steadyrun.testing import ScriptedModel, text, tool_calls


async def _drive_until(coro: Coroutine[Any, Any, Any], done: asyncio.Event) -> None:
    """Step ``coro`` as its task would, until ``done``: the caller then holds it suspended."""
    while not done.is_set():
        awaited = coro.send(None)
        if awaited is None:  # a bare yield (sleep(0)): let the loop run the others
            await asyncio.sleep(0)
            continue
        awaited._asyncio_future_blocking = False
        watch = asyncio.ensure_future(done.wait())
        await asyncio.wait([awaited, watch], return_when=asyncio.FIRST_COMPLETED)
        watch.cancel()


async def test_closing_a_run_inside_a_batch_cancels_its_calls_without_awaiting() -> None:
    # Temporal's worker closes an evicted workflow's coroutine where it waits. A coroutine
    # that awaits while being closed raises "coroutine ignored GeneratorExit" out of close():
    # the batch awaited its calls' tasks in its cleanup.
    running, cancelled = asyncio.Event(), []

    @sr.tool(concurrency_key=lambda args: args["name"])
    async def wait(name: str) -> str:
        """Wait for ever."""
        if name == "b":
            running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    model = ScriptedModel([tool_calls(("wait", {"name": "a"}), ("wait", {"name": "b"})), text("")])
    agent = sr.Agent(
        name="waiter", model=model, tools=[wait], limits=sr.Limits(max_concurrent_tool_calls=2)
    )
    runtime = sr.Runtime(sr.MemoryStore())
    runtime._register(agent)
    await runtime._append("r", "go")
    state = RunState.new("r", agent.name, runtime._clock())
    execution = runtime._execution(state, agent).start()
    await _drive_until(execution, running)

    execution.close()  # raised RuntimeError before

    for _ in range(100):
        if len(cancelled) == 2:
            break
        await asyncio.sleep(0)
    assert sorted(cancelled) == ["a", "b"]  # the calls' tasks do not outlive the run
