"""Checks of ``Texts`` fields: placeholders, format strings, field names, language codes."""

from __future__ import annotations

import difflib
import string
from collections.abc import Mapping
from typing import Any

from steadyrun._errors import UsageError

__all__ = ["check_field", "check_names", "language_code", "names"]

_FORMATTER = string.Formatter()


def names(text: str) -> tuple[set[str], list[str]]:
    """The placeholder names of a format string, and what is wrong with its fields.

    Raises:
        ValueError: The string is not a valid format string (unbalanced braces and the like).
    """
    found: set[str] = set()
    problems: list[str] = []
    for _literal, field, spec, _conversion in _FORMATTER.parse(text):
        if field is None:
            continue
        if field == "" or field[0].isdigit():
            problems.append(f"positional placeholder {{{field}}} (use a name)")
        elif not field.isidentifier():
            problems.append(f"placeholder {{{field}}} (use a plain name, no attribute or index)")
            base = field.split(".", 1)[0].split("[", 1)[0]
            if base.isidentifier():
                found.add(base)
        else:
            found.add(field)
        if spec and "{" in spec:
            inner, inner_problems = names(spec)
            found |= inner
            problems += inner_problems
    return found, problems


def _braced(placeholders: set[str] | frozenset[str]) -> str:
    return ", ".join(f"{{{n}}}" for n in sorted(placeholders))


def check_field(field: str, value: object, allowed: frozenset[str]) -> str | None:
    """What is wrong with ``value`` as the text of ``field``; ``None`` when it is fine."""
    if not isinstance(value, str):
        return f"{field} must be a str, got {type(value).__name__}"
    takes = f"it takes exactly {_braced(allowed)}" if allowed else "it takes no placeholders"
    try:
        used, problems = names(value)
    except ValueError as exc:
        return (
            f"{field} is not a valid format string ({exc}); write literal braces as {{{{ and }}}}"
        )
    if missing := allowed - used:
        problems.append(f"missing {_braced(missing)}")
    if extra := used - allowed:
        problems.append(f"extra {_braced(extra)}")
    if not problems:
        try:  # a conversion or format spec that text cannot take, found now, not mid-run
            value.format(**dict.fromkeys(allowed, "x"))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            problems.append(f"it does not format ({type(exc).__name__}: {exc})")
    if problems:
        return f"{field}: {'; '.join(problems)}; {takes}"
    return None


def check_names(changes: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
    """Refuse names in ``changes`` that are not ``fields``, suggesting the closest."""
    unknown = [name for name in changes if name not in fields]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, fields, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    noun = "field" if len(hints) == 1 else "fields"
    raise UsageError(f"Texts has no {noun} {', '.join(hints)}; docs/texts.md lists them all")


def language_code(language: object, languages: Mapping[str, str]) -> str:
    """The built-in language code of a language tag (``UsageError`` when none)."""
    known = ", ".join(f"{code!r} ({name})" for code, name in languages.items())
    if isinstance(language, str):
        tag = language.strip().lower().replace("_", "-")
        if tag == "en" or tag.startswith("en-"):
            return "en"
        if tag in ("zh", "zh-cn", "zh-sg", "zh-my", "zh-hans") or tag.startswith("zh-hans-"):
            return "zh"
    raise UsageError(
        f"no built-in texts for language {language!r}; the known languages are {known}. "
        "For another language, override the fields of Texts.english() (docs/texts.md)"
    )
