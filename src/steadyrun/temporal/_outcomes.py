"""A tool body's outcome as the workflow gets it back from an activity (``ToolOutcome``).

``outcome_value`` returns what the body returned or raises what it raised, as the workflow's
``CallRunner`` expects of a body; the tool and background calls of the workflow both use it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyrun.control import (
        AwaitExternal,
        Complete,
        ControlSignal,
        Detach,
        HostFailure,
        InputRequired,
    )
    from steadyrun.temporal._payloads import ToolOutcome

__all__ = ["Returned", "Unrenderable", "error_type", "outcome_value", "signal_type"]


@dataclass(slots=True)
class Returned:
    """A result the worker rendered already."""

    text: str
    value: Any


@dataclass(slots=True)
class Unrenderable:
    """A result the worker could not render (the rendering error is the call's failure)."""

    error: Exception


_ERROR_TYPES: dict[str, type[Exception]] = {}
_SIGNAL_TYPES: dict[str, type[ControlSignal]] = {}


def error_type(name: str) -> type[Exception]:
    """An exception class named like the one the tool raised (the model reads the name)."""
    found = _ERROR_TYPES.get(name)
    if found is None:
        found = _ERROR_TYPES[name] = type(name, (Exception,), {})
    return found


def signal_type(name: str) -> type[ControlSignal]:
    """A control signal class named like the one the tool raised."""
    found = _SIGNAL_TYPES.get(name)
    if found is None:
        found = _SIGNAL_TYPES[name] = type(name, (ControlSignal,), {})
    return found


def outcome_value(out: ToolOutcome) -> Any:
    """What the body returned, or raise what it raised, as the workflow's ``CallRunner`` expects."""
    kind = out.kind
    if kind == "returned":
        return Returned(out.text or "", out.value)
    if kind == "unrenderable":
        return Unrenderable(error_type(out.error_type or "Exception")(out.text or ""))
    if kind == "complete":
        raise Complete(Returned(out.text or "", out.value), fixed=out.fixed)
    if kind == "await":
        raise AwaitExternal(out.value)
    if kind == "detach":
        raise Detach(out.receipt or "", out.value)
    if kind == "input":
        raise InputRequired(out.prompt or "", out.response_schema, out.state)
    if kind == "signal":
        raise signal_type(out.error_type or "ControlSignal")()
    if kind == "host_failure":
        raise HostFailure(out.text or "")
    if kind == "timeout":
        raise TimeoutError(out.text or "")
    if kind == "cancelled":
        raise asyncio.CancelledError()
    raise error_type(out.error_type or "Exception")(out.text or "")
