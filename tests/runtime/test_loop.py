from __future__ import annotations

import json

import pytest

import steadyrun as sr
from steadyrun.testing import ScriptedModel, call, text, tool_calls


@sr.tool
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return {"id": order_id, "status": "shipped"}


@sr.tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise ValueError(reason)


def agent_with(model: ScriptedModel, **kw: object) -> sr.Agent:
    return sr.Agent(name="a", model=model, tools=[lookup, explode], **kw)  # type: ignore[arg-type]


async def test_completes_with_text_and_usage() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": "7"})), text("Shipped.")])
    result = await sr.Runtime(sr.MemoryStore()).run(agent_with(model), run_id="r", input="Where?")
    assert result.status == "completed"
    assert result.text == "Shipped."
    assert result.usage.requests == 2
    assert result.usage.input_tokens == 20
    assert [c.status for c in result.calls] == ["succeeded"]
    assert json.loads(result.calls[0].result or "") == {"id": "7", "status": "shipped"}
    second = model.requests[1]
    tool_msg = second.messages[-1]
    assert tool_msg.role == "tool"
    assert tool_msg.parts[0].call_id == "call_1"  # type: ignore[union-attr]
    assert [t.name for t in second.tools] == ["explode", "lookup"]  # deterministic order
    model.assert_complete()


async def test_unknown_tool_and_bad_arguments_are_errors_the_model_can_fix() -> None:
    model = ScriptedModel(
        [
            tool_calls(
                ("lokup", {"order_id": "7"}),
                ("lookup", {"order": 7}),
                call("lookup", "{not json"),
                ("explode", {"reason": "boom"}),
            ),
            tool_calls(("lookup", {"order_id": "7"})),
            text("ok"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent_with(model), run_id="r", input="x")
    assert result.status == "completed"
    first = result.calls[:4]
    assert [c.status for c in first] == ["failed"] * 4
    assert "no tool named 'lokup'" in (first[0].error or "")
    assert "explode, lookup" in (first[0].error or "")
    # One prefix, then the problems on one line (the validator's own heading is not repeated).
    assert first[1].error == (
        "Invalid arguments for lookup: order_id: missing required argument; order: unknown "
        "argument (expected: order_id). Fix them and call again."
    )
    assert first[2].error == (
        "Invalid arguments for lookup: the arguments are not valid JSON (at line 1, column 2). "
        "Fix them and call again."
    )
    assert "ValueError: boom" in (first[3].error or "")
    results = model.requests[1].messages[-1].parts
    assert all(p.is_error for p in results)  # type: ignore[union-attr]
    assert [p.call_id for p in results] == ["call_1", "call_2", "call_3", "call_4"]  # type: ignore[union-attr]
    assert result.calls[4].status == "succeeded"


async def test_tool_calls_with_finish_stop_fail_without_executing() -> None:
    ran: list[str] = []

    @sr.tool
    def act(x: int) -> int:
        """Act."""
        ran.append("act")
        return x

    model = ScriptedModel([tool_calls(("act", {"x": 1}), finish="stop")])
    agent = sr.Agent(name="a", model=model, tools=[act])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "failed"
    assert isinstance(result.error, sr.InvalidModelOutput)
    assert ran == []
    assert result.calls == []
    with pytest.raises(sr.InvalidModelOutput):
        result.raise_for_status()


async def test_length_cut_tool_calls_get_feedback_then_another_attempt() -> None:
    model = ScriptedModel(
        [
            tool_calls(("lookup", {"order_id": "7"}), finish="length"),
            tool_calls(("lookup", {"order_id": "7"})),
            text("done"),
        ]
    )
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(agent_with(model), run_id="r", input="x")
    assert result.status == "completed"
    retry = model.requests[1].messages
    assert retry[-1].role == "user" and "cut off" in retry[-1].text
    assert not any(m.tool_calls for m in retry)  # the cut calls never entered the history
    assert len(result.calls) == 1


async def test_length_cut_beyond_the_correction_budget_fails() -> None:
    cut = tool_calls(("lookup", {"order_id": "7"}), finish="length")
    model = ScriptedModel([cut, cut])
    agent = agent_with(model, limits=sr.Limits(corrections=1))
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "failed"
    assert isinstance(result.error, sr.CorrectionsExhausted)


@pytest.mark.parametrize(
    ("finish", "error"), [("content_filter", sr.ContentFiltered), ("error", sr.ModelCallFailed)]
)
async def test_other_finish_reasons_fail_typed(finish: str, error: type) -> None:
    model = ScriptedModel([text("no", finish=finish)])  # type: ignore[arg-type]
    result = await sr.Runtime(sr.MemoryStore()).run(agent_with(model), run_id="r", input="x")
    assert result.status == "failed"
    assert isinstance(result.error, error)


async def test_model_failure_fails_the_run_and_resume_retries() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": "1"})), RuntimeError("503")])
    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    result = await runtime.run(agent_with(model), run_id="r", input="x")
    assert result.status == "failed"
    assert isinstance(result.error, sr.ModelCallFailed)
    assert "503" in str(result.error)
    model.extend([text("recovered")])
    again = await runtime.resume("r")
    assert again.status == "completed" and again.text == "recovered"
    assert len(again.calls) == 1  # the succeeded lookup did not run again


async def test_iteration_limit() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": str(i)})) for i in range(3)])
    agent = agent_with(model, limits=sr.Limits(max_iterations=2))
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "failed"
    assert isinstance(result.error, sr.IterationLimitExceeded)
    assert len(model.requests) == 2


async def test_resuming_after_the_iteration_limit_gives_the_turn_a_new_budget() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": str(i)})) for i in range(3)])
    agent = agent_with(model, limits=sr.Limits(max_iterations=2))
    runtime = sr.Runtime(sr.MemoryStore())
    first = await runtime.run(agent, run_id="r", input="x")
    assert isinstance(first.error, sr.IterationLimitExceeded)
    model.extend([text("finally")])
    again = await runtime.resume("r")
    assert again.status == "completed" and again.text == "finally"
    assert again.error is None
    assert len(model.requests) == 4


async def test_turns_continue_a_conversation_until_max_turns() -> None:
    model = ScriptedModel([text("one"), text("two")])
    agent = agent_with(model, limits=sr.Limits(max_turns=2))
    runtime = sr.Runtime(sr.MemoryStore())
    assert (await runtime.run(agent, run_id="r", input="first")).text == "one"
    second = await runtime.run(agent, run_id="r", input="second", input_id="m2")
    assert second.text == "two"
    assert [m.text for m in model.requests[1].messages] == ["first", "one", "second"]
    third = await runtime.run(agent, run_id="r", input="third", input_id="m3")
    assert third.status == "failed"
    assert isinstance(third.error, sr.TurnLimitExceeded)


async def test_direct_result_tools_end_the_turn_with_their_results() -> None:
    @sr.tool(direct_result=True)
    def report(name: str) -> str:
        """Report."""
        return f"report for {name}"

    model = ScriptedModel([tool_calls(("report", {"name": "q3"}))])
    agent = sr.Agent(name="a", model=model, tools=[report])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "completed"
    assert result.text == "report for q3"
    assert len(model.requests) == 1
    model.assert_complete()


async def test_direct_result_with_a_failed_call_goes_back_to_the_model() -> None:
    @sr.tool(direct_result=True)
    def report(name: str) -> str:
        """Report."""
        raise KeyError(name)

    model = ScriptedModel([tool_calls(("report", {"name": "q3"})), text("sorry")])
    agent = sr.Agent(name="a", model=model, tools=[report])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.text == "sorry"


async def test_completed_run_resumed_without_input_returns_its_result() -> None:
    model = ScriptedModel([text("hi")])
    runtime = sr.Runtime(sr.MemoryStore())
    await runtime.run(agent_with(model), run_id="r", input="x")
    again = await runtime.resume("r")
    assert again.status == "completed" and again.text == "hi"
    assert len(model.requests) == 1


async def test_same_input_id_is_not_added_twice() -> None:
    model = ScriptedModel([text("hi"), text("again")])
    runtime = sr.Runtime(sr.MemoryStore())
    agent = agent_with(model)
    await runtime.run(agent, run_id="r", input="x", input_id="m1")
    result = await runtime.run(agent, run_id="r", input="x", input_id="m1")
    assert result.text == "hi"  # nothing new: no second turn
    assert len(model.requests) == 1


async def test_call_ids_number_tool_calls_and_blocks_link_to_them() -> None:
    model = ScriptedModel(
        [
            tool_calls(("lookup", {"order_id": "1"}), ("lookup", {"order_id": "2"}), content="Hm"),
            text("ok"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent_with(model), run_id="r", input="x")
    assert [c.id for c in result.calls] == ["m1.c1", "m1.c2"]
    assert [(b.kind, b.call_id) for b in result.blocks] == [
        ("input", None),  # the input the run took, then the model's blocks
        ("content", None),
        ("tool_call", "m1.c1"),
        ("tool_call", "m1.c2"),
        ("content", None),
    ]
    assert [b.position for b in result.blocks] == [0, 1, 2, 3, 4]
    assert [b.model_call_id for b in result.blocks] == ["", "m1", "m1", "m1", "m2"]
