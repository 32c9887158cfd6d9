"""Deferred tools: hidden until advertised, from the next model call on, kept in the checkpoint."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.extensions import DeferredTools
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool
async def convert_currency(amount: float, to: str) -> str:
    """Convert an amount of euros to another currency.

    Args:
        amount: Euros.
        to: Currency code.
    """
    return f"{amount * 2} {to}"


@sr.tool
async def weather(city: str) -> str:
    """Tell the weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


def names(request: sr.ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_tools_appear_after_the_search_that_advertises_them() -> None:
    model = ScriptedModel(
        [
            tool_calls(("search_tools", {"query": "currency convert"})),
            tool_calls(("convert_currency", {"amount": 2, "to": "USD"})),
            text("4 USD"),
        ]
    )
    agent = sr.Agent(name="a", model=model, extensions=[DeferredTools([convert_currency, weather])])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="d", input="2 EUR in USD?")
    assert result.status == "completed"
    assert names(model.requests[0]) == ["search_tools"]
    assert names(model.requests[1]) == ["convert_currency", "search_tools"]
    assert "convert_currency" in (result.call("m1.c1").result or "")
    assert result.call("m2.c1").result == "4.0 USD"
    assert result.extensions == {"deferred_tools": ["convert_currency"]}


async def test_a_hidden_tool_called_anyway_does_not_run() -> None:
    ran: list[str] = []

    @sr.tool
    async def delete_all() -> str:
        """Delete everything."""
        ran.append("x")
        return "deleted"

    model = ScriptedModel([tool_calls(("delete_all", {})), text("ok")])
    agent = sr.Agent(name="a", model=model, extensions=[DeferredTools([delete_all])])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="d", input="go")
    record = result.call("m1.c1")
    assert record.status == "failed" and "search_tools" in (record.error or "")
    assert ran == []


async def test_advertised_tools_survive_a_crash_and_a_resume() -> None:
    store = sr.MemoryStore()
    crash = asyncio.Event()

    @sr.tool
    async def stall() -> str:
        """Hangs."""
        crash.set()
        await hang()
        return ""

    first = ScriptedModel([tool_calls(("search_tools", {"query": "weather"}), ("stall", {}))])
    agent = sr.Agent(name="a", model=first, tools=[stall], extensions=[DeferredTools([weather])])
    await crash_when(sr.Runtime(store).run(agent, run_id="d", input="go"), crash)
    second = ScriptedModel([tool_calls(("weather", {"city": "Oslo"})), text("sunny")])
    result = await sr.Runtime(store, agents=[replace(agent, model=second)]).resume("d")
    assert "weather" in names(second.requests[0])
    assert result.call("m2.c1").result == "sunny in Oslo"


def test_search_ranks_by_words_and_is_bounded() -> None:
    ext = DeferredTools([convert_currency, weather], max_results=1)
    assert [t.name for t in ext.search("weather in a city")] == ["weather"]
    assert [t.name for t in ext.search("euros")] == ["convert_currency"]
    assert ext.search("zebra") == []
    with pytest.raises(sr.UsageError):
        DeferredTools([weather], max_results=0)
