"""Tool names: which names providers accept, and how to make any string into one."""

from __future__ import annotations

import re

__all__ = ["MAX_TOOL_NAME_LENGTH", "safe_tool_name", "validate_tool_name"]

MAX_TOOL_NAME_LENGTH = 64
"""The longest tool name every major provider accepts."""

# The intersection of what OpenAI, Anthropic and Gemini accept for function names.
_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_BAD_CHAR = re.compile(r"[^A-Za-z0-9_-]")


def validate_tool_name(name: object) -> list[str]:
    """Check a tool name against what providers accept.

    Args:
        name: The candidate name.

    Returns:
        The problems found, as readable sentences; empty when the name is valid.
    """
    if not isinstance(name, str):
        return [f"tool name must be a string, got {type(name).__name__}"]
    if _VALID.fullmatch(name):
        return []
    if not name:
        return ["tool name is empty"]
    problems: list[str] = []
    if len(name) > MAX_TOOL_NAME_LENGTH:
        problems.append(
            f"tool name is {len(name)} characters long; at most {MAX_TOOL_NAME_LENGTH} are allowed"
        )
    bad = sorted(set(_BAD_CHAR.findall(name)))
    if bad:
        shown = " ".join(repr(c) for c in bad)
        problems.append(
            f"tool name {name!r} may only contain letters, digits, '_' and '-', not {shown}"
        )
    if not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        problems.append(f"tool name {name!r} must start with a letter or '_'")
    problems.append(f"a valid alternative is {safe_tool_name(name)!r}")
    return problems


def safe_tool_name(name: str) -> str:
    """Turn any string into a valid tool name.

    Characters providers reject become ``_``, a name not starting with a letter or ``_`` gets a
    ``_`` prefix, and the result is cut to 64 characters. Valid names come back unchanged.

    Args:
        name: Any string, e.g. a name taken from an external tool catalogue.

    Returns:
        A name for which ``validate_tool_name`` finds no problem.
    """
    safe = _BAD_CHAR.sub("_", name)
    if not safe or not (safe[0].isalpha() or safe[0] == "_"):
        safe = "_" + safe
    return safe[:MAX_TOOL_NAME_LENGTH]
