"""Validating the argument JSON a model wrote, with errors the model can act on."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from steadyrun._errors import SteadyrunError
from steadyrun.tools._signature import Binding

__all__ = ["ToolArgumentsError", "validate_arguments"]

# Enough for the model to fix its call without flooding the conversation.
_MAX_PROBLEMS = 8
_MAX_INPUT_CHARS = 60


class ToolArgumentsError(SteadyrunError):
    """The arguments a model wrote for a tool call are invalid.

    The message is short and written for the model, which gets it back as an error result so it
    can correct the call.

    Attributes:
        tool_name: The tool that was called.
        problems: One line per problem, e.g. ``city: missing required argument``.
    """

    def __init__(self, tool_name: str, problems: list[str]) -> None:
        self.tool_name = tool_name
        self.problems = list(problems)
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"Invalid arguments for tool {tool_name!r}:\n{lines}")


def validate_arguments(binding: Binding, tool_name: str, arguments: str) -> dict[str, Any]:
    """Parse and validate raw argument JSON against a tool's signature.

    Args:
        binding: The tool's call binding (holds the arguments model).
        tool_name: The tool's name, for the error message.
        arguments: The JSON text the model wrote; blank text counts as ``{}``.

    Returns:
        The validated python values by parameter name, defaults filled in.

    Raises:
        ToolArgumentsError: The text is not JSON, not an object, or does not fit the signature.
    """
    if not arguments.strip():
        arguments = "{}"
    try:
        instance = binding.model.model_validate_json(arguments)
    except ValidationError as exc:
        raise ToolArgumentsError(tool_name, _problems(exc, binding)) from None
    # Attribute access (not model_dump) keeps nested models, dataclasses and enums as objects.
    return {param: getattr(instance, field) for param, field in binding.fields}


def _problems(exc: ValidationError, binding: Binding) -> list[str]:
    errors = exc.errors(include_url=False)
    problems = [_describe(error, binding) for error in errors[:_MAX_PROBLEMS]]
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"... and {len(errors) - _MAX_PROBLEMS} more problem(s)")
    return problems


def _describe(error: ErrorDetails, binding: Binding) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "json_invalid":
        detail = error.get("ctx", {}).get("error", error["msg"])
        return f"the arguments are not valid JSON ({detail})"
    if not loc and kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"the arguments must be a JSON object, got {json_type(error['input'])}"
    path = _path(loc)
    if kind == "missing":
        what = "argument" if len(loc) == 1 else "field"
        return f"{path}: missing required {what}"
    if kind == "extra_forbidden":
        if len(loc) == 1:
            expected = ", ".join(binding.param_names) or "none"
            return f"{path}: unknown argument (expected: {expected})"
        return f"{path}: unknown field"
    return f"{path}: {error['msg']} (got {_short(error['input'])})"


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(arguments)"


def json_type(value: Any) -> str:
    """How the model's error messages name the JSON type of a value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _MAX_INPUT_CHARS:
        text = text[: _MAX_INPUT_CHARS - 3] + "..."
    return text
