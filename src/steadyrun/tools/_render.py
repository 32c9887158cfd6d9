"""Turning a tool's return value into the text the model reads."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = ["render_result"]


def render_result(value: Any) -> str:
    """Render a tool result as model-visible text.

    Strings pass through unchanged, pydantic models use their own JSON, and everything else
    (dataclasses, dicts, lists, numbers, booleans, ``None``, enums, dates...) becomes JSON.
    Values with no JSON form at all fall back to ``str()``.

    Args:
        value: What the tool returned.

    Returns:
        The text for the tool result part.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=_jsonable)
    except (TypeError, ValueError):
        # e.g. dict keys json cannot write, or a reference cycle
        pass
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)
