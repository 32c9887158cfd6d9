"""Acceptance: a 2,000-round run with 4 KB results on a 32k-token window."""

from __future__ import annotations

import asyncio

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import ModelRequest
from steadyrun.context import (
    DEFAULT_SUMMARY_INSTRUCTION,
    SUMMARY_META,
    ContextPolicy,
    estimate_request,
)
from steadyrun.testing import FunctionModel, call, text, tool_calls

ROUNDS = 2_000
WINDOW = 32_000
KEEP = 3
PIN_EVERY = 250


class Loop:
    """A deterministic fake model: one tool round per call, summaries on request."""

    def __init__(self, crash_at: int | None = None, crashed: asyncio.Event | None = None) -> None:
        self.count = 0
        self.requests: list[ModelRequest] = []
        self.summaries = 0
        self.crash_at = crash_at
        self.crashed = crashed

    async def respond(self, request: ModelRequest) -> sr.ModelResponse:
        self.requests.append(request)
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            self.summaries += 1
            return text("SUMMARY: steps done so far; pinned notes kept.")
        step = _steps_done(request)
        if self.crashed is not None and self.crash_at is not None and step == self.crash_at:
            self.crashed.set()
            await hang()
        if step >= ROUNDS:
            return text(f"finished {step} steps")
        if step % PIN_EVERY == 0:
            return tool_calls(call("note", {"n": step}, id=f"n{step}"))
        return tool_calls(call("work", {"n": step}, id=f"w{step}"))


def _steps_done(request: ModelRequest) -> int:
    # The step number the model is at: from the last call it made (the history is trimmed).
    for message in reversed(request.messages):
        for part in reversed(message.parts):
            if part.kind == "tool_call":  # type: ignore[union-attr]
                return int(part.arguments.split(":")[1].strip(" }")) + 1  # type: ignore[union-attr]
    return 0


def agent(model: Loop) -> sr.Agent:
    @sr.tool(concurrency_key="")
    def work(n: int) -> str:
        """A step whose result is 4 KB."""
        return f"result {n}: " + "z" * 4096

    @sr.tool(concurrency_key="", retain="keep")
    def note(n: int) -> str:
        """A note that must survive every trim."""
        return f"note {n}: remember me"

    return sr.Agent(
        name="long",
        model=FunctionModel(model.respond),
        tools=[work, note],
        context=ContextPolicy(window=WINDOW, keep_rounds=KEEP),
        limits=sr.Limits(max_iterations=ROUNDS + 10),
    )


async def test_two_thousand_rounds_stay_inside_the_window() -> None:
    model = Loop()
    result = await sr.Runtime(sr.MemoryStore()).run(agent(model), run_id="r", input="go")
    assert result.status == "completed" and result.text == f"finished {ROUNDS} steps"
    work_requests = [r for r in model.requests if r.instructions != DEFAULT_SUMMARY_INSTRUCTION]
    assert len(work_requests) == ROUNDS + 1
    largest = max(estimate_request(r) for r in model.requests)
    assert largest <= WINDOW, largest
    assert model.summaries >= 1
    last = work_requests[-1].messages
    # The last k rounds are verbatim; every pinned note is still there, verbatim.
    tool_results = [p for m in last if m.role == "tool" for p in m.parts]
    verbatim = [p.content for p in tool_results if p.content.startswith("result ")]  # type: ignore[union-attr]
    assert [v.split(":")[0] for v in verbatim][-KEEP:] == [
        f"result {n}" for n in range(ROUNDS - KEEP, ROUNDS)
    ]
    notes = [p.content for p in tool_results if p.name == "note"]  # type: ignore[union-attr]
    assert notes == [f"note {n}: remember me" for n in range(0, ROUNDS, PIN_EVERY)]
    assert (last[0].meta or {}).get(SUMMARY_META)


async def test_a_run_resumed_after_a_summary_continues_with_the_same_context() -> None:
    straight = Loop()
    done = await sr.Runtime(sr.MemoryStore()).run(agent(straight), run_id="r", input="go")

    store = sr.MemoryStore()
    crashed = asyncio.Event()
    first = Loop(crash_at=1_500, crashed=crashed)  # well after the first summaries
    await crash_when(sr.Runtime(store).run(agent(first), run_id="r", input="go"), crashed)
    assert first.summaries >= 1
    snap = await store.load("r")
    assert snap is not None and (snap.context[0].meta or {}).get(SUMMARY_META)
    # The context at the crash is the one the model was being asked with.
    assert snap.context == first.requests[-1].messages

    second = Loop()
    resumed = await sr.Runtime(store).resume("r", agent=agent(second))
    assert resumed.status == "completed" and resumed.text == done.text
    assert second.requests[0].messages == first.requests[-1].messages
    assert resumed.messages == done.messages
