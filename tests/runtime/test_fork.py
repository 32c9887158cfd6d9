"""History and fork: a run's steps listed, a new run made from one, on every store.

The workload: a shipping agent whose ``ship`` tool has side effects (a ledger records every
shipment with the run that made it). Its model ships orders 1..9, one call per model call,
then answers: 1 input step + 2 steps per call + 1 final step = 20 steps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import pgkit
import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun._errors import ConflictError, RunNotFoundError, StepNotFoundError, UsageError
from steadyrun.chat import Message, TextPart, ToolCallPart, ToolResultPart
from steadyrun.runtime._fork import ForkedRun, HistoryStep
from steadyrun.stores import MemoryStore, SqliteStore, Store
from steadyrun.testing import FunctionModel, call, text, tool_calls

N = 9
RUN = "ship-1"

pg_dsn = pgkit.database_fixture(scope="module")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "runs.db")
    else:
        from steadyrun.stores import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        made = PostgresStore(dsn, schema=f"fork_{uuid.uuid4().hex[:10]}")
    yield made
    await made.close()


def shipped(request: sr.ModelRequest) -> list[int]:
    """Orders shipped so far, as the tool results in the request say."""
    done = []
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.content.startswith("shipped "):
                done.append(int(part.content.split()[1]))
    return done


def respond(request: sr.ModelRequest) -> sr.ModelResponse:
    done = shipped(request)
    last = request.messages[-1]
    if last.role == "user" and "again" in last.text:
        return text(f"again: {len(done)} shipped")
    missing = [k for k in range(1, N + 1) if k not in done]
    if missing:
        return tool_calls(("ship", {"order": missing[0]}))
    return text(f"shipped {N} orders")


def build(ledger: list[tuple[str, int]], reducer: Any = None) -> sr.Agent:
    @sr.tool(side_effects=True)
    def ship(order: int, ctx: sr.ToolContext) -> str:
        """Ship an order (a side effect).

        Args:
            order: The order number.
        """
        ledger.append((ctx.run_id, order))
        return f"shipped {order}"

    return sr.Agent(
        name="shipper",
        instructions="Ship the orders.",
        model=FunctionModel(respond),
        tools=[ship],
        limits=sr.Limits(max_iterations=50),
        context_reducer=reducer,
    )


async def twenty_steps(store: Store) -> tuple[sr.Runtime, list[tuple[str, int]]]:
    ledger: list[tuple[str, int]] = []
    runtime = sr.Runtime(store, agents=[build(ledger)])
    result = await runtime.run(runtime._agents["shipper"], run_id=RUN, input="Ship 1 to 9.")
    assert result.status == "completed" and result.text == f"shipped {N} orders"
    assert ledger == [(RUN, k) for k in range(1, N + 1)]
    return runtime, ledger


async def test_history_lists_every_step_with_what_it_added(store: Store) -> None:
    runtime, _ = await twenty_steps(store)
    steps = await runtime.history(RUN)
    assert [s.step for s in steps] == list(range(1, 21))
    assert all(isinstance(s, HistoryStep) for s in steps)
    first, response, settled, last = steps[0], steps[1], steps[2], steps[-1]
    assert [m.role for m in first.messages] == ["user"] and first.phase == "model"
    assert [m.role for m in response.messages] == ["assistant"] and response.phase == "batch"
    # The response's step carries the start of its call (one commit for both).
    assert [(c.id, c.name, c.status) for c in response.calls] == [("m1.c1", "ship", "running")]
    assert [m.role for m in settled.messages] == ["tool"] and settled.phase == "model"
    assert last.status == "completed" and last.text == f"shipped {N} orders"
    assert last.phase == "done" and last.usage.requests == N + 1
    assert sum(len(s.messages) for s in steps) == last.context_length == 2 + 2 * N
    assert [s.context_length for s in steps] == sorted(s.context_length for s in steps)


@pytest.mark.parametrize("at", [10, 11])
async def test_fork_at_step_k_of_a_twenty_step_run(store: Store, at: int) -> None:
    runtime, ledger = await twenty_steps(store)
    original = await store.load(RUN)
    assert original is not None
    expected_context = await store.context_at(RUN, at)  # type: ignore[attr-defined]
    forked = await runtime.fork(RUN, at=at, new_run_id="ship-2")
    assert forked == ForkedRun(
        run_id="ship-2", forked_from=RUN, step=at, created=True, status="suspended"
    )
    # The original is untouched: its rows, and its ledger.
    assert await store.load(RUN) == original
    assert ledger == [(RUN, k) for k in range(1, N + 1)]
    fork = await store.load("ship-2")
    assert fork is not None
    assert fork.context == expected_context  # the original's first k steps
    assert fork.run.steps == at and fork.run.agent == "shipper"
    assert [s.step for s in await runtime.history("ship-2")] == [at]
    # Calls after the fork point are not carried; the open batch at step 10 is not run again.
    asked = {c.id for c in original.calls if int(c.model_call_id[1:]) <= (at - 1) // 2 + 1}
    assert {c.id for c in fork.calls} <= asked
    if at == 10:
        open_call = next(c for c in fork.calls if c.id == "m5.c1")
        assert open_call.status == "cancelled" and "did not run" in (open_call.result or "")
    # Both go on independently: the fork ships what its model asks for again.
    result = await runtime.resume("ship-2")
    assert result.status == "completed" and result.text == f"shipped {N} orders"
    first_again = 5 if at == 10 else 6
    assert ledger[N:] == [("ship-2", k) for k in range(first_again, N + 1)]
    assert await store.load(RUN) == original  # the fork's execution changed nothing of it
    again = await runtime.run(runtime._agents["shipper"], run_id=RUN, input="Say it again.")
    assert again.text == f"again: {N} shipped"
    assert [r for r, _ in ledger].count(RUN) == N
    after = await store.load("ship-2")
    assert after is not None and after.context[: len(expected_context)] == expected_context
    assert all(m.text != "Say it again." for m in after.context)


async def test_fork_with_an_edited_model_response(store: Store) -> None:
    runtime, ledger = await twenty_steps(store)
    edit = Message(role="assistant", parts=[ToolCallPart(call_id="", name="ship", arguments="")])
    edit.parts[0] = call("ship", {"order": 99})
    await runtime.fork(RUN, at=10, new_run_id="ship-99", edit=edit)
    fork = await store.load("ship-99")
    assert fork is not None
    assert fork.context[-1].tool_calls[0].arguments == json.dumps({"order": 99})
    assert [c.status for c in fork.calls if c.model_call_id == "m5"] == ["queued"]
    await runtime.resume("ship-99")
    assert ("ship-99", 99) in ledger and ("ship-99", 5) in ledger
    # An edited text answer ends the turn with that text.
    said = Message(role="assistant", parts=[TextPart(text="Nothing more to ship.")])
    done = await runtime.fork(RUN, at=10, new_run_id="ship-text", edit=said)
    assert done.status == "completed"
    result = await runtime.resume("ship-text")
    assert result.status == "completed" and result.text == "Nothing more to ship."
    assert not [r for r, _ in ledger if r == "ship-text"]


async def test_fork_with_an_edited_input(store: Store) -> None:
    runtime, ledger = await twenty_steps(store)
    await runtime.fork(RUN, at=1, new_run_id="ship-again", edit=Message.user("Ship again."))
    result = await runtime.resume("ship-again")
    assert result.text == "again: 0 shipped"
    assert not [r for r, _ in ledger if r == "ship-again"]


async def test_fork_refuses_bad_input_and_is_idempotent(store: Store) -> None:
    runtime, _ = await twenty_steps(store)
    with pytest.raises(RunNotFoundError):
        await runtime.fork("nope", at=1, new_run_id="x")
    with pytest.raises(StepNotFoundError, match="step 21"):
        await runtime.fork(RUN, at=21, new_run_id="x")
    with pytest.raises(UsageError, match="replaces the last message"):
        await runtime.fork(RUN, at=10, new_run_id="x", edit=Message.user("no"))
    with pytest.raises(ConflictError):
        await runtime.fork(RUN, at=3, new_run_id=RUN)
    first = await runtime.fork(RUN, at=3, new_run_id="ship-3")
    again = await runtime.fork(RUN, at=3, new_run_id="ship-3")
    assert first.created and not again.created and again.step == 3
    with pytest.raises(ConflictError, match="ship-3"):
        await runtime.fork(RUN, at=4, new_run_id="ship-3")
    assert await store.load("x") is None


async def test_fork_of_a_fork(store: Store) -> None:
    runtime, _ = await twenty_steps(store)
    await runtime.fork(RUN, at=7, new_run_id="f1")
    await runtime.resume("f1")
    history = await runtime.history("f1")
    assert history[0].step == 7 and history[0].forked_from == (RUN, 7)
    assert history[1].forked_from is None
    await runtime.fork("f1", at=9, new_run_id="f2")
    f2 = await store.load("f2")
    assert f2 is not None and f2.context == await store.context_at("f1", 9)  # type: ignore[attr-defined]
    with pytest.raises(StepNotFoundError, match="fork of ship-1 at 7"):
        await runtime.fork("f1", at=3, new_run_id="f3")


async def test_fork_before_a_context_rewrite(store: Store) -> None:
    def reducer(view: object, request: sr.ModelRequest) -> list[Message] | None:
        messages = request.messages
        return [messages[0], *messages[-2:]] if len(messages) > 6 else None

    ledger: list[tuple[str, int]] = []
    agent = build(ledger, reducer)
    runtime = sr.Runtime(store, agents=[agent])
    await runtime.run(agent, run_id=RUN, input="Ship 1 to 9.")
    steps = await runtime.history(RUN)
    rewrites = [s.step for s in steps if s.rewrote]
    assert rewrites and rewrites[0] > 5
    before = rewrites[0] - 1
    full = await store.context_at(RUN, before)  # type: ignore[attr-defined]
    assert len(full) == steps[before - 1].context_length > 6
    await runtime.fork(RUN, at=before, new_run_id="early")
    fork = await store.load("early")
    assert fork is not None and fork.context == full


async def test_an_edit_given_as_text_keeps_the_role_of_the_message_it_replaces() -> None:
    runtime, ledger = await twenty_steps(MemoryStore())
    await runtime.fork(RUN, at=1, new_run_id="as-input", edit="Ship again.")
    result = await runtime.resume("as-input")
    assert result.text == "again: 0 shipped"
    said = await runtime.fork(RUN, at=10, new_run_id="as-answer", edit="No more.")
    assert said.status == "completed"
    fork = await runtime.store.load("as-answer")
    assert fork is not None and fork.context[-1].role == "assistant"
    assert fork.run.text == "No more." and not fork.context[-1].tool_calls
    again = await runtime.fork(RUN, at=10, new_run_id="as-answer", edit="No more.")
    assert not again.created
    with pytest.raises(UsageError, match="tool message"):
        await runtime.fork(RUN, at=11, new_run_id="as-tool", edit="fake result")


@pytest.mark.parametrize("crash_at", [3, 6])
async def test_history_after_a_crash_is_the_uninterrupted_runs(store: Store, crash_at: int) -> None:
    straight, _ = await twenty_steps(MemoryStore())
    expected = await straight.history(RUN)
    crashed = asyncio.Event()
    calls = 0

    async def dying(request: sr.ModelRequest) -> sr.ModelResponse:
        nonlocal calls
        calls += 1
        if calls == crash_at:  # the process dies while the model thinks
            crashed.set()
            await hang()
        return respond(request)

    ledger: list[tuple[str, int]] = []
    agent = build(ledger)
    agent.model = FunctionModel(dying)
    runtime = sr.Runtime(store, agents=[agent])
    await crash_when(runtime.run(agent, run_id=RUN, input="Ship 1 to 9."), crashed)
    resumed = sr.Runtime(store, agents=[build(ledger)])
    assert (await resumed.resume(RUN)).text == f"shipped {N} orders"
    got = await resumed.history(RUN)
    assert [s.step for s in got] == [s.step for s in expected] == list(range(1, 21))
    for mine, theirs in zip(got, expected, strict=True):
        assert (mine.phase, mine.status, mine.messages) == (
            theirs.phase,
            theirs.status,
            theirs.messages,
        )
        after = await store.context_at(RUN, mine.step)  # type: ignore[attr-defined]
        assert after == await straight.store.context_at(RUN, mine.step)  # type: ignore[attr-defined]
