"""Every definition problem is reported, all at once, in one ToolDefinitionError."""

import socket
from collections.abc import Callable
from typing import Any

import pytest

from steadyrun._errors import ToolDefinitionError, UsageError
from steadyrun.tools import ToolContext, tool


def problems_of(make: Callable[[], Any]) -> list[str]:
    with pytest.raises(ToolDefinitionError) as info:
        make()
    assert isinstance(info.value, UsageError)
    return info.value.problems


def test_missing_annotation() -> None:
    def f(a, b: int) -> None:  # type: ignore[no-untyped-def]
        pass

    assert problems_of(lambda: tool(f)) == [
        "parameter 'a' has no type annotation; the model needs a type for every argument"
    ]


def test_var_args_and_kwargs() -> None:
    def f(*args: int, **kwargs: int) -> None:
        pass

    assert problems_of(lambda: tool(f)) == [
        "*args is not supported; declare each argument as a named parameter",
        "**kwargs is not supported; declare each argument as a named parameter",
    ]


def test_positional_only() -> None:
    def f(a: int, /, b: int) -> None:
        pass

    (problem,) = problems_of(lambda: tool(f))
    assert problem.startswith("parameter 'a' is positional-only")


def test_types_without_json_schema() -> None:
    def f(sock: socket.socket, callback: Callable[[int], int], ok: int) -> None:
        pass

    found = problems_of(lambda: tool(f))
    assert len(found) == 2
    assert found[0].startswith("parameter 'sock': no JSON schema for type socket (")
    assert found[1].startswith("parameter 'callback': no JSON schema for type ")


def test_docstring_names_unknown_parameter() -> None:
    def f(a: int) -> None:
        """F.

        Args:
            a: Exists.
            b: Does not.
        """

    assert problems_of(lambda: tool(f)) == [
        "the docstring documents 'b' under Args:, but the function has no such parameter"
    ]


def test_two_context_parameters() -> None:
    def f(one: ToolContext, two: ToolContext) -> None:
        pass

    assert problems_of(lambda: tool(f)) == [
        "only one ToolContext parameter is allowed, found 'one', 'two'"
    ]


def test_unresolvable_string_annotation() -> None:
    def f(a: "NoSuchType", b: int) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    (problem,) = problems_of(lambda: tool(f))
    assert "'NoSuchType' of parameter 'a' cannot be resolved (NameError" in problem


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"name": "has space"}, "may only contain letters, digits, '_' and '-', not ' '"),
        ({"name": ""}, "tool name is empty"),
        ({"retain": "forever"}, "retain must be one of 'default', 'keep', 'intact', got 'forever'"),
        ({"concurrency_key": 5}, "concurrency_key must be None, a string, or a function"),
        ({"replayable": 1}, "replayable must be True or False, got 1"),
        ({"side_effects": "yes"}, "side_effects must be True or False, got 'yes'"),
        ({"direct_result": None}, "direct_result must be True or False, got None"),
        ({"main_only": 0}, "main_only must be True or False, got 0"),
        ({"strict": "no"}, "strict must be True or False, got 'no'"),
        ({"description": 3}, "description must be a string, got int"),
    ],
)
def test_invalid_traits(kwargs: dict[str, Any], expected: str) -> None:
    def f() -> None:
        pass

    found = problems_of(lambda: tool(**kwargs)(f))
    assert any(expected in p for p in found), found


def test_not_a_function() -> None:
    class Callable_:
        def __call__(self, a: int) -> None:
            pass

    (problem,) = problems_of(lambda: tool(Callable_()))
    assert problem == "@tool needs a function (def or async def), got Callable_"
    (problem,) = problems_of(lambda: tool(42))  # type: ignore[call-overload]
    assert problem == "@tool needs a function (def or async def), got int"


def test_generators_are_refused() -> None:
    def gen() -> Any:
        yield 1

    async def agen() -> Any:
        yield 1

    assert problems_of(lambda: tool(gen)) == [
        "generator functions cannot be tools; return the result instead"
    ]
    assert problems_of(lambda: tool(agen)) == [
        "generator functions cannot be tools; return the result instead"
    ]


def test_lambda_name_is_invalid() -> None:
    found = problems_of(lambda: tool(lambda: None))
    assert (
        found[0]
        == "tool name '<lambda>' may only contain letters, digits, '_' and '-', not '<' '>'"
    )
    assert tool(name="anon")(lambda: None).name == "anon"


def test_all_problems_reported_together() -> None:
    def bad(a, *rest: int, sock: socket.socket, c1: ToolContext, c2: ToolContext) -> None:  # type: ignore[no-untyped-def]
        """Bad.

        Args:
            ghost: Not a parameter.
        """

    with pytest.raises(ToolDefinitionError) as info:
        tool(name="bad name", retain="x", concurrency_key=1.5, strict=None)(bad)  # type: ignore[call-overload]
    err = info.value
    assert err.tool_name == "bad name"
    text = "\n".join(err.problems)
    for fragment in [
        "tool name 'bad name'",
        "retain must be one of",
        "concurrency_key must be None",
        "strict must be True or False",
        "the docstring documents 'ghost'",
        "parameter 'a' has no type annotation",
        "*rest is not supported",
        "only one ToolContext parameter",
        "parameter 'sock': no JSON schema",
    ]:
        assert fragment in text, fragment
    assert f"has {len(err.problems)} problem(s)" in str(err)
