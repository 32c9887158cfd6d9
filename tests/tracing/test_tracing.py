"""TracingObserver: GenAI-convention spans of runs, turns, model calls and tool calls."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import steadyrun as sr
from steadyrun.service._ops import Operations
from steadyrun.stores import MemoryStore
from steadyrun.testing import ScriptedModel, text, tool_calls
from steadyrun.tracing import TracingObserver, enable


@sr.tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order.
    """
    if order == "bad":
        raise ValueError("no such order")
    return f"{order}: paid"


def _agent() -> sr.Agent:
    model = ScriptedModel(
        [
            tool_calls(("lookup", {"order": "A-1"}), ("lookup", {"order": "bad"})),
            text("A-1 is paid."),
            text("Anything else?"),
        ]
    )
    return sr.Agent(name="support", model=model, tools=[lookup])


def _tracing() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


def _by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_spans_of_a_run_follow_the_genai_conventions() -> None:
    exporter, provider = _tracing()
    observer = TracingObserver(provider)
    runtime = sr.Runtime(MemoryStore(), agents=[_agent()], observers=[observer])
    ops = Operations(runtime)
    await ops.start("t-1", "support", "Is A-1 paid?")
    await ops.drive("t-1")
    await runtime.send("t-1", "Thanks")
    await ops.drive("t-1")
    spans = exporter.get_finished_spans()

    runs = _by_name(spans, "invoke_agent")
    assert [r.name for r in runs] == ["invoke_agent support", "invoke_agent support"]
    assert runs[0].attributes is not None
    assert runs[0].attributes["gen_ai.operation.name"] == "invoke_agent"
    assert runs[0].attributes["steadyrun.run.status"] == "completed"

    chats = _by_name(spans, "chat")
    assert len(chats) == 3
    first = chats[0].attributes
    assert first is not None
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"]
    assert first["gen_ai.usage.input_tokens"] == 10
    assert first["gen_ai.usage.output_tokens"] == 10
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[1].attributes is not None
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("stop",)

    tools = _by_name(spans, "execute_tool")
    assert sorted(t.name for t in tools) == ["execute_tool lookup"] * 2
    ok, bad = sorted(tools, key=lambda t: t.status.status_code == StatusCode.ERROR)
    assert ok.attributes is not None and bad.attributes is not None
    assert ok.attributes["gen_ai.tool.name"] == "lookup"
    assert {ok.attributes["gen_ai.tool.call.id"], bad.attributes["gen_ai.tool.call.id"]} == {
        "call_1",
        "call_2",
    }
    assert bad.status.status_code == StatusCode.ERROR

    turns = _by_name(spans, "turn")
    assert len(turns) == 2
    # The tree: run > turn > chat and tools.
    turn_ids = {t.context.span_id for t in turns}
    run_ids = {r.context.span_id for r in runs}
    assert all(t.parent is not None and t.parent.span_id in run_ids for t in turns)
    assert all(c.parent is not None and c.parent.span_id in turn_ids for c in chats)
    assert all(t.parent is not None and t.parent.span_id in turn_ids for t in tools)
    assert len({s.context.trace_id for s in runs}) == 2  # one trace per execution


async def test_off_by_default_and_enable_adds_one_observer() -> None:
    exporter, provider = _tracing()
    runtime = sr.Runtime(MemoryStore())
    await runtime.run(_agent(), run_id="t-1", input="Is A-1 paid?")
    assert exporter.get_finished_spans() == ()
    observer = enable(runtime, provider)
    assert enable(runtime, provider) is observer
    await runtime.send("t-1", "Thanks")
    await runtime.resume("t-1")
    observer.close()  # no run-end hook in a bare runtime: close ends the run's span
    names = [s.name for s in exporter.get_finished_spans()]
    assert "chat unknown" in names or any(n.startswith("chat") for n in names)
    assert any(n.startswith("invoke_agent") for n in names)


async def test_runs_driven_by_the_runtime_itself_are_traced_end_to_end() -> None:
    exporter, provider = _tracing()
    runtime = sr.Runtime(MemoryStore())
    enable(runtime, provider)
    result = await runtime.run(_agent(), run_id="t-2", input="Is A-1 paid?")
    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    (run,) = _by_name(spans, "invoke_agent")
    assert run.attributes is not None and run.attributes["gen_ai.agent.name"] == "support"
    assert run.attributes["steadyrun.run.status"] == "completed"
    chats = _by_name(spans, "chat")
    assert len(chats) == 2
    for chat in chats:  # each model call's span starts at its request, inside the run
        assert run.start_time is not None and chat.start_time is not None
        assert chat.end_time is not None and run.end_time is not None
        assert run.start_time <= chat.start_time <= chat.end_time <= run.end_time
    tools = _by_name(spans, "execute_tool")
    assert sorted(t.status.status_code.name for t in tools) == ["ERROR", "UNSET"]
