"""Model deltas reach observers while a streaming model call runs (issue 21 item 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from steadyrun import Agent, MemoryStore, Observer, Runtime
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, accumulate, deltas_of
from steadyrun.runtime._extension import Extension, ModelCall
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls


class Deltas(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, ResponseDelta]] = []

    def on_model_delta(self, run_id: str, model_call_id: str, delta: ResponseDelta) -> None:
        self.seen.append((run_id, model_call_id, delta))


class Respond:
    """A client with no ``stream``: runs of it keep working, without deltas."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return text("plain")


async def test_text_fragments_reach_observers_and_add_up_to_the_stored_answer() -> None:
    seen = Deltas()
    model = ScriptedModel([text("hello streaming world")])
    runtime = Runtime(MemoryStore(), observers=[seen])
    result = await runtime.run(Agent(name="a", model=model), run_id="r", input="hi")
    assert result.text == "hello streaming world"
    assert len(seen.seen) > 3  # fragments of 3 characters, not one whole text
    assert {(r, m) for r, m, _ in seen.seen} == {("r", "m1")}
    assert "".join(d.text for _, _, d in seen.seen) == "hello streaming world"
    assert all(d.part != "finish" for _, _, d in seen.seen)


async def test_tool_argument_and_thinking_fragments_reach_observers() -> None:
    seen = Deltas()
    model = ScriptedModel([tool_calls(("echo", {"value": "abcdefgh"})), text("done")])
    from steadyrun import tool

    @tool
    def echo(value: str) -> str:
        """Echo.

        Args:
            value: The value.
        """
        return value

    runtime = Runtime(MemoryStore(), observers=[seen])
    result = await runtime.run(Agent(name="a", model=model, tools=[echo]), run_id="r", input="x")
    assert result.status == "completed"
    args = "".join(d.arguments for _, m, d in seen.seen if m == "m1" and d.part == "tool_call")
    assert args.replace(" ", "") == '{"value":"abcdefgh"}'
    assert len([d for *_, d in seen.seen if d.part == "tool_call"]) > 1


async def test_a_client_that_does_not_stream_still_runs() -> None:
    seen = Deltas()
    runtime = Runtime(MemoryStore(), observers=[seen])
    result = await runtime.run(Agent(name="a", model=Respond()), run_id="r", input="hi")
    assert result.text == "plain" and seen.seen == []


async def test_without_a_delta_listener_the_model_is_not_streamed() -> None:
    streamed: list[bool] = []

    def stream_fn(request: ModelRequest) -> list[ResponseDelta]:
        streamed.append(True)
        return deltas_of(text("s"))

    model = FunctionModel(lambda r: text("r"), stream_fn=stream_fn)
    result = await Runtime(MemoryStore()).run(Agent(name="a", model=model), run_id="r", input="x")
    assert result.text == "r" and streamed == []


async def test_an_observer_that_raises_on_deltas_does_not_break_the_run() -> None:
    class Broken(Observer):
        def on_model_delta(self, run_id: str, model_call_id: str, delta: Any) -> None:
            raise RuntimeError("boom")

    seen = Deltas()
    model = ScriptedModel([text("fine answer")])
    runtime = Runtime(MemoryStore(), observers=[Broken(), seen])
    result = await runtime.run(Agent(name="a", model=model), run_id="r", input="hi")
    assert result.text == "fine answer"
    assert result.observer_errors > 0
    assert "".join(d.text for _, _, d in seen.seen) == "fine answer"


async def test_a_slow_observer_gets_every_fragment_and_the_run_completes() -> None:
    class Slow(Deltas):
        async def on_model_delta(self, run_id: str, model_call_id: str, delta: Any) -> None:
            await asyncio.sleep(0.001)
            self.seen.append((run_id, model_call_id, delta))

    slow = Slow()
    model = ScriptedModel([text("x" * 30)])
    result = await Runtime(MemoryStore(), observers=[slow]).run(
        Agent(name="a", model=model), run_id="r", input="hi"
    )
    assert result.text == "x" * 30 and "".join(d.text for *_, d in slow.seen) == "x" * 30


async def test_deltas_pass_inside_the_model_middleware() -> None:
    wrapped: list[str] = []

    class Wrap(Extension):
        name = "wrap"

        async def wrap_model(self, call: ModelCall, next: Any) -> ModelResponse:
            wrapped.append("before")
            response = await next(call)
            wrapped.append("after")
            return response

    seen = Deltas()
    model = ScriptedModel([text("wrapped text")])
    agent = Agent(name="a", model=model, extensions=[Wrap()])
    result = await Runtime(MemoryStore(), observers=[seen]).run(agent, run_id="r", input="hi")
    assert result.text == "wrapped text" and wrapped == ["before", "after"]
    assert "".join(d.text for *_, d in seen.seen) == "wrapped text"


def test_accumulated_fragments_equal_the_response() -> None:
    response = text("abc")
    assert accumulate(deltas_of(response, chunk=1)) == response


class Typist:
    """A streaming model writing ``count`` one-character fragments ``gap`` seconds apart."""

    def __init__(self, count: int, gap: float) -> None:
        self.count, self.gap = count, gap
        self.started_at = self.finished_at = 0.0

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return text("x" * self.count)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        self.started_at = time.monotonic()
        for _ in range(self.count):
            await asyncio.sleep(self.gap)
            yield ResponseDelta(part="text", text="x")
        self.finished_at = time.monotonic()
        yield ResponseDelta(part="finish", finish_reason="stop")


async def test_a_slow_observer_does_not_hold_up_the_model_stream_its_fragments_coalesce() -> None:
    class Sluggish(Deltas):
        async def on_model_delta(self, run_id: str, model_call_id: str, delta: Any) -> None:
            await asyncio.sleep(0.05)
            self.seen.append((run_id, model_call_id, delta))

    slow, model = Sluggish(), Typist(count=200, gap=0.001)
    result = await Runtime(MemoryStore(), observers=[slow]).run(
        Agent(name="a", model=model), run_id="r", input="go"
    )
    # 200 deliveries of 50 ms would take 10 s; the stream is read at the model's own pace.
    assert model.finished_at - model.started_at < 2.0
    assert 1 <= len(slow.seen) < 200
    assert "".join(d.text for *_, d in slow.seen) == result.text == "x" * 200


async def test_a_crash_mid_stream_stops_the_delivery_too() -> None:
    seen, model = Deltas(), Typist(count=200, gap=0.002)
    runtime = Runtime(MemoryStore(), observers=[seen])
    task = asyncio.ensure_future(runtime.run(Agent(name="a", model=model), run_id="r", input="go"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    count = len(seen.seen)
    await asyncio.sleep(0.05)
    assert 0 < count == len(seen.seen) < 200


async def test_a_middleware_that_answers_by_itself_streams_nothing() -> None:
    class Cache(Extension):
        name = "cache"

        async def wrap_model(self, call: ModelCall, next: Any) -> ModelResponse:
            return text("from the cache")

    seen, model = Deltas(), ScriptedModel([])
    agent = Agent(name="a", model=model, extensions=[Cache()])
    result = await Runtime(MemoryStore(), observers=[seen]).run(agent, run_id="r", input="hi")
    assert result.text == "from the cache" and seen.seen == [] and model.requests == []


async def test_a_listener_that_keeps_up_gets_each_fragment_in_place() -> None:
    # No task of its own, no turn of the loop per fragment: the run's own task hands each
    # fragment over as it reads it (a service streaming many runs paid both per fragment).
    class Where(Deltas):
        def __init__(self) -> None:
            super().__init__()
            self.tasks: set[asyncio.Task[Any] | None] = set()

        async def on_model_delta(self, run_id: str, model_call_id: str, delta: Any) -> None:
            self.tasks.add(asyncio.current_task())
            self.seen.append((run_id, model_call_id, delta))

    where, model = Where(), Typist(count=20, gap=0)
    runtime = Runtime(MemoryStore(), observers=[where])
    task = asyncio.ensure_future(runtime.run(Agent(name="a", model=model), run_id="r", input="go"))
    result = await task
    assert where.tasks == {task}
    assert [d.text for *_, d in where.seen] == ["x"] * 20 and result.text == "x" * 20


async def test_a_listener_that_falls_behind_once_catches_up_in_order() -> None:
    # The first fragment's delivery waits: the ones read meanwhile are joined and follow it,
    # then fragments go in place again; all of them before the response.
    released = asyncio.Event()  # set by the model once ten more fragments are read

    class Once(Deltas):
        async def on_model_delta(self, run_id: str, model_call_id: str, delta: Any) -> None:
            if not self.seen:
                await released.wait()
            self.seen.append((run_id, model_call_id, delta))

    class Counting(Typist):  # fragments that tell their order: "0", "1", ... "9", "0", ...
        async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
            for i in range(self.count):
                if i == 11:
                    released.set()  # fragments 1 to 10 wait behind the first delivery
                await asyncio.sleep(self.gap)
                yield ResponseDelta(part="text", text=str(i % 10))
            yield ResponseDelta(part="finish", finish_reason="stop")

    once, model = Once(), Counting(count=40, gap=0.001)
    result = await Runtime(MemoryStore(), observers=[once]).run(
        Agent(name="a", model=model), run_id="r", input="go"
    )
    texts = [d.text for *_, d in once.seen]
    assert "".join(texts) == result.text == "0123456789" * 4
    assert texts[:2] == ["0", "1234567890"]  # what waited came joined
    assert 2 < len(texts) < 40  # and later fragments one by one again
