"""Token counting, offloading and the read tool, clearing, summaries, reducer, reservations."""

from __future__ import annotations

import asyncio
import json

import pytest

import steadyrun as sr
from steadyrun.chat import MediaPart, MediaRef, Message, ModelRequest, ToolDefinition
from steadyrun.context import (
    DEFAULT_SUMMARY_INSTRUCTION,
    SUMMARY_META,
    CachedCounter,
    ContextEvent,
    ContextPolicy,
    EstimateCounter,
    ProviderCounter,
    TiktokenCounter,
    estimate_request,
)
from steadyrun.testing import FunctionModel, ScriptedModel, call, text, tool_calls


def test_the_estimate_follows_its_documented_rule() -> None:
    request = ModelRequest(
        instructions="abcd" * 10,  # 40 bytes: 10 tokens
        messages=[
            Message.user("x" * 9),  # 3 tokens + 4 framing
            Message(
                role="user", parts=[MediaPart(ref=MediaRef(key="k", mime="image/png", size=1))]
            ),
            Message(
                role="user",
                parts=[MediaPart(ref=MediaRef(key="k", mime="application/pdf", size=1))],
            ),
        ],
        tools=[ToolDefinition(name="t", description="", parameters={})],
    )
    tool_text = len(("t" + "" + json.dumps({}, separators=(",", ":"))).encode())
    expected = 10 + (3 + 4) + (1000 + 4) + (2000 + 4) + 8 + (tool_text + 3) // 4
    assert estimate_request(request) == expected == EstimateCounter().count(request)
    assert estimate_request(ModelRequest(messages=[Message.user("é" * 4)])) == 4 + 2  # bytes


def test_tiktoken_counts_exactly_with_the_given_encoding() -> None:
    import tiktoken

    # A tiny encoding built here (the real ones are fetched once from the network).
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 256
    encoding = tiktoken.Encoding(
        name="tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={}
    )
    counter = TiktokenCounter(encoding=encoding)
    request = ModelRequest(messages=[Message.user("abab c")])
    assert counter.count(request) == 4 + len(encoding.encode("abab c"))
    assert len(encoding.encode("abab")) == 2
    with pytest.raises(sr.UsageError):
        TiktokenCounter()


async def test_provider_counts_are_cached() -> None:
    calls: list[int] = []

    class Client:
        async def count_tokens(self, request: ModelRequest) -> int:
            calls.append(1)
            return 1234

    cached = CachedCounter(ProviderCounter(Client()))
    request = ModelRequest(messages=[Message.user("hi")])
    assert await cached.count(request) == 1234
    assert await cached.count(request) == 1234
    assert (len(calls), cached.hits, cached.misses) == (1, 1, 1)
    assert await ProviderCounter(object()).count(request) == estimate_request(request)


def test_policies_reject_nonsense() -> None:
    with pytest.raises(sr.UsageError, match="window"):
        ContextPolicy(window=10)
    with pytest.raises(sr.UsageError, match="clear_share"):
        ContextPolicy(window=10_000, clear_share=0.9, summary_share=0.8)
    assert ContextPolicy(window=100_000).offload_bytes() == 40_000
    assert ContextPolicy(window=10_000).offload_bytes() == 4_000


BIG = "".join(f"line {i:05d}: " + "x" * 40 + "\n" for i in range(400))  # ~20 KB


def reader_agent(model: ScriptedModel | FunctionModel, window: int = 10_000) -> sr.Agent:
    @sr.tool(concurrency_key="")
    def fetch_log(name: str) -> str:
        """Fetch a big log."""
        return BIG

    return sr.Agent(name="r", model=model, tools=[fetch_log], context=ContextPolicy(window=window))


async def test_large_results_are_offloaded_and_read_back_in_parts() -> None:
    model = ScriptedModel(
        [
            tool_calls(("fetch_log", {"name": "app"})),
            tool_calls(
                call("read_offloaded_result", {"ref": "m1.c1", "offset": 1500, "length": 100})
            ),
            tool_calls(
                call("read_offloaded_result", {"ref": "../../etc/passwd"}),
                call("read_offloaded_result", {"ref": "m2.c1"}),  # a result that is not offloaded
                call("read_offloaded_result", {"ref": "m7.c1"}),  # no such call
            ),
            text("read it"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(reader_agent(model), run_id="a", input="x")
    assert result.status == "completed"
    shown = model.requests[1].messages[-1].parts[0].content  # type: ignore[union-attr]
    assert shown.startswith(BIG[:1500]) and 'ref="m1.c1"' in shown and len(shown) < 1800
    read = result.call("m2.c1").result or ""
    assert read.startswith(BIG[1500:1600]) and "characters 1500-1600 of" in read
    assert "Invalid arguments" in (result.call("m3.c1").error or "")
    assert "no offloaded or cleared result" in (result.call("m3.c2").error or "")
    assert "no offloaded or cleared result" in (result.call("m3.c3").error or "")
    snap_calls = [c.result for c in result.calls if c.id == "m1.c1"]
    assert snap_calls == [BIG]  # the full result is on the record, not in the context


async def test_another_runs_results_are_out_of_reach() -> None:
    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    first = ScriptedModel([tool_calls(("fetch_log", {"name": "app"})), text("ok")])
    await runtime.run(reader_agent(first), run_id="a", input="x")
    second = ScriptedModel(
        [tool_calls(call("read_offloaded_result", {"ref": "m1.c1"})), text("nothing")]
    )
    agent_b = sr.Agent(name="b", model=second, context=ContextPolicy(window=10_000))
    result = await runtime.run(agent_b, run_id="b", input="read run a's log")
    assert result.call("m1.c1").status == "failed"
    assert BIG[:100] not in json.dumps([m.text for m in second.requests[1].messages])


def rounds_agent(model: FunctionModel, policy: ContextPolicy) -> sr.Agent:
    @sr.tool(concurrency_key="")
    def step(n: int) -> str:
        """One step with a 2 KB result."""
        return f"step {n} " + "y" * 2000

    @sr.tool(concurrency_key="", retain="keep")
    def decision(n: int) -> str:
        """A result that must never be cleared."""
        return f"decision {n}: keep"

    return sr.Agent(
        name="c",
        model=model,
        tools=[step, decision],
        context=policy,
        limits=sr.Limits(max_iterations=10_000),
    )


def stepping(rounds: int, every_decision: int = 0) -> FunctionModel:
    count = 0

    def respond(request: ModelRequest) -> sr.ModelResponse:
        nonlocal count
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            return text("SUMMARY: the agent made steps; decisions are kept verbatim.")
        count += 1
        if count > rounds:
            return text("finished")
        if every_decision and count % every_decision == 0:
            return tool_calls(call("decision", {"n": count}, id=f"c{count}"))
        return tool_calls(call("step", {"n": count}, id=f"c{count}"))

    return FunctionModel(respond)


async def test_clearing_keeps_the_last_rounds_and_pinned_results() -> None:
    events: list[ContextEvent] = []

    class Watch(sr.Observer):
        def on_context(self, run_id: str, event: ContextEvent) -> None:
            events.append(event)

    policy = ContextPolicy(window=6_000, keep_rounds=2, clear_share=0.5, summary_share=0.95)
    model = stepping(10, every_decision=3)
    result = await sr.Runtime(sr.MemoryStore(), observers=[Watch()]).run(
        rounds_agent(model, policy), run_id="c", input="go"
    )
    assert result.status == "completed"
    assert any(e.kind == "cleared" for e in events)
    last = model.requests[-1].messages
    results = [(p.name, p.content) for m in last if m.role == "tool" for p in m.parts]  # type: ignore[union-attr]
    verbatim = [c for n, c in results if not c.startswith("[Result cleared")]
    assert [c.split(" ")[1] for c in verbatim if c.startswith("step")][-2:] == ["8", "10"]
    assert all(c.startswith("decision") or c.startswith("step") for c in verbatim)
    assert {c for n, c in results if n == "decision"} == {
        "decision 3: keep",
        "decision 6: keep",
        "decision 9: keep",
    }
    cleared = [c for n, c in results if c.startswith("[Result cleared")]
    assert cleared and all('read_offloaded_result(ref="m' in c for c in cleared)


async def test_summaries_keep_pinned_rounds_count_usage_and_fail_safe() -> None:
    events: list[str] = []

    class Watch(sr.Observer):
        def on_context(self, run_id: str, event: ContextEvent) -> None:
            events.append(event.kind)

    policy = ContextPolicy(
        window=6_000, keep_rounds=1, clear_share=0.3, summary_share=0.5, summary_tokens=200
    )
    model = stepping(140, every_decision=7)
    result = await sr.Runtime(sr.MemoryStore(), observers=[Watch()]).run(
        rounds_agent(model, policy), run_id="s", input="go"
    )
    assert "summarized" in events
    summaries = [r for r in model.requests if r.instructions == DEFAULT_SUMMARY_INSTRUCTION]
    assert summaries and all(r.settings.max_tokens == 200 for r in summaries)
    assert result.usage.requests == len(model.requests)  # summary calls are counted
    first = result.messages[0]
    assert (first.meta or {}).get(SUMMARY_META) and "SUMMARY" in first.text
    pinned = [
        p.content
        for m in result.messages
        if m.role == "tool"
        for p in m.parts  # type: ignore[union-attr]
        if p.name == "decision"
    ]  # type: ignore[union-attr]
    assert pinned == [f"decision {n}: keep" for n in range(7, 141, 7)]

    # A failing summary call: the run goes on with clearing only, and says so.
    events.clear()

    def broken(request: ModelRequest) -> sr.ModelResponse:
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            raise RuntimeError("summarizer down")
        return inner._fn(request)  # type: ignore[return-value]

    inner = stepping(140)
    result = await sr.Runtime(sr.MemoryStore(), observers=[Watch()]).run(
        rounds_agent(FunctionModel(broken), policy), run_id="f", input="go"
    )
    assert result.status == "completed" and "summary_failed" in events
    assert "summarized" not in events


async def test_reserved_tokens_lower_the_thresholds() -> None:
    base = ContextPolicy(window=8_000, clear_share=0.5, summary_share=0.95)
    reserved = ContextPolicy(
        window=8_000, clear_share=0.5, summary_share=0.95, reserved_tokens=3_000
    )
    assert reserved.budget() == base.budget() - 3_000

    async def first_clear(policy: ContextPolicy) -> int:
        model = stepping(8)
        await sr.Runtime(sr.MemoryStore()).run(rounds_agent(model, policy), run_id="r", input="go")
        for i, request in enumerate(model.requests):
            if any(
                p.content.startswith("[Result cleared")
                for m in request.messages
                for p in m.parts
                if p.kind == "tool_result"
            ):  # type: ignore[union-attr]
                return i
        return len(model.requests)

    assert await first_clear(reserved) < await first_clear(base)


async def test_a_reducer_replaces_the_context_durably() -> None:
    store = sr.MemoryStore()

    def keep_last_four(view: object, request: ModelRequest) -> list[Message] | None:
        msgs = request.messages
        if len(msgs) <= 4:
            return None
        return [Message.user("[older turns dropped by the host]"), *msgs[-3:]]

    model = stepping(6)
    agent = sr.Agent(
        name="h",
        model=model,
        tools=rounds_agent(model, ContextPolicy(window=50_000)).tools[:1],
        context_reducer=keep_last_four,
    )
    result = await sr.Runtime(store).run(agent, run_id="r", input="go")
    assert all(len(r.messages) <= 4 for r in model.requests)
    snap = await store.load("r")
    assert snap is not None and snap.context == result.messages
    assert snap.context[0].text == "[older turns dropped by the host]"


async def test_an_async_reducer_may_leave_the_context_alone() -> None:
    async def nothing(view: object, request: ModelRequest) -> None:
        await asyncio.sleep(0)

    model = ScriptedModel([text("hi")])
    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="n", model=model, context_reducer=nothing), run_id="r", input="x"
    )
    assert result.text == "hi" and [m.text for m in result.messages] == ["x", "hi"]


async def test_cached_counts_ignore_message_ids() -> None:
    calls: list[int] = []

    class Client:
        async def count_tokens(self, request: ModelRequest) -> int:
            calls.append(1)
            return 7

    cached = CachedCounter(ProviderCounter(Client()))
    await cached.count(ModelRequest(messages=[Message.user("hi", id="run-a:input")]))
    await cached.count(ModelRequest(messages=[Message.user("hi", id="run-b:input")]))
    assert len(calls) == 1
