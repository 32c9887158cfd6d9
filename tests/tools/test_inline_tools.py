"""``@tool(inline=True)``: a sync body that never blocks runs on the event loop, no thread."""

from __future__ import annotations

import threading

import pytest

from steadyrun import Agent, MemoryStore, Runtime, ToolDefinitionError
from steadyrun.testing import ScriptedModel, text, tool_calls
from steadyrun.tools import schema_tool, tool


async def test_an_inline_tool_runs_on_the_loop_thread_and_a_default_one_does_not() -> None:
    seen: dict[str, str] = {}

    @tool(inline=True, side_effects=False)
    def quick(x: int) -> int:
        """Double x."""
        seen["quick"] = threading.current_thread().name
        return 2 * x

    @tool(side_effects=False)
    def threaded(x: int) -> int:
        """Double x."""
        seen["threaded"] = threading.current_thread().name
        return 2 * x

    assert (quick.inline, threaded.inline) == (True, False)
    assert await quick.invoke({"x": 2}) == 4
    assert await threaded.invoke({"x": 2}) == 4
    assert seen["quick"] == threading.current_thread().name
    assert seen["threaded"] != threading.current_thread().name


async def test_a_run_with_an_inline_tool_gets_its_result() -> None:
    @tool(inline=True, side_effects=False)
    def quick(x: int) -> int:
        """Double x."""
        return 2 * x

    store = MemoryStore()
    model = ScriptedModel([tool_calls(("quick", {"x": 21})), text("done")])
    agent = Agent(name="a", model=model, tools=[quick])
    result = await Runtime(store).run(agent, run_id="r", input="go")
    assert (result.status, result.text) == ("completed", "done")
    snap = await store.load("r")
    assert snap is not None
    (call,) = snap.calls
    assert (call.status, call.result) == ("succeeded", "42")


@pytest.mark.parametrize(
    ("traits", "needle"),
    [
        ({"inline": True, "timeout": 1.0}, "timeout"),
        ({"inline": "yes"}, "inline must be True or False"),
    ],
)
def test_inline_refuses_what_it_cannot_keep(traits: dict, needle: str) -> None:
    with pytest.raises(ToolDefinitionError, match=needle):

        @tool(**traits)
        def quick(x: int) -> int:
            """Double x."""
            return 2 * x


def test_inline_applies_to_sync_functions_only() -> None:
    with pytest.raises(ToolDefinitionError, match="sync"):

        @tool(inline=True)
        async def quick(x: int) -> int:
            """Double x."""
            return 2 * x


async def test_a_schema_tool_declared_inline_runs_on_the_loop_thread() -> None:
    seen: list[str] = []

    def double(args: dict, ctx: object) -> int:
        seen.append(threading.current_thread().name)
        return 2 * int(args["x"])

    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}}
    quick = schema_tool("double", "Double x.", parameters, double, inline=True)
    threaded = schema_tool("double", "Double x.", parameters, double)
    assert (quick.runs_in_thread, threaded.runs_in_thread) == (False, True)
    assert await quick.invoke({"x": 2}) == 4
    assert await threaded.invoke({"x": 2}) == 4
    assert seen[0] == threading.current_thread().name
    assert seen[1] != threading.current_thread().name
