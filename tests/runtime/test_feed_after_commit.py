"""Input appended right after a step's commit: taken at the next safe point, never lost.

Each step's commit tells the loop whether input waits in the run's feed (``save_step``'s
answer), so the loop no longer reads the feed on its own between the commit and the next
model call. Input appended after that answer must still be taken: at the latest one model call
later, exactly once, on every store. The append here runs inside the run's execution (under its
fence), so no wake-up would rescue input the loop missed: the loop itself must take it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import pgkit
import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.records import Step
from steadyrun.stores import FeedMessage
from steadyrun.testing import FunctionModel, call, text, tool_calls

pg_dsn = pgkit.database_fixture(prefix="steadyrun_feedrace")

TOOL_CALLS = 4
LATE = "Also check the weather."
# Steps of the run: 1 takes the input; each tool call then saves two (the response with the
# call's start, the result with the next step); the answer saves the last.
STEPS = range(1, 2 * TOOL_CALLS + 2)


def _results(request: sr.ModelRequest) -> int:
    return sum(
        1
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    )


def _has_late(request: sr.ModelRequest) -> bool:
    return any(m.role == "user" and m.text == LATE for m in request.messages)


@asynccontextmanager
async def _store(kind: str, tmp_path: Path, dsn: str | None) -> AsyncIterator[Any]:
    store: Any
    if kind == "memory":
        store = sr.MemoryStore()
    elif kind == "sqlite":
        store = sr.SqliteStore(tmp_path / "race.db")
    else:
        assert dsn is not None
        store = sr.PostgresStore(dsn)
    try:
        yield store
    finally:
        await store.close()


async def _run_with_append_after(store: Any, at_step: int) -> tuple[sr.RunResult, list[Any], int]:
    """Run a tool loop whose store appends input right after committing step ``at_step``.

    Returns the result, the model's requests and how many requests had been made when the
    input was appended.
    """
    requests: list[sr.ModelRequest] = []
    appended_at: list[int] = []
    save_step: Callable[[str, Step], Awaitable[Any]] = store.save_step

    async def save_then_append(run_id: str, step: Step) -> Any:
        answer = await save_step(run_id, step)
        if run_id == "race" and step.run.steps == at_step and not appended_at:
            appended_at.append(len(requests))
            await store.append(run_id, FeedMessage(id="late", content=LATE))
        return answer

    setattr(store, "save_step", save_then_append)  # noqa: B010 - an instance's method, patched

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        requests.append(request)
        k = _results(request)
        if k < TOOL_CALLS:
            return tool_calls(call("echo", {"text": f"step {k}"}, id=f"call_{k}"))
        return text(f"done after {k} tool calls")

    async def echo(text: str) -> str:
        """Return the text.

        Args:
            text: What to return.
        """
        return text

    agent = sr.Agent(name="race", model=FunctionModel(respond), tools=[sr.tool(echo)])
    result = await sr.Runtime(store).run(agent, run_id="race", input="Run the loop.")
    assert appended_at, f"the run saved no step {at_step}"
    return result, requests, appended_at[0]


@pytest.mark.parametrize("at_step", STEPS)
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_input_appended_after_a_commit_is_taken_one_model_call_later_at_most(
    kind: str, at_step: int, tmp_path: Path
) -> None:
    async with _store(kind, tmp_path, None) as store:
        await _check_taken(store, at_step)


@pytest.mark.parametrize("at_step", STEPS)
async def test_input_appended_after_a_commit_is_taken_on_postgres(
    at_step: int, tmp_path: Path, pg_dsn: str
) -> None:
    async with _store("postgres", tmp_path, pg_dsn) as store:
        await _check_taken(store, at_step)


async def _check_taken(store: Any, at_step: int) -> None:
    result, requests, made = await _run_with_append_after(store, at_step)
    assert result.status == "completed", result.error
    # The model call that follows the commit may miss the input; the one after it may not.
    seen = [i for i, r in enumerate(requests) if _has_late(r)]
    assert seen, f"input appended after step {at_step} never reached the model"
    assert seen[0] <= made + 1, (seen, made)
    assert all(_has_late(r) for r in requests[seen[0] :])
    # Taken once, and the run ends with nothing left in its feed.
    assert [m.text for m in result.messages].count(LATE) == 1
    snap = await store.load("race")
    assert snap is not None
    assert await store.pending("race", snap.checkpoint.claimed_through) == 0


async def test_input_sent_while_the_model_answers_cancels_that_answers_calls() -> None:
    # The batch's first feed check takes what the step before the model call said; the commit
    # that starts the answer's calls sees the input sent meanwhile, and they are cancelled
    # before any body runs, as the read after the model call did.
    runtime: sr.Runtime
    ran: list[str] = []

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if len(request.messages) == 1:
            await runtime.send("r", "Stop, wrong address!", id="stop")
            return tool_calls(
                call("step", {"name": "s1"}, id="c1"), call("step", {"name": "s2"}, id="c2")
            )
        return text("Stopped.")

    @sr.tool
    async def step(name: str) -> str:
        """A step that runs alone."""
        ran.append(name)
        return name

    model = FunctionModel(respond)
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(
        sr.Agent(name="a", model=model, tools=[step]), run_id="r", input="go"
    )
    assert ran == []
    assert [c.status for c in result.calls] == ["cancelled", "cancelled"]
    assert "cancelled before it started" in (result.calls[0].result or "")
    assert [c.started_at for c in result.calls] == [None, None]  # no body ran
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "user"]
    assert second[-1].text == "Stop, wrong address!"
    assert len(model.requests) == 2


class Crash(BaseException):
    """The process dies right after a commit (not an Exception: nothing may catch it)."""


async def _steered_run(store: Any, crash_after: int | None) -> tuple[sr.RunResult, int]:
    """A run whose tool sends input; the "process" dies after committing step ``crash_after``.

    A fresh runtime then resumes the run (as a new process would). Returns the result and
    how many steps the run saved.
    """
    save_step: Callable[[str, Step], Awaitable[Any]] = store.save_step
    saved: list[int] = []

    async def save_then_crash(run_id: str, step: Step) -> Any:
        answer = await save_step(run_id, step)
        saved.append(step.run.steps)
        if step.run.steps == crash_after and saved.count(crash_after) == 1:
            raise Crash
        return answer

    setattr(store, "save_step", save_then_crash)  # noqa: B010 - an instance's method, patched
    runtime: sr.Runtime

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        k = _results(request)
        if k == 0:
            return tool_calls(call("escalate", {}, id="c0"))
        if k == 1:
            if not _has_late(request):
                return text("the input never arrived")
            return tool_calls(call("echo", {"text": "after"}, id="c1"))
        return text("done")

    async def escalate() -> str:
        """Hand the customer's next request to the run."""
        await runtime.send("steered", LATE, id="late")
        return "escalated"

    async def echo(text: str) -> str:
        """Return the text.

        Args:
            text: What to return.
        """
        return text

    agent = sr.Agent(
        name="steered", model=FunctionModel(respond), tools=[sr.tool(escalate), sr.tool(echo)]
    )
    runtime = sr.Runtime(store, agents=[agent])
    try:
        result = await runtime.run(agent, run_id="steered", input="go")
    except Crash:
        runtime = sr.Runtime(store, agents=[agent])  # a new process takes the run over
        result = await runtime.resume("steered")
    return result, len(set(saved))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_crash_right_after_any_commit_loses_no_input_sent_before_it(
    kind: str, tmp_path: Path
) -> None:
    # The uninterrupted run takes the input its tool sent at the safe point after the tool's
    # batch (a step's commit said it waits). A crash right after that commit must not let the
    # resumed run call the model without it: a new process reads the feed itself.
    async with _store(kind, tmp_path, None) as store:
        baseline, steps = await _steered_run(store, None)
    assert baseline.text == "done", baseline.text
    compared = []
    for crash_after in range(1, steps + 1):
        folder = tmp_path / f"crash{crash_after}"
        folder.mkdir()
        async with _store(kind, folder, None) as store:
            result, _ = await _steered_run(store, crash_after)
        if any(c.status != "succeeded" for c in result.calls):
            continue  # a start committed, its body never ran: settled by its traits
        assert result.text == "done", (crash_after, result.text)
        assert result.messages == baseline.messages, crash_after
        compared.append(crash_after)
    assert len(compared) >= steps - 2, compared
