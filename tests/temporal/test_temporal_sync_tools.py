"""A plain ``def`` tool that runs inside the workflow (a deterministic extension's) works there.

On the built-in engine a sync body runs in a worker thread; a Temporal workflow's event loop
takes no thread's callback, so such a body must run on the workflow's loop itself (it is
deterministic and does no I/O, or it could not run in the workflow at all).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import sqlite3  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import extmw_kit as kit  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions import Extension  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402


class Counter(Extension):
    """A deterministic extension (it runs in the workflow) whose tool is a plain function."""

    name = "counter"
    temporal_io = False

    def tools(self) -> Sequence[sr.Tool]:
        @sr.tool
        def count(word: str) -> str:
            """Count a word's letters.

            Args:
                word: The word.
            """
            return f"{word} has {len(word)} letters"

        return [count]


def answer(request: ModelRequest) -> ModelResponse:
    results = [p.content for m in request.messages for p in m.parts if p.kind == "tool_result"]
    if not results:
        return tool_calls(("count", {"word": "steady"}))
    return text(f"done: {results[0]}")


async def test_a_deterministic_extensions_sync_tool_runs_in_the_workflow(
    engine: Any, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "audit.db") as db:  # the kit reads its log around replays
        db.execute("CREATE TABLE log (n INTEGER PRIMARY KEY, hook, detail, inside)")
    agent = sr.Agent(name="audit", model=FunctionModel(answer), extensions=[Counter()])
    async with engine(agent, tmp_path) as run:
        ended = await asyncio.wait_for(run(kit.fresh("sync"), "Count."), 60)
    assert ended.status == "completed"
    assert ended.text == "done: steady has 6 letters"
    assert ended.calls == [("count", "succeeded", "steady has 6 letters", None)]
