"""Validating the argument JSON a model wrote, with errors the model can act on.

Each problem is kept as data (``ArgumentIssue``) and phrased by ``describe_issue`` with a run's
``Texts``, so a run in Chinese tells its model in Chinese; the exception's own message is the
English phrasing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from steadyrun._errors import SteadyrunError
from steadyrun._texts import Texts, default_texts
from steadyrun.tools._signature import Binding

__all__ = [
    "ArgumentIssue",
    "IssueKind",
    "ToolArgumentsError",
    "describe_issue",
    "describe_issues",
    "validate_arguments",
]

# Enough for the model to fix its call without flooding the conversation.
MAX_PROBLEMS = 8
_MAX_INPUT_CHARS = 60

IssueKind = Literal[
    "not_json",
    "not_object",
    "missing",
    "unknown",
    "type",
    "choice",
    "bound",
    "multiple",
    "too_short",
    "too_long",
    "pattern",
    "invalid",
    "more",
]


@dataclass(frozen=True, slots=True)
class ArgumentIssue:
    """One problem with a call's arguments, as data any language can phrase.

    Attributes:
        kind: What is wrong (``missing``, ``unknown``, ``type``, ``choice``, ``bound``...).
        path: Where: ``city``, ``items[0].sku``; empty for the arguments as a whole.
        nested: Whether ``path`` names a field inside an argument, not an argument.
        values: The rest of the problem, by placeholder of its ``Texts`` field: ``expected``,
            ``got`` (the value as JSON), ``allowed``, ``bound``, ``limit``, ``error``...
    """

    kind: IssueKind
    path: str = ""
    nested: bool = False
    values: Mapping[str, str] = dataclasses.field(default_factory=dict)


class ToolArgumentsError(SteadyrunError):
    """The arguments a model wrote for a tool call are invalid.

    The runtime tells the model each problem in the run's language; the message is the English
    phrasing, short and written for the model.

    Attributes:
        tool_name: The tool that was called.
        problems: One English line per problem, e.g. ``city: missing required argument``.
        issues: The problems as data (``ArgumentIssue``), when the validator gave them.
    """

    def __init__(
        self,
        tool_name: str,
        problems: Sequence[str] = (),
        *,
        issues: Sequence[ArgumentIssue] = (),
    ) -> None:
        self.tool_name = tool_name
        self.issues = list(issues)
        self.problems = list(problems) or _english(self.issues)
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"Invalid arguments for tool {tool_name!r}:\n{lines}")


def describe_issue(issue: ArgumentIssue, texts: Texts) -> str:
    """One problem, as the run's texts phrase it.

    Args:
        issue: The problem.
        texts: The run's texts (``Texts``).

    Returns:
        The sentence, e.g. ``nights: must be >= 1, got 0``.
    """
    v = issue.values
    path = issue.path or texts.args_whole
    kind = issue.kind
    if kind == "not_json":
        return texts.args_not_json.format(line=v.get("line", "?"), column=v.get("column", "?"))
    if kind == "not_object":
        return texts.args_not_object.format(got=v.get("got", ""))
    if kind == "missing":
        if issue.nested:
            return texts.field_missing.format(path=path)
        return texts.arg_missing.format(path=path)
    if kind == "unknown":
        if issue.nested:
            return texts.field_unknown.format(path=path)
        if not v.get("expected"):
            return texts.arg_unknown_none.format(path=path)
        return texts.arg_unknown.format(path=path, expected=v["expected"])
    got = v.get("got", "")
    if kind == "type":
        return texts.arg_type.format(path=path, expected=v.get("expected", ""), got=got)
    if kind == "choice":
        return texts.arg_choice.format(path=path, allowed=v.get("allowed", ""), got=got)
    if kind == "bound":
        return texts.arg_bound.format(path=path, bound=v.get("bound", ""), got=got)
    if kind == "multiple":
        return texts.arg_multiple.format(path=path, factor=v.get("factor", ""), got=got)
    if kind == "too_short":
        return texts.arg_too_short.format(path=path, limit=v.get("limit", ""), got=got)
    if kind == "too_long":
        return texts.arg_too_long.format(path=path, limit=v.get("limit", ""), got=got)
    if kind == "pattern":
        return texts.arg_pattern.format(path=path, pattern=v.get("pattern", ""), got=got)
    if kind == "more":
        return texts.args_more.format(count=v.get("count", ""))
    return texts.arg_invalid.format(path=path, error=v.get("error", ""), got=got)


def describe_issues(exc: ToolArgumentsError, texts: Texts) -> str:
    """All problems of a validation failure on one line, as the run's texts phrase them.

    A validator that gave only English lines (``problems`` without ``issues``) is quoted as is.

    Args:
        exc: The failure.
        texts: The run's texts (``Texts``).
    """
    if not exc.issues:
        return texts.args_separator.join(exc.problems)
    return texts.args_separator.join(describe_issue(i, texts) for i in exc.issues)


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
        raise ToolArgumentsError(tool_name, issues=_issues(exc, binding)) from None
    # Attribute access (not model_dump) keeps nested models, dataclasses and enums as objects.
    return {param: getattr(instance, field) for param, field in binding.fields}


def capped(issues: list[ArgumentIssue]) -> list[ArgumentIssue]:
    """The first ``MAX_PROBLEMS`` issues, and a count of the rest."""
    if len(issues) <= MAX_PROBLEMS:
        return issues
    more = ArgumentIssue("more", values={"count": str(len(issues) - MAX_PROBLEMS)})
    return [*issues[:MAX_PROBLEMS], more]


def not_json(line: object, column: object) -> ArgumentIssue:
    """The arguments are not JSON; where the parser stopped."""
    return ArgumentIssue("not_json", values={"line": str(line), "column": str(column)})


def not_object(value: Any) -> ArgumentIssue:
    """The arguments are JSON, but not an object."""
    return ArgumentIssue("not_object", values={"got": short_json(value)})


def _issues(exc: ValidationError, binding: Binding) -> list[ArgumentIssue]:
    return capped([_issue(error, binding) for error in exc.errors(include_url=False)])


# Pydantic's error types, by the JSON type the value should have had.
_TYPES = {
    "integer": ("int_type", "int_parsing", "int_from_float", "int_parsing_size"),
    "number": ("float_type", "float_parsing", "decimal_type", "decimal_parsing"),
    "boolean": ("bool_type", "bool_parsing"),
    "string": ("string_type", "str_type"),
    "array": ("list_type", "tuple_type", "set_type", "frozen_set_type"),
    "object": ("dict_type", "model_type", "model_attributes_type", "dataclass_type"),
    "null": ("none_required",),
}
_EXPECTED_TYPE = {kind: name for name, kinds in _TYPES.items() for kind in kinds}
_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}
_POSITION = re.compile(r"line (\d+) column (\d+)")


def _issue(error: ErrorDetails, binding: Binding) -> ArgumentIssue:
    kind = error["type"]
    loc = error["loc"]
    ctx = error.get("ctx") or {}
    if kind == "json_invalid":
        where = _POSITION.search(str(ctx.get("error", "")))
        return not_json(*(where.groups() if where else ("?", "?")))
    if not loc and kind in ("model_type", "model_attributes_type", "dict_type"):
        return not_object(error["input"])
    path = _path(loc)
    nested = len(loc) > 1
    if kind == "missing":
        return ArgumentIssue("missing", path, nested)
    if kind == "extra_forbidden":
        expected = "" if nested else ", ".join(binding.param_names)
        return ArgumentIssue("unknown", path, nested, {"expected": expected})
    got = short_json(error["input"])
    if kind in _EXPECTED_TYPE:
        return ArgumentIssue("type", path, nested, {"expected": _EXPECTED_TYPE[kind], "got": got})
    if kind in ("literal_error", "enum"):
        allowed = _allowed(binding, loc)
        if allowed is not None:
            return ArgumentIssue("choice", path, nested, {"allowed": allowed, "got": got})
    if kind in _BOUNDS:
        op, key = _BOUNDS[kind]
        bound = f"{op} {_number(ctx.get(key))}"
        return ArgumentIssue("bound", path, nested, {"bound": bound, "got": got})
    if kind == "multiple_of":
        factor = _number(ctx.get("multiple_of"))
        return ArgumentIssue("multiple", path, nested, {"factor": factor, "got": got})
    if kind in ("too_short", "string_too_short"):
        limit = str(ctx.get("min_length", ""))
        return ArgumentIssue("too_short", path, nested, {"limit": limit, "got": got})
    if kind in ("too_long", "string_too_long"):
        limit = str(ctx.get("max_length", ""))
        return ArgumentIssue("too_long", path, nested, {"limit": limit, "got": got})
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return ArgumentIssue("pattern", path, nested, {"pattern": pattern, "got": got})
    # A validator of the tool's own types speaks for itself (its words are the host's);
    # anything else keeps pydantic's message.
    reason = ctx.get("error") if kind in ("value_error", "assertion_error") else None
    text = str(reason) if reason is not None else error["msg"]
    return ArgumentIssue("invalid", path, nested, {"error": text, "got": got})


def _allowed(binding: Binding, loc: tuple[int | str, ...]) -> str | None:
    """The values a ``Literal`` or enum at ``loc`` allows, as JSON, from the tool's schema."""
    schema = binding.model.model_json_schema()
    defs = schema.get("$defs", {})
    node: Any = schema
    for part in loc:
        node = _resolve(node, defs, part)
        if node is None:
            return None
    values = _enum(node, defs)
    return ", ".join(json.dumps(v, ensure_ascii=False) for v in values) if values else None


def _resolve(node: Any, defs: Mapping[str, Any], part: int | str) -> Any:
    """The schema of ``part`` (a property name or an item index) inside ``node``."""
    for branch in _branches(node, defs):
        if isinstance(part, str) and part in branch.get("properties", {}):
            return branch["properties"][part]
        if isinstance(part, int):
            prefix = branch.get("prefixItems")
            if isinstance(prefix, list) and part < len(prefix):
                return prefix[part]
            if isinstance(branch.get("items"), dict):
                return branch["items"]
    return None


def _branches(node: Any, defs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``node`` with its ``$ref`` followed, and the alternatives of its ``anyOf``/``allOf``."""
    if not isinstance(node, dict):
        return []
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = defs.get(ref.removeprefix("#/$defs/"), {})
    out = [node]
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in node.get(key, []):
            out += _branches(sub, defs)
    return out


def _enum(node: Any, defs: Mapping[str, Any]) -> list[Any]:
    values: list[Any] = []
    for branch in _branches(node, defs):
        if "const" in branch:
            values.append(branch["const"])
        values += list(branch.get("enum", []))
    return values


def _number(value: Any) -> str:
    return json.dumps(value) if isinstance(value, int | float) else str(value)


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def short_json(value: Any) -> str:
    """A value the model wrote, as short JSON text (cut with ``...``)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _MAX_INPUT_CHARS:
        text = text[: _MAX_INPUT_CHARS - 3] + "..."
    return text


def _english(issues: Sequence[ArgumentIssue]) -> list[str]:
    texts = default_texts()
    return [describe_issue(issue, texts) for issue in issues]
