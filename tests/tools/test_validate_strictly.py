"""Strict argument checks for arguments a person wrote: JSON Schema types, no conversions."""

from __future__ import annotations

import pytest

from steadyrun.tools import ToolArgumentsError, schema_tool, tool, validate_strictly


@tool
def book(room: str, nights: int, price: float = 0.0) -> str:
    """Book a room.

    Args:
        room: The room.
        nights: How many nights.
        price: Price per night.
    """
    return room


def test_values_of_the_right_json_type_pass_and_are_converted_as_validate_does() -> None:
    assert validate_strictly(book, '{"room": "A", "nights": 2, "price": 15}') == {
        "room": "A",
        "nights": 2,
        "price": 15.0,
    }
    assert validate_strictly(book, '{"room": "A", "nights": 2}') == book.validate(
        '{"room": "A", "nights": 2}'
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"room": "A", "nights": true}', "nights: expected integer, got true"),
        ('{"room": "A", "nights": "2"}', 'nights: expected integer, got "2"'),
        ('{"room": "A", "nights": 2, "price": "15"}', 'price: expected number, got "15"'),
        ('{"room": 1, "nights": 2}', "room: expected string, got 1"),
        ('{"nights": 2}', "room: missing required argument"),
        ("[1]", "the arguments must be a JSON object, got [1]"),
        ("{nope", "the arguments are not valid JSON"),
    ],
)
def test_values_pydantic_would_convert_are_refused(arguments: str, problem: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        validate_strictly(book, arguments)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_the_models_arguments_are_converted_where_edits_are_not() -> None:
    # Tool.validate (for a model's calls) converts as pydantic's lax mode does.
    assert book.validate('{"room": "A", "nights": "2", "price": "15"}')["nights"] == 2


def test_a_schema_tool_is_checked_against_its_own_schema() -> None:
    search = schema_tool(
        "search",
        "Search.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        lambda args, ctx: args["q"],
    )
    assert validate_strictly(search, '{"q": "x"}') == {"q": "x"}
    with pytest.raises(ToolArgumentsError, match="q: expected string, got 5"):
        validate_strictly(search, '{"q": 5}')
