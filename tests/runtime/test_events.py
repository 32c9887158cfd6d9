"""``Runtime.stream``: a run as an async iterator of typed events (issue 21 item 2)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import steadyrun as sr
from steadyrun import MemoryStore, Runtime
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage, accumulate
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, text, tool_calls


class Typist:
    """A streaming model writing ``count`` fragments ``gap`` seconds apart."""

    def __init__(self, count: int = 200, gap: float = 0.005) -> None:
        self.count, self.gap = count, gap
        self.asked = 0
        self.finished_at: float | None = None
        self.produced: list[float] = []

    def _deltas(self) -> list[ResponseDelta]:
        words = [ResponseDelta(part="text", text=f"w{i} ") for i in range(self.count)]
        usage = Usage(requests=1, input_tokens=7, output_tokens=self.count)
        return [*words, ResponseDelta(part="finish", finish_reason="stop", usage=usage)]

    async def respond(self, request: ModelRequest) -> ModelResponse:
        self.asked += 1
        return accumulate(self._deltas())

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        self.asked += 1
        for delta in self._deltas():
            if delta.part == "finish":
                self.finished_at = time.monotonic()
            else:
                await asyncio.sleep(self.gap)
                self.produced.append(time.monotonic())
            yield delta


def full_text(count: int) -> str:
    return "".join(f"w{i} " for i in range(count))


async def test_the_iterator_sees_the_text_grow_before_the_response_completes() -> None:
    model, store = Typist(), MemoryStore()
    runtime = Runtime(store)
    agent = sr.Agent(name="typist", model=model)
    seen: list[tuple[float, sr.RunEvent]] = []
    async for event in runtime.stream(agent, run_id="r", input="write"):
        seen.append((time.monotonic(), event))
    events = [e for _, e in seen]
    fragments = [(t, e) for t, e in seen if isinstance(e, sr.TextDelta)]
    assert len(fragments) == 200
    assert model.finished_at is not None
    # Most of the text reached the reader while the model was still writing.
    early = [t for t, _ in fragments if t < model.finished_at]
    assert len(early) >= 150
    assert "".join(e.text for _, e in fragments) == full_text(200)
    # Each fragment reaches the reader soon after the model produced it (loopback, no I/O).
    lags = sorted(t - made for (t, _), made in zip(fragments, model.produced, strict=True))
    assert lags[len(lags) // 2] < 0.05
    assert isinstance(events[0], sr.RunStarted)
    assert isinstance(events[1], sr.ModelCallStarted) and events[1].model_call_id == "m1"
    settled = [e for e in events if isinstance(e, sr.ModelCallSettled)]
    assert len(settled) == 1 and settled[0].response.message.text == full_text(200)
    usage = [e for e in events if isinstance(e, sr.UsageReported)]
    assert usage[0].usage.output_tokens == 200
    end = events[-1]
    assert isinstance(end, sr.RunCompleted) and end.text == full_text(200)
    snap = await store.load("r")
    assert snap is not None
    assert [m.text for m in snap.context if m.role == "assistant"] == [full_text(200)]


async def test_breaking_out_mid_stream_stops_the_run_as_a_crash_and_resume_answers_once() -> None:
    model, store = Typist(count=100, gap=0.002), MemoryStore()
    runtime = Runtime(store)
    agent = sr.Agent(name="typist", model=model)
    fragments = 0
    async with runtime.stream(agent, run_id="r", input="write") as events:
        async for event in events:
            if isinstance(event, sr.TextDelta):
                fragments += 1
                if fragments == 20:
                    break
    assert model.asked == 1
    snap = await store.load("r")
    assert snap is not None and snap.run.status == "running"  # cut off, as by a crash
    assert [m for m in snap.context if m.role == "assistant"] == []
    resumed = [e async for e in runtime.stream_resume("r")]
    assert model.asked == 2  # the model is asked again
    assert isinstance(resumed[-1], sr.RunCompleted) and resumed[-1].text == full_text(100)
    calls = [e.model_call_id for e in resumed if isinstance(e, sr.ModelCallStarted)]
    assert calls == ["m1"]  # the same call again: a display drops what it held for m1
    snap = await store.load("r")
    assert snap is not None
    assert [m.text for m in snap.context if m.role == "assistant"] == [full_text(100)]


async def test_tool_calls_handover_and_suspension_are_events() -> None:
    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Refund?"))
    def refund(amount: int) -> str:
        """Refund.

        Args:
            amount: How much.
        """
        return f"refunded {amount}"

    @sr.tool
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order.
        """
        return f"order {order} is late"

    model = ScriptedModel(
        [
            tool_calls(("lookup", {"order": "A1"})),
            tool_calls(("refund", {"amount": 5})),
            text("refunded"),
        ]
    )
    runtime = Runtime(MemoryStore())
    agent = sr.Agent(name="shop", model=model, tools=[lookup, refund])
    events = [e async for e in runtime.stream(agent, run_id="r", input="refund A1")]
    kinds = [type(e).__name__ for e in events]
    assert "ToolArgumentsDelta" in kinds
    started = [e for e in events if isinstance(e, sr.ToolCallStarted)]
    settled = [e for e in events if isinstance(e, sr.ToolCallSettled)]
    assert [e.call.name for e in started] == ["lookup"]
    assert [(e.call.name, e.call.status) for e in settled] == [("lookup", "succeeded")]
    pending = [e for e in events if isinstance(e, sr.HandoverPending)]
    assert [e.call.name for e in pending] == ["refund"]
    assert isinstance(events[-1], sr.RunSuspended)
    await runtime.decide("r", pending[0].call.id, approve=True)
    resumed = [e async for e in runtime.stream_resume("r")]
    assert isinstance(resumed[-1], sr.RunCompleted) and resumed[-1].text == "refunded"


async def test_a_slow_reader_with_a_small_buffer_gets_every_event_in_order() -> None:
    model = Typist(count=30, gap=0)
    runtime = Runtime(MemoryStore())
    agent = sr.Agent(name="typist", model=model)
    texts = []
    async for event in runtime.stream(agent, run_id="r", input="go", buffer=2):
        await asyncio.sleep(0.001)
        if isinstance(event, sr.TextDelta):
            texts.append(event.text)
    assert "".join(texts) == full_text(30)


async def test_a_failed_run_ends_with_run_failed_and_errors_of_run_are_raised() -> None:
    model = ScriptedModel([RuntimeError("provider down")])
    runtime = Runtime(MemoryStore())
    agent = sr.Agent(name="a", model=model)
    events = [e async for e in runtime.stream(agent, run_id="r", input="hi")]
    assert isinstance(events[-1], sr.RunFailed) and events[-1].result.error is not None
    with pytest.raises(sr.RunNotFoundError):
        async for _ in runtime.stream_resume("nope"):
            pass
    with pytest.raises(sr.UsageError):
        async for _ in runtime.stream(agent, run_id="r2", input="x", buffer=0):
            pass


async def test_a_plain_run_after_a_stream_has_no_event_sink() -> None:
    runtime = Runtime(MemoryStore())
    model = ScriptedModel([text("one"), text("two")])
    agent = sr.Agent(name="a", model=model)
    _ = [e async for e in runtime.stream(agent, run_id="r", input="hi")]
    result = await runtime.run(agent, run_id="r", input="again")
    assert result.text == "two"


async def test_a_bare_break_stops_the_run_too() -> None:
    model, store = Typist(count=100, gap=0.002), MemoryStore()
    runtime = Runtime(store)
    agent = sr.Agent(name="typist", model=model)
    async for event in runtime.stream(agent, run_id="r", input="write"):
        if isinstance(event, sr.TextDelta):
            break
    await asyncio.sleep(0.05)  # the dropped iterator cancelled the execution; it unwinds
    snap = await store.load("r")
    assert snap is not None and snap.run.status == "running"
    assert [m for m in snap.context if m.role == "assistant"] == []
    assert model.asked == 1
    result = await runtime.resume("r")
    assert result.text == full_text(100) and model.asked == 2


async def test_an_observer_sees_the_text_grow_before_the_response_completes() -> None:
    class Watch(sr.Observer):
        def __init__(self) -> None:
            self.at: list[float] = []
            self.text: list[str] = []

        def on_model_delta(self, run_id: str, model_call_id: str, delta: ResponseDelta) -> None:
            self.at.append(time.monotonic())
            self.text.append(delta.text)

    watch, model, store = Watch(), Typist(), MemoryStore()
    runtime = Runtime(store, observers=[watch])
    result = await runtime.run(sr.Agent(name="typist", model=model), run_id="r", input="go")
    assert model.finished_at is not None
    assert len([t for t in watch.at if t < model.finished_at]) == 200
    assert "".join(watch.text) == result.text == full_text(200)
    snap = await store.load("r")
    assert snap is not None
    assert [m.text for m in snap.context if m.role == "assistant"] == [full_text(200)]
