"""A batch of one call whose body runs in a worker thread: awaited in the run's own task.

The batch runner gives each call a task of its own, which keeps an async or inline body's
context variables apart from the run's. A sync body that runs in a worker thread gets a copy
of them there anyway, so a lone such call (no other call of the batch queued or running, no
extension around it) is awaited without a task: one turn of the event loop fewer per
iteration (issue 20). These pin that, and that nothing else changes: a run cancelled while
the body runs records nothing for the call (as a crash), a timeout still settles it, and
async and inline bodies still keep their context variables to themselves.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

import steadyrun as sr
from steadyrun.records import CallRecord
from steadyrun.testing import ScriptedModel, text, tool_calls

marker: contextvars.ContextVar[str] = contextvars.ContextVar("lone_call_marker", default="-")


class Tasks(sr.Observer):
    """The task each hook ran in."""

    def __init__(self) -> None:
        self.seen: dict[str, set[asyncio.Task[object] | None]] = {}

    def _note(self, hook: str) -> None:
        self.seen.setdefault(hook, set()).add(asyncio.current_task())

    async def on_model_request(self, run_id: str, model_call_id: str, request: object) -> None:
        self._note("model")

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        self._note("tool_start")

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        self._note("tool_settle")


@sr.tool
def echo(text: str) -> str:
    """Echo.

    Args:
        text: What to return.
    """
    return text


def two_iterations(name: str = "echo") -> ScriptedModel:
    return ScriptedModel(
        [
            tool_calls((name, {"text": "a"})),
            tool_calls((name, {"text": "b"})),
            text("done"),
        ]
    )


async def test_a_lone_sync_call_is_awaited_in_the_runs_own_task() -> None:
    tasks = Tasks()
    runtime = sr.Runtime(sr.MemoryStore(), observers=[tasks])
    agent = sr.Agent(name="a", model=two_iterations(), tools=[echo])
    result = await runtime.run(agent, run_id="r", input="go")
    assert result.status == "completed"
    (run_task,) = tasks.seen["model"]
    assert tasks.seen["tool_start"] == {run_task}


async def test_calls_of_a_batch_of_several_still_get_tasks_of_their_own() -> None:
    @sr.tool(name="echo", concurrency_key="")
    def overlapping_echo(text: str) -> str:
        """Echo.

        Args:
            text: What to return.
        """
        return text

    tasks = Tasks()
    runtime = sr.Runtime(sr.MemoryStore(), observers=[tasks])
    model = ScriptedModel(
        [tool_calls(("echo", {"text": "a"}), ("echo", {"text": "b"})), text("done")]
    )
    agent = sr.Agent(name="a", model=model, tools=[overlapping_echo])
    result = await runtime.run(agent, run_id="r", input="go")
    assert result.status == "completed"
    (run_task,) = tasks.seen["model"]
    assert run_task not in tasks.seen["tool_start"]
    assert len(tasks.seen["tool_start"]) == 2


async def test_async_and_inline_bodies_keep_their_context_variables_to_themselves() -> None:
    seen: list[str] = []

    @sr.tool(name="echo")
    async def async_echo(text: str) -> str:
        """Echo.

        Args:
            text: What to return.
        """
        seen.append(marker.get())
        marker.set(f"set by {text}")
        return text

    @sr.tool(name="echo", inline=True)
    def inline_echo(text: str) -> str:
        """Echo.

        Args:
            text: What to return.
        """
        seen.append(marker.get())
        marker.set(f"set by {text}")
        return text

    for body in (async_echo, inline_echo, echo):
        seen.clear()
        runtime = sr.Runtime(sr.MemoryStore())
        agent = sr.Agent(name="a", model=two_iterations(), tools=[body])
        assert (await runtime.run(agent, run_id="r", input="go")).status == "completed"
        assert marker.get() == "-"
        if body is not echo:
            assert seen == ["-", "-"]  # the first call's setting did not reach the second


async def test_a_run_cancelled_while_its_lone_sync_call_runs_records_nothing_for_it() -> None:
    started, release = threading.Event(), threading.Event()

    @sr.tool(name="echo")
    def slow_echo(text: str) -> str:
        """Echo, slowly.

        Args:
            text: What to return.
        """
        started.set()
        release.wait(10)
        return text

    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    agent = sr.Agent(name="a", model=two_iterations(), tools=[slow_echo])
    task = asyncio.create_task(runtime.run(agent, run_id="r", input="go"))
    await asyncio.to_thread(started.wait, 10)  # the body is running (the loop stays free)
    assert started.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    snap = await store.load("r")
    assert snap is not None
    # The start is durable, the outcome never recorded: what a killed process leaves.
    assert [c.status for c in snap.calls] == ["running"]


async def test_a_lone_sync_call_past_its_timeout_is_settled_as_such() -> None:
    release = threading.Event()

    @sr.tool(name="echo", timeout=0.05, side_effects=False)
    def stuck_echo(text: str) -> str:
        """Echo, if it ever returns.

        Args:
            text: What to return.
        """
        release.wait(10)
        return text

    model = ScriptedModel([tool_calls(("echo", {"text": "a"})), text("done")])
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(
        sr.Agent(name="a", model=model, tools=[stuck_echo]), run_id="r", input="go"
    )
    release.set()
    assert result.status == "completed"
    assert [c.status for c in result.calls] == ["interrupted"]
