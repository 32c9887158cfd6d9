"""Tools defined by a JSON schema rather than a Python signature (e.g. tools of MCP servers)."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import jsonschema
from jsonschema.protocols import Validator
from pydantic import BaseModel

from steadyrun._errors import ToolDefinitionError
from steadyrun.tools._arguments import (
    ArgumentIssue,
    IssueKind,
    ToolArgumentsError,
    capped,
    not_json,
    not_object,
    short_json,
)
from steadyrun.tools._context import ToolContext
from steadyrun.tools._signature import Binding
from steadyrun.tools._threads import run_in_thread
from steadyrun.tools._tool import Tool

__all__ = ["schema_tool", "validate_strictly"]

_REQUIRED = re.compile(r"'(.*)' is a required property")


class _NoArguments(BaseModel):
    """Placeholder argument model: a schema tool validates with its JSON schema instead."""


@dataclass(kw_only=True, frozen=True, slots=True, eq=False)
class _SchemaTool(Tool):
    """A tool whose arguments are checked against a JSON schema and passed on as one dict."""

    _validator: Validator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        Tool.__post_init__(self)
        object.__setattr__(self, "_validator", _validator_for(self.name, self.parameters))

    def validate(self, arguments: str) -> dict[str, Any]:
        """Parse the raw argument JSON and check it against the tool's JSON schema.

        Args:
            arguments: The JSON text of the call's arguments; blank text counts as ``{}``.

        Returns:
            The arguments object as written (no defaults are filled in).

        Raises:
            ToolArgumentsError: The text is not a JSON object or does not fit the schema.
        """
        value = _object(self.name, arguments)
        _check(self.name, self._validator, value)
        return value

    async def invoke(self, args: dict[str, Any], ctx: ToolContext | None = None) -> Any:
        """Call ``function(args, ctx)``; sync functions run in a worker thread unless ``inline``.

        Args:
            args: Validated arguments, as returned by ``validate``.
            ctx: The call's context.

        Returns:
            Whatever the function returned.
        """
        if self._binding.is_async:
            return await self.function(dict(args), ctx)
        if self.inline:
            result = self.function(dict(args), ctx)
        else:
            result = await run_in_thread(partial(self.function, dict(args), ctx), self._pace)
        if inspect.isawaitable(result):
            result = await result
        return result


def schema_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    function: Callable[[dict[str, Any], ToolContext | None], Any],
    **traits: Any,
) -> Tool:
    """Make a tool from a JSON schema and a function taking the arguments as one dict.

    For tools described elsewhere (an MCP server, an OpenAPI document), where argument names
    need not be Python identifiers. Arguments are validated with ``jsonschema`` (the schema's
    ``$schema`` dialect, else draft 2020-12) and passed on exactly as the model wrote them.

    Args:
        name: The tool name (must be valid; see ``safe_tool_name``).
        description: What the tool does, as the model reads it.
        parameters: JSON schema of the arguments object.
        function: Called as ``function(arguments, ctx)`` with the validated arguments and the
            call's ``ToolContext`` (``None`` when invoked outside a run); sync or async.
        **traits: The traits of ``@tool`` (``side_effects``, ``replayable``,
            ``concurrency_key``, ``policy``, ``timeout``, ...).

    Returns:
        The tool.

    Raises:
        ToolDefinitionError: The name, a trait or the schema is invalid (all problems at once).
    """
    known = set(Tool.__dataclass_fields__) - {"name", "description", "parameters", "function"}
    problems = [f"unknown trait {t!r}" for t in sorted(traits) if t not in known or t[0] == "_"]
    if not callable(function):
        problems.append(f"function must be callable, got {type(function).__name__}")
    if problems:
        raise ToolDefinitionError(str(name), problems)
    # The name, the traits and the schema are checked as the tool is built.
    is_async = inspect.iscoroutinefunction(function)
    binding = Binding(function=function, is_async=is_async, model=_NoArguments, fields=())
    return _SchemaTool(
        name=name,
        description=description,
        parameters=parameters,
        function=function,
        _binding=binding,
        **traits,
    )


def validate_strictly(tool: Tool, arguments: str) -> dict[str, Any]:
    """Check argument JSON strictly against a tool's JSON schema, then as the tool does.

    For arguments a person wrote (a reviewer's edits), where nothing should be guessed: JSON
    Schema types are exact (``true`` is not an integer, ``"15"`` is not a number), while
    ``Tool.validate`` converts a model's values as pydantic's lax mode does.

    Args:
        tool: The tool the arguments are for.
        arguments: The JSON text; blank text counts as ``{}``.

    Returns:
        What ``tool.validate(arguments)`` returns.

    Raises:
        ToolArgumentsError: The text is not a JSON object, or does not fit the schema exactly
            or the tool's own checks.
    """
    _check(tool.name, _validator_for(tool.name, tool.parameters), _object(tool.name, arguments))
    return tool.validate(arguments)


def _object(name: str, arguments: str) -> dict[str, Any]:
    """The arguments object of argument JSON; blank text counts as ``{}``."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolArgumentsError(name, issues=[not_json(exc.lineno, exc.colno)]) from None
    if not isinstance(value, dict):
        raise ToolArgumentsError(name, issues=[not_object(value)])
    return value


def _check(name: str, validator: Validator, value: dict[str, Any]) -> None:
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        issues = [issue for error in errors for issue in _issues(error)]
        raise ToolArgumentsError(name, issues=capped(issues))


def _validator_for(name: str, schema: object) -> Validator:
    if not isinstance(schema, dict):
        raise ToolDefinitionError(
            name, [f"parameters must be a JSON schema object, got {type(schema).__name__}"]
        )
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        problem = f"parameters is not a valid JSON schema: {exc.message}"
        raise ToolDefinitionError(name, [problem]) from None
    validator: Validator = cls(schema)
    return validator


# jsonschema's keywords, by the problem they report.
_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_SHORT = ("minLength", "minItems", "minProperties")
_LONG = ("maxLength", "maxItems", "maxProperties")


def _issues(error: jsonschema.ValidationError) -> list[ArgumentIssue]:
    """The problems of one jsonschema error, as data (several for extra properties)."""
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    keyword, rule = error.validator, cast(Any, error.validator_value)
    missing = _REQUIRED.fullmatch(error.message) if keyword == "required" else None
    if missing:
        where = f"{path}.{missing[1]}" if path else missing[1]
        return [ArgumentIssue("missing", where, bool(path))]
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        expected = "" if path else ", ".join(known)
        extra = [f"{path}.{k}" if path else k for k in error.instance if k not in known]
        values = {"expected": expected}
        return [ArgumentIssue("unknown", k, bool(path), values) for k in extra] or [
            _invalid(path, error)
        ]
    got = short_json(error.instance)
    if keyword == "type":
        expected = rule if isinstance(rule, str) else " | ".join(str(t) for t in rule)
        return [ArgumentIssue("type", path, _nested(error), {"expected": expected, "got": got})]
    if keyword in ("enum", "const"):
        options = list(rule) if keyword == "enum" else [rule]
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in options)
        return [ArgumentIssue("choice", path, _nested(error), {"allowed": allowed, "got": got})]
    if keyword in _BOUNDS:
        bound = f"{_BOUNDS[keyword]} {json.dumps(rule)}"
        return [ArgumentIssue("bound", path, _nested(error), {"bound": bound, "got": got})]
    if keyword == "multipleOf":
        values = {"factor": json.dumps(rule), "got": got}
        return [ArgumentIssue("multiple", path, _nested(error), values)]
    if keyword in _SHORT or keyword in _LONG:
        kind: IssueKind = "too_short" if keyword in _SHORT else "too_long"
        return [ArgumentIssue(kind, path, _nested(error), {"limit": str(rule), "got": got})]
    if keyword == "pattern":
        values = {"pattern": str(rule), "got": got}
        return [ArgumentIssue("pattern", path, _nested(error), values)]
    return [_invalid(path, error)]


def _nested(error: jsonschema.ValidationError) -> bool:
    return len(error.absolute_path) > 1


def _invalid(path: str, error: jsonschema.ValidationError) -> ArgumentIssue:
    # Any other keyword keeps jsonschema's own words.
    values = {"error": error.message, "got": short_json(error.instance)}
    return ArgumentIssue("invalid", path, _nested(error), values)
