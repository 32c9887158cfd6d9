"""Each provider adapter streams a real run's model calls to the observers (issue 21 item 5).

A ``Runtime`` runs an agent with one tool whose model is the adapter, talking to a recorded
streamed exchange (``wire/<provider>_agent_stream.json``: a tool call, then the answer). An
observer records ``on_model_delta``; the fragments of each call, joined by part, must be the
parts stored in the run's context: the text, the tool call's arguments (with its id and name)
and, where the provider has them, the thinking. The local model (llama.cpp, ``local_model``)
is checked the same way with a real run of the packaged model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

import steadyrun as sr
from e2e.local_support import INSTRUCTIONS as LOCAL_INSTRUCTIONS
from e2e.local_support import QUESTION as LOCAL_QUESTION
from e2e.local_support import WEATHER, check_weather_call, require_llama
from providerkit import (
    Wire,
    anthropic_model,
    google_model,
    http_client,
    openai_chat,
    openai_responses,
    order_tool,
    replay_of,
)
from steadyrun.chat import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    accumulate,
)
from steadyrun.models import ModelClient
from steadyrun.models.compat import CompatModel

INSTRUCTIONS = "You help customers track their orders."
QUESTION = "Where is order 4711?"
ANSWER = "Order 4711 shipped on Monday."

lookup_order = order_tool("order {order_id}: shipped on Monday")


def compat(source: Wire) -> CompatModel:
    return CompatModel("http://localhost:8000/v1#Qwen/Qwen3-8B", http_client=http_client(source))


@dataclass(frozen=True)
class Provider:
    name: str
    model: Callable[[Wire], ModelClient]
    thinks: bool  # the fixture's answers carry thinking
    typed: bool = True  # the API sends a tool call's arguments in pieces (Gemini: whole)


PROVIDERS = [
    Provider("openai_chat", openai_chat, thinks=False),
    Provider(
        "openai_responses",
        lambda w: openai_responses(
            w, "o4-mini", extra={"reasoning": {"effort": "medium", "summary": "auto"}}
        ),
        thinks=True,
    ),
    Provider(
        "anthropic",
        lambda w: anthropic_model(
            w, extra={"thinking": {"type": "enabled", "budget_tokens": 10000}}
        ),
        thinks=True,
    ),
    Provider("google", lambda w: google_model(w, include_thoughts=True), thinks=True, typed=False),
    Provider("compat", compat, thinks=True),
]


class Fragments(sr.Observer):
    """Records every fragment, by model call, in the order they came."""

    def __init__(self) -> None:
        self.calls: dict[str, list[ResponseDelta]] = {}

    def on_model_delta(self, run_id: str, model_call_id: str, delta: ResponseDelta) -> None:
        self.calls.setdefault(model_call_id, []).append(delta)


def joined(deltas: list[ResponseDelta]) -> list[tuple[str, str]]:
    """The fragments of one call joined by part, in part order: (kind, text or arguments)."""
    parts: dict[int, tuple[str, list[str]]] = {}
    for d in deltas:
        kind, pieces = parts.setdefault(d.index, (d.part, []))
        assert kind == d.part, f"part {d.index} switched from {kind} to {d.part}"
        pieces.append(d.arguments if d.part == "tool_call" else d.text)
    return [(kind, "".join(pieces)) for _, (kind, pieces) in sorted(parts.items())]


def stored(message: Message) -> list[tuple[str, str]]:
    """The parts of a stored assistant message as ``joined`` gives them (empty ones left out)."""
    out: list[tuple[str, str]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            out.append(("text", part.text))
        elif isinstance(part, ThinkingPart) and part.text:
            out.append(("thinking", part.text))
        elif isinstance(part, ToolCallPart):
            out.append(("tool_call", part.arguments))
    return out


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_fragments_seen_by_an_observer_add_up_to_the_stored_answer(
    provider: Provider,
) -> None:
    replay = replay_of(f"{provider.name}_agent_stream")
    seen = Fragments()
    agent = sr.Agent(
        name="orders",
        model=provider.model(replay),
        instructions=INSTRUCTIONS,
        tools=[lookup_order],
    )
    store = sr.MemoryStore()

    result = await sr.Runtime(store, observers=[seen]).run(agent, run_id="t", input=QUESTION)

    replay.assert_done()
    assert result.status == "completed", result.error
    assert result.text == ANSWER
    snapshot = await store.load("t")
    assert snapshot is not None
    answers = [m for m in snapshot.context if m.role == "assistant"]
    assert len(answers) == 2 and list(seen.calls) == ["m1", "m2"]
    for call_id, answer in zip(seen.calls, answers, strict=True):
        assert joined(seen.calls[call_id]) == stored(answer), call_id
    assert answers[1].text == ANSWER

    # The first call: text, then the tool call announced with its id and name.
    first = seen.calls["m1"]
    (call,) = answers[0].tool_calls
    assert call.name == "lookup_order"
    assert [d.call_id for d in first if d.call_id] == [call.call_id]
    assert [d.name for d in first if d.name] == ["lookup_order"]
    assert json.loads(call.arguments) == {"order_id": "4711"}
    assert [c.provider_call_id for c in result.calls] == [call.call_id]
    # The text came in pieces, not as a whole once the call was over; so did the arguments.
    assert len([d for d in seen.calls["m2"] if d.part == "text"]) > 1
    typed = [d.arguments for d in first if d.part == "tool_call" and d.arguments]
    assert len(typed) > 1 if provider.typed else len(typed) == 1
    thinking = [kind for call_parts in map(stored, answers) for kind, _ in call_parts]
    assert ("thinking" in thinking) == provider.thinks


# -- the local model (llama.cpp) ------------------------------------------------------------


class StreamingToolFirst:
    """The local model, its tool forced until a result is in, then ``none`` (as ``ToolFirst``).

    A base model cannot be trusted to choose; with a named tool or ``none`` llama.cpp streams
    (with ``auto`` and tools it answers in one piece).
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def _settled(self, request: ModelRequest) -> ModelRequest:
        if any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts):
            return replace(request, settings=replace(request.settings, tool_choice="none"))
        return request

    async def respond(self, request: ModelRequest) -> ModelResponse:
        response: ModelResponse = await self.model.respond(self._settled(request))
        return response

    def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        stream: AsyncIterator[ResponseDelta] = self.model.stream(self._settled(request))
        return stream


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    require_llama()
    from steadyrun.models.local import LocalModel

    model = LocalModel(temperature=0)
    yield model
    model.close()


@pytest.mark.local_model
async def test_the_local_models_fragments_add_up_to_the_stored_answer(local: Any) -> None:
    seen = Fragments()
    agent = sr.Agent(
        name="local",
        model=local,
        instructions="Answer in one short sentence.",
        settings=ModelSettings(max_tokens=32, temperature=0),
    )
    store = sr.MemoryStore()

    result = await sr.Runtime(store, observers=[seen]).run(
        agent, run_id="l", input="What is the capital of France?"
    )

    assert result.status == "completed", result.error
    snapshot = await store.load("l")
    assert snapshot is not None
    (answer,) = [m for m in snapshot.context if m.role == "assistant"]
    assert list(seen.calls) == ["m1"]
    assert joined(seen.calls["m1"]) == stored(answer)
    assert answer.text == result.text and answer.text
    assert len(seen.calls["m1"]) > 1  # token by token, not the answer in one piece


@pytest.mark.local_model
async def test_the_local_models_tool_call_and_answer_stream_to_observers(local: Any) -> None:
    @sr.tool(replayable=True)
    def get_weather(city: str, unit: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city.
            unit: celsius or fahrenheit.
        """
        return f"18 degrees {unit}, light rain in {city}"

    seen = Fragments()
    agent = sr.Agent(
        name="weather",
        model=StreamingToolFirst(local),
        instructions=LOCAL_INSTRUCTIONS,
        tools=[get_weather],
        settings=ModelSettings(tool_choice="get_weather", max_tokens=48, temperature=0),
    )
    store = sr.MemoryStore()

    result = await sr.Runtime(store, observers=[seen]).run(agent, run_id="w", input=LOCAL_QUESTION)

    assert result.status == "completed", result.error
    snapshot = await store.load("w")
    assert snapshot is not None
    answers = [m for m in snapshot.context if m.role == "assistant"]
    assert len(answers) == 2 and list(seen.calls) == ["m1", "m2"]
    for call_id, answer in zip(seen.calls, answers, strict=True):
        assert joined(seen.calls[call_id]) == stored(answer), call_id
    (call,) = answers[0].tool_calls
    check_weather_call(call.arguments)
    # The grammar-constrained arguments come token by token too.
    assert len([d for d in seen.calls["m1"] if d.part == "tool_call" and d.arguments]) > 1


@pytest.mark.local_model
async def test_a_local_text_answer_streams_even_when_the_model_may_call_a_tool(
    local: Any,
) -> None:
    # With tool_choice auto the model first picks a call or a text answer (this one: text);
    # the text is then written without tools, and that completion streams.
    request = ModelRequest(
        messages=[Message.user("Say hello.")],
        tools=[WEATHER],
        settings=ModelSettings(tool_choice="auto", max_tokens=32),
    )
    responded = await local.respond(request)
    deltas = [d async for d in local.stream(request)]
    assert accumulate(deltas) == responded
    assert responded.message.tool_calls == [] and responded.message.text
    assert len([d for d in deltas if d.part == "text"]) > 1
