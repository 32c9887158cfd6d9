"""A tool result never reaches the model unbounded.

Over its tool's ``max_result_chars`` (default ``DEFAULT_MAX_RESULT_CHARS``) a result is truncated
with a note (without a context policy) or offloaded (with one); the record keeps it whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.context import ContextPolicy
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls
from steadyrun.tools import DEFAULT_MAX_RESULT_CHARS

EN = sr.Texts()


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store = (
        sr.MemoryStore() if request.param == "memory" else sr.SqliteStore(tmp_path / "runs.db")
    )
    try:
        yield made
    finally:
        await made.close()


def last_results(model: ScriptedModel) -> list[ToolResultPart]:
    last = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    return [p for p in last.parts if isinstance(p, ToolResultPart)]


HUGE = 500_000


@sr.tool(concurrency_key="")
def dump() -> str:
    """A result far larger than any window."""
    return "0123456789" * (HUGE // 10)


@sr.tool(concurrency_key="", max_result_chars=None)
def dump_all() -> str:
    """A result its tool wants shown whole."""
    return "z" * HUGE


@sr.tool(concurrency_key="", max_result_chars=50)
def dump_small() -> str:
    """A result its tool bounds tightly."""
    return "q" * 200


async def test_without_a_context_policy_a_huge_result_is_truncated_with_a_note(
    store: Store,
) -> None:
    model = ScriptedModel(
        [tool_calls(("dump", {}), ("dump_all", {}), ("dump_small", {})), text("ok")]
    )
    agent = sr.Agent(name="a", model=model, tools=[dump, dump_all, dump_small])
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed", result.error
    bound = DEFAULT_MAX_RESULT_CHARS
    assert bound < HUGE
    huge, whole, small = (p.content for p in last_results(model))
    note = EN.result_truncated.format(name="dump", size=str(HUGE), shown=str(bound))
    assert huge == dump.render("0123456789" * (HUGE // 10))[:bound] + "\n" + note
    assert whole == "z" * HUGE  # max_result_chars=None: no bound
    assert small == "q" * 50 + "\n" + EN.result_truncated.format(
        name="dump_small", size="200", shown="50"
    )
    # The record keeps the whole result for the host.
    assert len(result.call("m1.c1").result or "") == HUGE


async def test_with_a_context_policy_a_result_over_its_tool_bound_is_offloaded() -> None:
    @sr.tool(concurrency_key="", max_result_chars=100, retain="keep")
    def tight() -> str:
        """A result under the offload size but over its tool's bound."""
        return "k" * 1_000

    @sr.tool(concurrency_key="", max_result_chars=100, retain="intact")
    def whole() -> str:
        """An intact result is never offloaded: its bound truncates it."""
        return "i" * 1_000

    model = ScriptedModel([tool_calls(("tight", {}), ("whole", {})), text("ok")])
    policy = ContextPolicy(window=100_000, preview_chars=40)
    agent = sr.Agent(name="a", model=model, tools=[tight, whole], context=policy)
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "completed", result.error
    offloaded, truncated = (p.content for p in last_results(model))
    assert offloaded.startswith("k" * 40 + "\n") and 'ref="m1.c1"' in offloaded
    assert truncated == "i" * 100 + "\n" + EN.result_truncated.format(
        name="whole", size="1000", shown="100"
    )


def test_the_bound_is_a_tool_trait_checked_at_definition() -> None:
    assert dump.max_result_chars == DEFAULT_MAX_RESULT_CHARS
    assert dump_all.max_result_chars is None
    with pytest.raises(sr.ToolDefinitionError, match="max_result_chars"):

        @sr.tool(max_result_chars=0)
        def nothing() -> str:
            """Shows nothing."""
            return ""
