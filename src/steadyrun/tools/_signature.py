"""From a function's signature to an arguments model, a JSON schema and the problems found."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from steadyrun.tools._context import ToolContext
from steadyrun.tools._docstrings import parse_docstring

__all__ = ["Analysis", "Binding", "analyse_function"]

_EMPTY = inspect.Parameter.empty


@dataclass(kw_only=True, frozen=True, slots=True)
class Binding:
    """How validated arguments map onto a function call.

    Attributes:
        function: The function to call.
        is_async: Whether calling it returns a coroutine to await.
        model: The pydantic model the argument JSON is validated with.
        fields: ``(parameter name, model field name)`` for each schema parameter, in order.
        context_param: The parameter that receives the ``ToolContext``, if any.
    """

    function: Callable[..., Any]
    is_async: bool
    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]
    context_param: str | None = None

    @property
    def param_names(self) -> list[str]:
        """The argument names the model may send, in signature order."""
        return [name for name, _ in self.fields]


@dataclass(kw_only=True, slots=True)
class Analysis:
    """The result of analysing a function.

    Attributes:
        description: The docstring text before its sections.
        parameters: The JSON schema of the arguments object (empty when there are problems).
        binding: How to call the function (``None`` when there are problems).
        problems: Everything wrong with the function as a tool.
    """

    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    binding: Binding | None = None
    problems: list[str] = field(default_factory=list)


def analyse_function(function: Any) -> Analysis:
    """Work out a tool's schema and call binding from a function, collecting every problem.

    Args:
        function: The object given to ``@tool``; anything but a function is a problem.

    Returns:
        The analysis; ``binding`` is set only when ``problems`` is empty.
    """
    result = Analysis()
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        result.problems.append(
            f"@tool needs a function (def or async def), got {type(function).__name__}"
        )
        return result
    if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
        result.problems.append("generator functions cannot be tools; return the result instead")

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        result.problems.append(f"cannot read the function's signature: {exc}")
        return result
    docstring = parse_docstring(function.__doc__)
    result.description = docstring.description
    hints = _resolve_hints(function, signature, result.problems)

    for documented in docstring.params:
        if documented not in signature.parameters:
            result.problems.append(
                f"the docstring documents {documented!r} under Args:, "
                "but the function has no such parameter"
            )

    context_params: list[str] = []
    schema_params: list[tuple[inspect.Parameter, Any]] = []
    for param in signature.parameters.values():
        kind = param.kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            result.problems.append(
                f"*{param.name} is not supported; declare each argument as a named parameter"
            )
            continue
        if kind is inspect.Parameter.VAR_KEYWORD:
            result.problems.append(
                f"**{param.name} is not supported; declare each argument as a named parameter"
            )
            continue
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            result.problems.append(
                f"parameter {param.name!r} is positional-only; tools are called with keyword "
                "arguments, so remove the '/'"
            )
            continue
        if param.annotation is _EMPTY:
            result.problems.append(
                f"parameter {param.name!r} has no type annotation; the model needs a type "
                "for every argument"
            )
            continue
        if param.name not in hints:
            continue  # its annotation could not be resolved; already reported
        hint = hints[param.name]
        if _is_context(hint):
            context_params.append(param.name)
        else:
            schema_params.append((param, hint))

    if len(context_params) > 1:
        names = ", ".join(repr(n) for n in context_params)
        result.problems.append(f"only one ToolContext parameter is allowed, found {names}")

    model, schema = _build_model(schema_params, docstring.params, result.problems)
    if result.problems or model is None:
        return result
    result.parameters = schema
    result.binding = Binding(
        function=function,
        is_async=inspect.iscoroutinefunction(function),
        model=model,
        fields=tuple((param.name, _field_name(i)) for i, (param, _) in enumerate(schema_params)),
        context_param=context_params[0] if context_params else None,
    )
    return result


def _resolve_hints(
    function: Callable[..., Any], signature: inspect.Signature, problems: list[str]
) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # any failure is re-diagnosed per parameter below
        pass
    # Resolve parameter by parameter, so the problem names the annotation that failed.
    namespace = getattr(function, "__globals__", {})
    hints: dict[str, Any] = {}
    for param in signature.parameters.values():
        annotation = param.annotation
        if annotation is _EMPTY:
            continue
        try:
            hints[param.name] = (
                eval(annotation, namespace) if isinstance(annotation, str) else annotation
            )
        except Exception as exc:  # reported as a definition problem
            problems.append(
                f"the annotation {annotation!r} of parameter {param.name!r} cannot be resolved "
                f"({type(exc).__name__}: {exc}); define the type at module level"
            )
    return hints


def _is_context(hint: Any) -> bool:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if hint is ToolContext:
        return True
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        return members == [ToolContext]
    return False


def _field_name(index: int) -> str:
    # Parameter names become aliases of neutral field names: pydantic would otherwise drop names
    # starting with '_' or 'model_config' and warn about names such as 'json' or 'copy'.
    return f"arg{index}"


def _annotated_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in hint.__metadata__)


def _build_model(
    params: list[tuple[inspect.Parameter, Any]],
    descriptions: dict[str, str],
    problems: list[str],
) -> tuple[type[BaseModel] | None, dict[str, Any]]:
    definitions: dict[str, Any] = {}
    for i, (param, hint) in enumerate(params):
        default = ... if param.default is _EMPTY else param.default
        extra: dict[str, Any] = {}
        # An explicit Field(description=...) in Annotated wins over the docstring; passing even
        # description=None here would override it, so the keyword is only given when used.
        if param.name in descriptions and not _annotated_description(hint):
            extra["description"] = descriptions[param.name]
        definitions[_field_name(i)] = (hint, Field(default, alias=param.name, **extra))
    if problems:
        _diagnose_types(params, problems)
        return None, {}
    try:
        model = create_model(
            "ToolArguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **definitions,
        )
        schema = model.model_json_schema()
    except Exception as exc:  # reported as a definition problem
        if not _diagnose_types(params, problems):
            problems.append(f"cannot build a JSON schema for the arguments: {_first_line(exc)}")
        return None, {}
    return model, _tidy_schema(schema)


def _diagnose_types(params: list[tuple[inspect.Parameter, Any]], problems: list[str]) -> bool:
    found = False
    for param, hint in params:
        try:
            TypeAdapter(hint).json_schema()
        except Exception as exc:  # reported as a definition problem
            found = True
            problems.append(
                f"parameter {param.name!r}: no JSON schema for type {_type_name(hint)} "
                f"({_first_line(exc)})"
            )
    return found


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    _strip_titles(schema)
    # A fixed, readable key order; the JSON text of the definition is then stable byte for byte.
    tidy: dict[str, Any] = {"type": "object", "properties": schema.get("properties", {})}
    if schema.get("required"):
        tidy["required"] = schema["required"]
    tidy["additionalProperties"] = False
    if "$defs" in schema:
        tidy["$defs"] = schema["$defs"]
    return tidy


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames")


def _strip_titles(schema: Any) -> None:
    # Walk only schema positions, so a property that is itself named "title" survives.
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("title"), str):
        del schema["title"]
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            for sub in schema[key].values():
                _strip_titles(sub)
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for sub in schema[key]:
                _strip_titles(sub)
    for key in _SCHEMA_VALUES:
        _strip_titles(schema.get(key))
