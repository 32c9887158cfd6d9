"""Turning a tool's return value into the text the model reads."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from steadyrun._errors import UsageError

__all__ = ["render_result"]


def render_result(value: Any) -> str:
    """Render a tool result as model-visible text.

    The conversion rule: strings pass through unchanged, pydantic models use their own JSON,
    and everything with a JSON form becomes JSON: dicts (keys as strings), lists, tuples, sets
    and frozensets (as arrays, in iteration order), numbers, booleans, ``None``, dataclasses,
    enums (their value), dates and times (ISO 8601), UUIDs, decimals and paths (as strings),
    UTF-8 bytes (as a string). Anything else (an arbitrary object, a cycle, bytes that are not
    UTF-8) has no JSON form and is refused rather than shown as its ``str()``: return a string
    to show something else.

    Args:
        value: What the tool returned.

    Returns:
        The text for the tool result part.

    Raises:
        UsageError: ``value`` has no JSON form (the runtime tells the model the call's result
            cannot be shown).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=_jsonable)
    except (TypeError, ValueError, PydanticSerializationError):
        pass  # e.g. dict keys json cannot write: pydantic's conversion knows more
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False)
    except (TypeError, ValueError, PydanticSerializationError) as exc:
        raise UsageError(
            f"a tool result of type {type(value).__name__} has no JSON form ({exc}); "
            "return a string, a JSON value, a dataclass or a pydantic model"
        ) from None


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value)
