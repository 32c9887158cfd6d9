"""A long run resumed mid-way rebuilds exactly the context the uninterrupted run had."""

from __future__ import annotations

import asyncio

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import ToolResultPart
from steadyrun.stores._history import encode_entry
from steadyrun.testing import FunctionModel, text, tool_calls

N = 400


def loop_model(n: int) -> FunctionModel:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        done = sum(1 for m in request.messages for p in m.parts if isinstance(p, ToolResultPart))
        if done >= n:
            return text(f"done after {done} tool calls")
        return tool_calls(
            sr.testing.call("echo", {"text": f"{done:06d}" + "x" * 100}, id=f"call_{done}")
        )

    return FunctionModel(respond)


def echo_agent(model: FunctionModel, crash_at: int | None, crashed: asyncio.Event) -> sr.Agent:
    @sr.tool(side_effects=False, concurrency_key="")
    async def echo(text: str) -> str:
        """Echo the text."""
        if crash_at is not None and int(text[:6]) == crash_at:
            crashed.set()
            await hang()
        return text

    return sr.Agent(name="loop", model=model, tools=[echo], limits=sr.Limits(max_iterations=N + 5))


async def test_a_400_iteration_run_resumes_with_an_identical_context() -> None:
    straight_model = loop_model(N)
    straight = await sr.Runtime(sr.MemoryStore()).run(
        echo_agent(straight_model, None, asyncio.Event()), run_id="r", input="go"
    )
    assert straight.text == f"done after {N} tool calls"

    store = sr.MemoryStore()
    crashed = asyncio.Event()
    first_model = loop_model(N)
    await crash_when(
        sr.Runtime(store).run(echo_agent(first_model, N // 2, crashed), run_id="r", input="go"),
        crashed,
    )
    resumed_model = loop_model(N)
    resumed = await sr.Runtime(store).resume(
        "r", agent=echo_agent(resumed_model, None, asyncio.Event())
    )
    assert resumed.status == "completed"
    # echo has no side effects: the interrupted call is "interrupted", the model calls it again.
    interrupted = [c for c in resumed.calls if c.status == "interrupted"]
    assert len(interrupted) == 1
    # Up to the crash, the resumed context is the uninterrupted one, message for message.
    crash_request = first_model.requests[-1].messages
    assert resumed_model.requests[0].messages[: len(crash_request)] == crash_request
    assert crash_request == straight_model.requests[N // 2].messages

    # What the store holds is what the run ended with.
    snap = await store.load("r")
    assert snap is not None and snap.context == resumed.messages


async def test_a_400_iteration_run_crashed_between_steps_resumes_identically() -> None:
    straight_model = loop_model(N)
    straight = await sr.Runtime(sr.MemoryStore()).run(
        echo_agent(straight_model, None, asyncio.Event()), run_id="r", input="go"
    )

    store = sr.MemoryStore()
    crashed = asyncio.Event()
    calls = 0

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        nonlocal calls
        calls += 1
        if calls == N // 2:
            crashed.set()  # the process dies while the model is thinking
        return loop_model(N)._fn(request)  # type: ignore[return-value]

    async def slow(request: sr.ModelRequest) -> sr.ModelResponse:
        out = respond(request)
        if crashed.is_set():
            await hang()
        return out

    await crash_when(
        sr.Runtime(store).run(
            echo_agent(FunctionModel(slow), None, crashed), run_id="r", input="go"
        ),
        crashed,
    )
    resumed = await sr.Runtime(store).resume(
        "r", agent=echo_agent(loop_model(N), None, asyncio.Event())
    )
    assert resumed.text == straight.text
    assert resumed.messages == straight.messages
    assert [c.status for c in resumed.calls] == ["succeeded"] * N


async def test_the_cost_of_a_save_does_not_grow_with_the_history() -> None:
    store = sr.MemoryStore()
    result = await sr.Runtime(store).run(
        echo_agent(loop_model(N), None, asyncio.Event()), run_id="r", input="go"
    )
    assert result.status == "completed"
    # Each save writes the step and its history entry (the step's checkpoint again, with the
    # ids and statuses of its calls): both are checked on their own.
    entries = [len(encode_entry(e)) for e in await store.history("r")]
    steps = [total - entry for total, entry in zip(store.step_bytes, entries, strict=True)]
    assert len(steps) == 2 * N + 2  # start, 2 per iteration, completion
    for sizes in (steps, entries):
        # Steps alternate: after a model response (odd index), after a batch (even index).
        early_batch, late_batch = sizes[10], sizes[2 * N - 2]
        early_model, late_model = sizes[11], sizes[2 * N - 1]
        # Only counters such as "m398" get longer; nothing of the history is written again.
        assert late_batch - early_batch < 40
        assert late_model - early_model < 40
