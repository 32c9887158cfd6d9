"""Read-back results (the offload read tool's) are cleared like any other result.

A 40,000-character result read back in 10 chunks on a 6,000-token window, and two large reads
followed by hundreds of rounds: every request stays inside the window, and summaries stay rare.
"""

from __future__ import annotations

import steadyrun as sr
from steadyrun.chat import ModelRequest
from steadyrun.context import (
    DEFAULT_SUMMARY_INSTRUCTION,
    READ_TOOL,
    ContextPolicy,
    estimate_request,
    read_tool,
)
from steadyrun.testing import FunctionModel, call, text, tool_calls
from steadyrun.tools import ToolContext

WINDOW = 6_000


class Reader:
    """Makes one large result, reads it back with ``reads`` (offset, length), then works."""

    def __init__(self, reads: list[tuple[int, int]], rounds: int) -> None:
        self.reads = reads
        self.rounds = rounds
        self.requests: list[ModelRequest] = []
        self.summaries = 0
        self.calls = 0

    async def respond(self, request: ModelRequest) -> sr.ModelResponse:
        self.requests.append(request)
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            self.summaries += 1
            return text("SUMMARY: a large result was read back; work is in progress.")
        self.calls += 1
        n = self.calls
        if n == 1:
            return tool_calls(call("fetch", {}, id="f"))
        if n - 2 < len(self.reads):
            offset, length = self.reads[n - 2]
            args = {"ref": "m1.c1", "offset": offset, "length": length}
            return tool_calls(call(READ_TOOL, args, id=f"r{n}"))
        if n - 2 - len(self.reads) < self.rounds:
            return tool_calls(call("work", {"n": n}, id=f"w{n}"))
        return text("done")

    def agent(self) -> sr.Agent:
        @sr.tool(concurrency_key="")
        def fetch() -> str:
            """A result far larger than the window."""
            return "".join(f"{i:07d}." for i in range(5_000))  # 40,000 characters

        @sr.tool(concurrency_key="")
        def work(n: int) -> str:
            """A step with a mid-sized result."""
            return f"step {n}: " + "y" * 800

        return sr.Agent(
            name="reader",
            model=FunctionModel(self.respond),
            tools=[fetch, work],
            context=ContextPolicy(window=WINDOW),
            limits=sr.Limits(max_iterations=1_000),
        )


async def test_a_result_read_back_in_chunks_keeps_every_request_inside_the_window() -> None:
    model = Reader([(i * 4_000, 4_000) for i in range(10)], rounds=100)
    result = await sr.Runtime(sr.MemoryStore()).run(model.agent(), run_id="r", input="go")
    assert result.status == "completed", result.error
    sizes = [estimate_request(r) for r in model.requests]
    assert max(sizes) <= WINDOW, (max(sizes), sum(s > WINDOW for s in sizes))
    reads = [c for c in result.calls if c.name == READ_TOOL]
    assert len(reads) == 10 and all(c.status == "succeeded" for c in reads)
    assert (reads[0].result or "").startswith("0000000.0000001.")


async def test_two_reads_do_not_make_every_later_call_pay_for_a_summary() -> None:
    model = Reader([(0, 8_000), (8_000, 8_000)], rounds=400)
    result = await sr.Runtime(sr.MemoryStore()).run(model.agent(), run_id="r", input="go")
    assert result.status == "completed", result.error
    assert max(estimate_request(r) for r in model.requests) <= WINDOW
    work = len(model.requests) - model.summaries
    # Before: a summary ran before about every second model call (446 in 896 requests).
    assert model.summaries <= work // 10, (model.summaries, work)


async def test_a_read_returns_no_more_than_its_size_bound_and_says_where_to_go_on() -> None:
    ctx = ToolContext(
        run_id="r",
        call_id="m2.c1",
        tool_name=READ_TOOL,
        provider_call_id="r2",
        read_result=lambda ref: "é" * 5_000,
    )
    tool = read_tool(max_bytes=1_000)
    got = await tool.invoke(tool.validate('{"ref": "m1.c1", "length": 20000}'), ctx)
    assert len(got.encode()) <= 1_000
    chunk, note = got.rsplit("\n", 1)
    assert chunk == "é" * len(chunk) and len(chunk) > 300
    assert f"continue with offset={len(chunk)}" in note
    # Without a bound the length asked for is what comes back.
    unbounded = read_tool()
    got = await unbounded.invoke(unbounded.validate('{"ref": "m1.c1", "length": 3000}'), ctx)
    assert got.startswith("é" * 3_000 + "\n")
