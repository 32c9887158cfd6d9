"""Test doubles (named as fakes) and helpers for testing agents built on steadyrun."""

from steadyrun.testing import conformance
from steadyrun.testing._models import FunctionModel, ScriptedModel, call, text, tool_calls

__all__ = [
    "FunctionModel",
    "ScriptedModel",
    "call",
    "conformance",
    "text",
    "tool_calls",
]
