from __future__ import annotations

import steadyrun as sr
from steadyrun.records import CallRecord
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool
def ping(n: int) -> int:
    """Ping."""
    return n


async def test_observers_see_responses_and_tool_starts_and_settlements_in_order() -> None:
    events: list[str] = []

    class Recorder(sr.Observer):
        def on_model_response(self, run_id: str, mcid: str, response: sr.ModelResponse) -> None:
            events.append(f"model {mcid} {response.finish_reason}")

        async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
            events.append(f"start {call.id} {call.status}")

        def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
            events.append(f"settle {call.id} {call.status}")

    model = ScriptedModel([tool_calls(("ping", {"n": 1})), text("pong")])
    agent = sr.Agent(name="a", model=model, tools=[ping])
    result = await sr.Runtime(sr.MemoryStore(), observers=[Recorder()]).run(
        agent, run_id="r", input="x"
    )
    assert events == [
        "model m1 tool_calls",
        "start m1.c1 running",
        "settle m1.c1 succeeded",
        "model m2 stop",
    ]
    assert result.observer_errors == 0


async def test_an_observer_that_raises_is_isolated_and_counted() -> None:
    seen: list[str] = []

    class Broken(sr.Observer):
        def on_model_response(self, run_id: str, mcid: str, response: sr.ModelResponse) -> None:
            raise RuntimeError("observer bug")

        async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
            call.status = "failed"  # observers get copies: this changes nothing
            raise ValueError("another bug")

    class Healthy(sr.Observer):
        def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
            seen.append(call.status)

    model = ScriptedModel([tool_calls(("ping", {"n": 1})), text("pong")])
    agent = sr.Agent(name="a", model=model, tools=[ping])
    result = await sr.Runtime(sr.MemoryStore(), observers=[Broken(), Healthy()]).run(
        agent, run_id="r", input="x"
    )
    assert result.status == "completed" and result.text == "pong"
    assert result.calls[0].status == "succeeded"
    assert result.observer_errors == 3
    assert seen == ["succeeded"]
