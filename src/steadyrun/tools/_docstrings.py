"""A small parser for Google-style docstrings: the description and the ``Args:`` entries."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_HEADER = re.compile(r"(?P<name>[A-Za-z][A-Za-z ]*?)\s*:")
# Only well-known section names end the description, so a line such as "Usage:" inside the
# prose does not cut it short.
_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "attributes",
        "example",
        "examples",
        "except",
        "exceptions",
        "keyword args",
        "keyword arguments",
        "methods",
        "note",
        "notes",
        "other parameters",
        "parameters",
        "params",
        "raises",
        "references",
        "return",
        "returns",
        "see also",
        "todo",
        "warning",
        "warnings",
        "warns",
        "yield",
        "yields",
    }
)
_ARG_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "keyword args",
        "keyword arguments",
        "other parameters",
        "parameters",
        "params",
    }
)
# ``name: text`` or ``name (type): text``; the lazy type match lets types contain parentheses.
_ENTRY = re.compile(
    r"(?P<name>\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\((?P<type>.*?)\))?\s*:(?P<text>.*)"
)


@dataclass(kw_only=True, frozen=True, slots=True)
class Docstring:
    """What a tool takes from its function's docstring.

    Attributes:
        description: The text before the first section (summary and body), stripped.
        params: Description of each documented parameter, by name (``*`` prefixes removed).
    """

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """Parse a Google-style docstring.

    Args:
        doc: The raw docstring (indentation is cleaned here), or ``None``.

    Returns:
        The description and the parameter descriptions found in ``Args:``-like sections.
    """
    if not doc or not doc.strip():
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    seen_section = False
    i = 0
    while i < len(lines):
        section = _section_of(lines[i])
        if section is None:
            if not seen_section:
                description.append(lines[i])
            i += 1
            continue
        seen_section = True
        header_indent = _indent(lines[i])
        i += 1
        body: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > header_indent):
            body.append(lines[i])
            i += 1
        if section in _ARG_SECTIONS:
            params.update(_parse_entries(body))
    return Docstring(description="\n".join(description).strip(), params=params)


def _section_of(line: str) -> str | None:
    match = _HEADER.fullmatch(line.strip())
    if match is None:
        return None
    name = match["name"].lower()
    return name if name in _SECTIONS else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_entries(body: list[str]) -> dict[str, str]:
    entries: list[tuple[str, list[str]]] = []
    entry_indent: int | None = None
    for line in body:
        text = line.strip()
        if not text:
            if entries:
                entries[-1][1].append("")
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY.fullmatch(text) if indent <= entry_indent else None
        if match is not None:
            entries.append((match["name"].lstrip("*"), [match["text"].strip()]))
        elif entries:
            entries[-1][1].append(text)
    return {name: _join(parts) for name, parts in entries}


def _join(parts: list[str]) -> str:
    # Wrapped lines are one sentence to the model; blank lines still separate paragraphs.
    paragraphs: list[list[str]] = [[]]
    for part in parts:
        if part:
            paragraphs[-1].append(part)
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p).strip()
