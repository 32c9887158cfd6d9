"""The extension interface: hooks in order, state saved and restored, names unique."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import ModelResponse, Usage
from steadyrun.extensions import (
    Extension,
    ModelCall,
    ModelNext,
    ToolBatch,
    ToolCall,
    ToolNext,
    TurnView,
)
from steadyrun.testing import ScriptedModel, text, tool_calls


class Recorder(Extension):
    """Records every hook it sees; counts tool calls in its state."""

    name = "recorder"
    reserved_tokens = 7

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.count = 0
        self.reported = False

    def restore_state(self, state: Any) -> None:
        self.count = 0 if state is None else int(state["count"])
        self.log.append(f"restore {state}")

    def save_state(self) -> Any:
        return {"count": self.count}

    def publish(self) -> Any:
        return self.count

    def instructions(self, view: TurnView) -> str | None:
        return f"[recorder turn {view.turn} iteration {view.iteration}]"

    def tools(self) -> list[sr.Tool]:
        ext = self

        @sr.tool
        async def bump(ctx: sr.ToolContext) -> str:
            """Count one.

            Args:
                ctx: The call's context.
            """
            run = ext.of(ctx)
            run.count += 1
            return f"count {run.count}"

        return [bump]

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        self.log.append(f"model {call.model_call_id} tools={[t.name for t in call.request.tools]}")
        response = await next(call)
        self.log.append(f"model {call.model_call_id} done")
        return response

    async def review_batch(self, batch: ToolBatch, next: Any) -> ToolBatch:
        self.log.append(f"batch {[c.name for c in batch.calls]}")
        for i, c in enumerate(batch.calls):
            if c.name == "forbidden":
                batch = batch.deny(i, "forbidden is not allowed here")
        return await next(batch)

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        self.log.append(f"tool {call.tool.name} in")
        value = await next(call)
        self.log.append(f"tool {call.tool.name} out")
        return value

    def take_usage(self) -> Usage:
        # As if bumping made one model call of the extension's own: reported once.
        if self.count == 1 and not self.reported:
            self.reported = True
            return Usage(requests=1, input_tokens=100)
        return Usage()

    async def on_claim(self, run_id: str, messages: Any) -> None:
        self.log.append(f"claim {[m.text for m in messages]}")

    async def on_model_output(self, run_id: str, model_call_id: str, response: Any) -> None:
        self.log.append(f"output {model_call_id}")

    async def on_tool_outcome(self, run_id: str, record: Any) -> None:
        self.log.append(f"outcome {record.name} {record.status}")

    async def on_restore(self, run_id: str) -> None:
        self.log.append("on_restore")

    async def on_complete(self, run_id: str, messages: Any) -> None:
        self.log.append("complete")


@sr.tool
async def forbidden() -> str:
    """Never runs."""
    raise AssertionError("a denied call ran")


async def test_hooks_run_in_order_and_state_is_published() -> None:
    log: list[str] = []
    model = ScriptedModel([tool_calls(("bump", {}), ("forbidden", {})), text("done")])
    agent = sr.Agent(name="a", model=model, tools=[forbidden], extensions=[Recorder(log)])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="hi")
    assert result.status == "completed"
    assert result.extensions == {"recorder": 1}
    assert result.call("m1.c2").status == "failed"
    assert result.call("m1.c2").error == "forbidden is not allowed here"
    assert "[recorder turn 1 iteration 1]" in model.requests[0].instructions
    assert "[recorder turn 1 iteration 2]" in model.requests[1].instructions
    # The extension's own usage is counted once, with the runtime's count of model requests.
    assert result.usage.input_tokens == 100 + 20
    assert log == [
        "restore None",
        "claim ['hi']",
        "model m1 tools=['bump', 'forbidden']",
        "model m1 done",
        "output m1",
        "batch ['bump', 'forbidden']",
        "tool bump in",
        "tool bump out",
        "outcome bump succeeded",
        "model m2 tools=['bump', 'forbidden']",
        "model m2 done",
        "output m2",
        "complete",
    ]


async def test_each_run_gets_its_own_instance() -> None:
    log: list[str] = []
    template = Recorder(log)
    agent = sr.Agent(
        name="a",
        model=ScriptedModel(
            [tool_calls(("bump", {})), text("1"), tool_calls(("bump", {})), text("2")]
        ),
        extensions=[template],
    )
    runtime = sr.Runtime(sr.MemoryStore())
    first = await runtime.run(agent, run_id="r1", input="hi")
    second = await runtime.run(agent, run_id="r2", input="hi")
    assert first.extensions == second.extensions == {"recorder": 1}
    assert template.count == 0


async def test_state_survives_a_crash_between_the_call_and_the_checkpoint() -> None:
    # bump settles (its record carries the new state), then the run dies inside the next call
    # of the same batch, before any checkpoint holds the new count.
    store = sr.MemoryStore()
    crash = asyncio.Event()

    @sr.tool
    async def stall() -> str:
        """Hangs."""
        crash.set()
        await hang()
        return "never"

    log: list[str] = []
    batch = tool_calls(("bump", {}), ("stall", {}))
    agent = sr.Agent(
        name="a", model=ScriptedModel([batch]), tools=[stall], extensions=[Recorder(log)]
    )
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="hi"), crash)
    snap = await store.load("r")
    assert snap is not None and snap.checkpoint.extra["steadyrun.ext"] == {"recorder": {"count": 0}}

    log.clear()
    resumed_agent = replace(agent, model=ScriptedModel([text("done")]))
    result = await sr.Runtime(store, agents=[resumed_agent]).resume("r")
    assert result.status == "completed"
    assert result.extensions == {"recorder": 1}
    assert log[:2] == ["restore {'count': 0}", "restore {'count': 1}"]
    assert "on_restore" in log


def test_extension_names_must_be_unique() -> None:
    with pytest.raises(sr.UsageError, match="unique"):
        sr.Agent(name="a", model=ScriptedModel([]), extensions=[Recorder([]), Recorder([])])


def test_extensions_must_be_extensions() -> None:
    with pytest.raises(sr.UsageError, match="Extension instances"):
        sr.Agent(name="a", model=ScriptedModel([]), extensions=[object()])  # type: ignore[list-item]


def test_extension_tools_collide_with_agent_tools() -> None:
    @sr.tool
    async def bump() -> str:
        """Same name as the extension's tool."""
        return ""

    with pytest.raises(sr.UsageError, match="bump"):
        sr.Agent(name="a", model=ScriptedModel([]), tools=[bump], extensions=[Recorder([])])


async def test_a_failing_observer_hook_does_not_stop_the_run() -> None:
    class Broken(Extension):
        name = "broken"

        async def on_claim(self, run_id: str, messages: Any) -> None:
            raise RuntimeError("boom")

    agent = sr.Agent(name="a", model=ScriptedModel([text("ok")]), extensions=[Broken()])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="hi")
    assert result.status == "completed"


async def test_model_middleware_can_answer_without_the_model() -> None:
    class Canned(Extension):
        name = "canned"

        async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
            return text("from the cache")

    model = ScriptedModel([])
    agent = sr.Agent(name="a", model=model, extensions=[Canned()])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="hi")
    assert result.text == "from the cache" and model.requests == []


async def test_tool_middleware_failure_is_the_calls_failure() -> None:
    class Deny(Extension):
        name = "deny"

        async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
            raise PermissionError(f"{call.tool.name} refused")

    @sr.tool
    async def act() -> str:
        """Would act."""
        raise AssertionError("must not run")

    model = ScriptedModel([tool_calls(("act", {})), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=[act], extensions=[Deny()])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="hi")
    record = result.call("m1.c1")
    assert record.status == "failed" and "act refused" in (record.error or "")


def test_deny_checks_the_index() -> None:
    batch = ToolBatch(run_id="r", model_call_id="m1", calls=())
    with pytest.raises(sr.UsageError, match="no call 0"):
        batch.deny(0, "no")
