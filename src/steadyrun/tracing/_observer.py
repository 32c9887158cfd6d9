"""``TracingObserver``: an ``Observer`` that turns a run's events into OpenTelemetry spans.

Span tree per execution of a run: ``invoke_agent <agent>`` (the run) > ``turn <n>`` >
``chat <model>`` (a model call) and ``execute_tool <tool>`` (a tool call). The runtime reports
every execution's start and end (``on_run_start``/``on_run_end``), each model call's request
and response, and tool starts and settlements. A turn ends with a response that asks for no
tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from steadyrun.chat import ModelResponse, ToolCallPart
from steadyrun.records import CallRecord
from steadyrun.runtime._observers import Observer

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from steadyrun.runtime import Runtime

__all__ = ["TracingObserver", "enable"]

SYSTEM = "steadyrun"
_FAILED = frozenset({"failed", "interrupted", "needs_review", "rejected", "cancelled"})


@dataclass(slots=True)
class _RunSpans:
    run: Span
    turn: Span | None = None
    turns: int = 0
    last_ns: int = 0
    tools: dict[str, Span] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)


class TracingObserver(Observer):
    """Observer emitting GenAI-convention spans; pass it in ``Runtime(observers=[...])``.

    Args:
        tracer_provider: Where spans go; the global provider by default.
        capture_content: Also record tool arguments and results (may hold personal data).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
    ) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "tracing needs OpenTelemetry: pip install 'steadyrun[tracing]'"
            ) from exc
        self._trace = trace
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer: Tracer = provider.get_tracer("steadyrun")
        self.capture_content = capture_content
        self._runs: dict[str, _RunSpans] = {}

    # -- runtime hooks -------------------------------------------------------------------

    def on_run_start(self, run_id: str, agent: str) -> None:
        """A run's execution starts (its span: ``invoke_agent <agent>``)."""
        self._run(run_id, agent)

    def on_run_end(self, run_id: str, status: str, error: str | None = None) -> None:
        """A run's execution ended with ``status`` (``suspended``, ``completed``...)."""
        spans = self._runs.pop(run_id, None)
        if spans is None:
            return
        for span in spans.tools.values():
            span.end()
        if spans.turn is not None:
            spans.turn.end()
        spans.run.set_attribute("steadyrun.run.status", status)
        if status == "failed":
            self._error(spans.run, error or "the run failed")
        spans.run.end()

    def close(self) -> None:
        """End every span still open (runs whose end was not reported)."""
        for run_id in list(self._runs):
            self.on_run_end(run_id, "unknown")

    def on_model_request(self, run_id: str, model_call_id: str, request: Any) -> None:
        """A model call starts now: its span will begin here."""
        self._run(run_id, None).requests[model_call_id] = self._now()

    def on_model_response(self, run_id: str, model_call_id: str, response: ModelResponse) -> None:
        """One ``chat`` span per model call, under the run's current turn."""
        spans = self._run(run_id, None)
        turn = self._turn(spans)
        model = response.model_name or "unknown"
        now = self._now()
        span = self.tracer.start_span(
            f"chat {model}",
            context=self._trace.set_span_in_context(turn),
            start_time=spans.requests.pop(model_call_id, None) or spans.last_ns or now,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": SYSTEM,
                "gen_ai.request.model": model,
                "gen_ai.response.model": model,
                "gen_ai.response.finish_reasons": [str(response.finish_reason)],
                "gen_ai.usage.input_tokens": response.usage.input_tokens,
                "gen_ai.usage.output_tokens": response.usage.output_tokens,
                "steadyrun.run.id": run_id,
                "steadyrun.model_call.id": model_call_id,
            },
        )
        span.end(end_time=now)
        spans.last_ns = now
        asks = any(isinstance(p, ToolCallPart) for p in response.message.parts)
        if not asks:  # the turn ends with an answer
            turn.end()
            spans.turn = None

    def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        """An ``execute_tool`` span opens when a tool body starts."""
        spans = self._run(run_id, None)
        parent = spans.turn or spans.run
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.system": SYSTEM,
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.provider_call_id or call.id,
            "steadyrun.run.id": run_id,
            "steadyrun.call.id": call.id,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = call.arguments
        old = spans.tools.pop(call.id, None)
        if old is not None:
            old.end()
        spans.tools[call.id] = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=self._trace.set_span_in_context(parent),
            attributes=attributes,
        )

    def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        """The tool's span ends with the call's status (an error status when it failed)."""
        spans = self._run(run_id, None)
        span = spans.tools.pop(call.id, None)
        if span is None:  # settled without a body (rejected, handed over, recovered)
            parent = spans.turn or spans.run
            span = self.tracer.start_span(
                f"execute_tool {call.name}",
                context=self._trace.set_span_in_context(parent),
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.system": SYSTEM,
                    "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.provider_call_id or call.id,
                    "steadyrun.run.id": run_id,
                    "steadyrun.call.id": call.id,
                },
            )
        span.set_attribute("steadyrun.call.status", call.status)
        if self.capture_content and call.result is not None:
            span.set_attribute("gen_ai.tool.call.result", call.result)
        if call.status in _FAILED:
            self._error(span, call.error or call.status)
            span.set_attribute("error.type", call.status)
        span.end()
        spans.last_ns = self._now()

    # -- inside ------------------------------------------------------------------------------

    def _run(self, run_id: str, agent: str | None) -> _RunSpans:
        spans = self._runs.get(run_id)
        if spans is None:
            name = f"invoke_agent {agent}" if agent else "invoke_agent"
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.system": SYSTEM,
                "steadyrun.run.id": run_id,
            }
            if agent:
                attributes["gen_ai.agent.name"] = agent
            span = self.tracer.start_span(name, attributes=attributes)
            spans = self._runs[run_id] = _RunSpans(run=span, last_ns=self._now())
        return spans

    def _turn(self, spans: _RunSpans) -> Span:
        if spans.turn is None:
            spans.turns += 1
            spans.turn = self.tracer.start_span(
                f"turn {spans.turns}",
                context=self._trace.set_span_in_context(spans.run),
                start_time=spans.last_ns or None,
                attributes={"steadyrun.turn": spans.turns},
            )
        return spans.turn

    def _error(self, span: Span, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, message))

    @staticmethod
    def _now() -> int:
        import time

        return time.time_ns()


def enable(runtime: Runtime, tracer_provider: TracerProvider | None = None) -> TracingObserver:
    """Trace ``runtime``'s runs from now on; returns the observer (it is added once)."""
    for observer in runtime._observers:
        if isinstance(observer, TracingObserver):
            return observer
    observer = TracingObserver(tracer_provider)
    runtime._observers.append(observer)
    return observer
