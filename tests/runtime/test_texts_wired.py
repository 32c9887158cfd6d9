"""With ``Texts.chinese()`` the models read no English sentence of the runtime's, anywhere.

Each test drives scripted runs through one area and checks everything the models received:
instructions, messages, tool results, the descriptions the runtime writes. No static fragment
(12 characters or more) of an English default may appear in it (``textskit``). Tool
descriptions from docstrings are the host's and exempt. Here: calls, people and crashes;
``test_texts_wired_context.py``: extensions, media and context management.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import fields
from typing import Annotated, Literal

import pytest
from pydantic import Field

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun._texts import Texts
from steadyrun.control import Confirm, HostFailure
from steadyrun.testing import ScriptedModel, call, text, tool_calls
from steadyrun.tools import schema_tool
from textskit import EN, FRAGMENTS, ZH, assert_no_english, received, results


def test_the_check_knows_the_english_sentences() -> None:
    assert any("was cancelled before it started" in f for f in FRAGMENTS)
    assert any("is not shown: this model cannot read" in f for f in FRAGMENTS)
    with pytest.raises(AssertionError):
        assert_no_english([EN.length_cut])
    assert_no_english([getattr(ZH, f.name) for f in fields(Texts)])


# -- calls ---------------------------------------------------------------------------------


@sr.tool
def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return f"订单 {order_id}：已发货"


async def test_failing_calls_are_explained_in_chinese() -> None:
    @sr.tool(timeout=0.01)
    async def slow() -> str:
        """Takes too long."""
        await asyncio.sleep(5)
        return ""

    @sr.tool
    async def bank() -> str:
        """A host that is down."""
        raise HostFailure("503")

    @sr.tool(policy=lambda view: "yes")  # type: ignore[arg-type,return-value]
    async def odd() -> str:
        """A tool whose policy answers nonsense."""
        return ""

    @sr.tool(completion=True)
    async def finish(answer: str) -> str:
        """Ends the run."""
        return answer

    model = ScriptedModel(
        [
            tool_calls(("slow", {}), ("bank", {}), ("odd", {}), ("nope", {})),
            tool_calls(("finish", {"answer": "x"}), ("lookup", {"order_id": "1"})),
            text("好的。"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=[slow, bank, odd, lookup, finish])
    result = await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="查询")
    assert result.status == "completed"
    first = results(model.requests[1])
    assert ZH.tool_timed_out.format(name="slow", timeout="0.01") in first[0]
    assert ZH.tool_host_failure.format(name="bank", error="503") in first[1]
    assert ZH.bad_policy_outcome.format(kind="str") in first[2]
    assert first[3].startswith("没有名为 'nope' 的工具。可用的工具：")
    assert ZH.completion_not_alone.format(name="finish") in results(model.requests[2])[0]
    assert_no_english(received(model.requests))


@sr.tool
def book(
    room: Literal["single", "double"],
    nights: Annotated[int, Field(ge=1, le=30)],
    code: Annotated[str, Field(pattern=r"^[A-Z]{3}$", min_length=3)] = "ABC",
) -> str:
    """Book a room.

    Args:
        room: The room.
        nights: How many nights.
        code: The booking code.
    """
    return "booked"


@sr.tool
def ping() -> str:
    """Takes no arguments."""
    return "pong"


BAD_ARGUMENTS = [
    call("lookup", {}),  # missing
    call("lookup", {"order_id": 7, "extra": 1}),  # wrong type, unknown argument
    call("book", {"room": "suite", "nights": 0, "code": "ab"}),  # choice, bound, pattern, length
    call("book", {"room": "single", "nights": 2.5}),  # not an integer
    call("lookup", '{"order_id": '),  # not JSON
    call("lookup", "[1, 2]"),  # not an object
    call("ping", {"x": 1}),  # an argument to a tool that takes none
]


async def test_invalid_arguments_are_explained_in_chinese_problem_by_problem() -> None:
    model = ScriptedModel([tool_calls(*BAD_ARGUMENTS), text("好")])
    agent = sr.Agent(name="a", model=model, tools=[lookup, book, ping])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="x")
    errors = results(model.requests[1])
    assert len(errors) == len(BAD_ARGUMENTS)
    for error in errors:
        assert "的参数无效：" in error and error.endswith("。请修正后重新调用。"), error
        # No English word of the validator's: only names, values and JSON/schema terms.
        words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", error)}
        assert not words & ENGLISH_PROBLEM_WORDS, (error, words & ENGLISH_PROBLEM_WORDS)
    assert errors[0] == "lookup 的参数无效：order_id：缺少必需的参数。请修正后重新调用。"
    assert ZH.arg_type.format(path="order_id", expected="string", got="7") in errors[1]
    assert ZH.arg_unknown.format(path="extra", expected="order_id") in errors[1]
    assert ZH.args_separator in errors[1]
    assert (
        ZH.arg_choice.format(path="room", allowed='"single", "double"', got='"suite"')
        in (errors[2])
    )
    assert ZH.arg_bound.format(path="nights", bound=">= 1", got="0") in errors[2]
    assert ZH.arg_type.format(path="nights", expected="integer", got="2.5") in errors[3]
    assert ZH.args_not_json.format(line=1, column=13) in errors[4]
    assert ZH.args_not_object.format(got="[1, 2]") in errors[5]
    assert ZH.arg_unknown_none.format(path="x") in errors[6]
    assert_no_english(received(model.requests))


async def test_invalid_arguments_of_a_schema_tool_are_explained_in_chinese() -> None:
    async def add(a: int, b: int) -> int:
        return a + b

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0},
            "b": {"type": "integer", "enum": [1, 2]},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    adder = schema_tool("add", "Add two numbers.", schema, add)
    model = ScriptedModel(
        [
            tool_calls(
                call("add", {"a": -1, "b": 3, "c": 0}),
                call("add", {"a": "x"}),
                call("add", "{"),
            ),
            text("好"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=[adder])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="x")
    errors = results(model.requests[1])
    for error in errors:
        words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", error)}
        assert not words & ENGLISH_PROBLEM_WORDS, (error, words & ENGLISH_PROBLEM_WORDS)
    assert ZH.arg_bound.format(path="a", bound=">= 0", got="-1") in errors[0]
    assert ZH.arg_choice.format(path="b", allowed="1, 2", got="3") in errors[0]
    assert ZH.arg_unknown.format(path="c", expected="a, b") in errors[0]
    assert ZH.arg_missing.format(path="b") in errors[1]
    assert ZH.arg_type.format(path="a", expected="integer", got='"x"') in errors[1]
    assert ZH.args_not_json.format(line=1, column=2) in errors[2]


# The words of the validators' English problems (and of pydantic's and jsonschema's messages).
ENGLISH_PROBLEM_WORDS = {
    "missing",
    "required",
    "argument",
    "arguments",
    "unknown",
    "expected",
    "must",
    "got",
    "invalid",
    "valid",
    "input",
    "should",
    "not",
    "the",
    "object",
    "more",
    "problem",
    "field",
    "match",
    "pattern",
    "short",
    "long",
    "one",
    "allowed",
    "additional",
    "properties",
    "greater",
    "less",
    "than",
    "equal",
}


async def test_an_agent_without_tools_hears_of_none_in_chinese() -> None:
    model = ScriptedModel([tool_calls(("nope", {})), text("好")])
    agent = sr.Agent(name="a", model=model)
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="x")
    assert results(model.requests[1]) == [ZH.unknown_tool.format(name="nope", available="无")]


# -- people and crashes --------------------------------------------------------------------


async def test_rejected_and_edited_calls_are_told_in_chinese() -> None:
    @sr.tool(policy=lambda view: Confirm(prompt="ok?"))
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return f"已支付 {amount}"

    model = ScriptedModel(
        [tool_calls(("pay", {"amount": 5}), ("pay", {"amount": 9000})), text("好")]
    )
    runtime = sr.Runtime(sr.MemoryStore(), texts=ZH)
    agent = sr.Agent(name="a", model=model, tools=[pay])
    await runtime.run(agent, run_id="r", input="付款")
    await runtime.decide("r", "m1.c1", approve=True, arguments={"amount": 6})
    await runtime.decide("r", "m1.c2", approve=False, reason="金额太大")
    result = await runtime.resume("r")
    assert result.status == "completed"
    edited, rejected = results(model.requests[1])
    assert edited.startswith("（审核者在批准前修改了参数：") and edited.endswith("已支付 6")
    assert rejected == ZH.rejected.format(name="pay", reason="：金额太大")
    assert_no_english(received(model.requests))


async def test_a_call_a_crash_interrupted_is_told_in_chinese() -> None:
    crashed = asyncio.Event()

    def agent(model: ScriptedModel, crash: bool) -> sr.Agent:
        @sr.tool(side_effects=True)
        async def send() -> str:
            """Send."""
            if crash:
                crashed.set()
                await hang()
            return "已发送"

        return sr.Agent(name="a", model=model, tools=[send])

    store = sr.MemoryStore()
    first = ScriptedModel([tool_calls(("send", {}))])
    await crash_when(
        sr.Runtime(store, texts=ZH).run(agent(first, True), run_id="r", input="发"), crashed
    )
    second = ScriptedModel([text("查过了")])
    result = await sr.Runtime(store, texts=ZH).resume("r", agent=agent(second, False))
    assert result.call("m1.c1").status == "needs_review"
    assert results(second.requests[0]) == [ZH.needs_review.format(call_id="call_1", name="send")]
    assert_no_english(received(second.requests))
