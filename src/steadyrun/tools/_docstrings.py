"""A tool's description and parameter descriptions from its docstring, parsed by griffe.

Google, NumPy and Sphinx styles are accepted; the style is inferred from the docstring
(Google when nothing else is recognised).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

from griffe import Docstring as GriffeDocstring
from griffe import DocstringSectionKind, Parser, infer_docstring_style

__all__ = ["Docstring", "parse_docstring"]

# Google section names griffe knows. Our parser before griffe also took a header written
# "Args :" or one with no blank line above it; griffe skips such a header as prose, so these
# headers are normalised first and existing tools keep their parameter descriptions.
_GOOGLE_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "attributes",
        "classes",
        "examples",
        "exceptions",
        "functions",
        "keyword args",
        "keyword arguments",
        "methods",
        "modules",
        "other args",
        "other arguments",
        "other params",
        "other parameters",
        "parameters",
        "params",
        "raises",
        "receives",
        "returns",
        "type aliases",
        "type args",
        "type arguments",
        "type params",
        "type parameters",
        "warns",
        "warnings",
        "yields",
    }
)
_HEADER = re.compile(r"(?P<name>[A-Za-z][A-Za-z ]*?)\s*:\s*")
_PARAM_KINDS = (DocstringSectionKind.parameters, DocstringSectionKind.other_parameters)
_TEXT = DocstringSectionKind.text


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
    """Parse a Google-, NumPy- or Sphinx-style docstring.

    Args:
        doc: The raw docstring (indentation is cleaned here), or ``None``.

    Returns:
        The description and the parameter descriptions (of the parameter, keyword and other
        parameter sections).
    """
    if not doc or not doc.strip():
        return Docstring()
    text = inspect.cleandoc(doc)
    parsed = GriffeDocstring(text)
    style, _ = infer_docstring_style(parsed, default=Parser.google)
    if style is Parser.google:
        parsed = GriffeDocstring(_normalise_google_headers(text))
    # warnings=False: griffe would log every parameter without a type in the docstring, which
    # is how tools are meant to be documented (the type is in the signature).
    sections = parsed.parse(style, warnings=False)
    description = sections[0].value if sections and sections[0].kind is _TEXT else ""
    params: dict[str, str] = {}
    for section in sections:
        if section.kind in _PARAM_KINDS:
            for param in section.value:
                # Sphinx writes ``\*args``; star names are documented without their stars.
                params[param.name.lstrip("\\*")] = _join(param.description)
    return Docstring(description=str(description).strip(), params=params)


def _normalise_google_headers(text: str) -> str:
    lines: list[str] = []
    for line in text.splitlines():
        match = _HEADER.fullmatch(line)
        if match is not None and match["name"].lower() in _GOOGLE_SECTIONS:
            if lines and lines[-1].strip():
                lines.append("")
            line = f"{match['name']}:"
        lines.append(line)
    return "\n".join(lines)


def _join(description: str) -> str:
    # Wrapped lines are one sentence to the model; blank lines still separate paragraphs.
    paragraphs = re.split(r"\n\s*\n", description.strip())
    return "\n\n".join(
        " ".join(line.strip() for line in p.splitlines()) for p in paragraphs if p.strip()
    )
