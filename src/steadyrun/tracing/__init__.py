"""OpenTelemetry spans of runs, turns, model calls and tool calls (GenAI semantic conventions).

Off by default; one setting turns it on::

    from steadyrun.tracing import TracingObserver
    runtime = Runtime(store, agents=[support], observers=[TracingObserver()])

or ``steadyrun.tracing.enable(runtime)`` on a runtime that exists. Spans go to the global
tracer provider (or the one passed). Needs ``opentelemetry-api`` (the ``tracing`` extra); an
exporter is the application's choice (``opentelemetry-sdk``). See docs/tracing.md.
"""

from steadyrun.tracing._observer import TracingObserver, enable

__all__ = ["TracingObserver", "enable"]
