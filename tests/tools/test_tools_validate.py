"""Tool.validate: the model's raw argument JSON to python values, with model-readable errors."""

from dataclasses import dataclass
from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel

from steadyrun._errors import SteadyrunError, UsageError
from steadyrun.tools import ToolArgumentsError, tool


class Unit(Enum):
    C = "c"
    F = "f"


class Item(BaseModel):
    sku: str
    qty: int = 1


@dataclass
class Window:
    start: int
    end: int


@tool
def order(
    customer: str,
    items: list[Item],
    unit: Unit = Unit.C,
    window: Window | None = None,
    note: Literal["gift", "plain"] = "plain",
) -> str:
    """Place an order."""
    return "ok"


@tool
def noargs() -> str:
    """No arguments."""
    return "ok"


def problems(arguments: str) -> list[str]:
    with pytest.raises(ToolArgumentsError) as info:
        order.validate(arguments)
    assert info.value.tool_name == "order"
    return info.value.problems


def test_error_class_hierarchy() -> None:
    assert issubclass(ToolArgumentsError, SteadyrunError)
    assert not issubclass(ToolArgumentsError, UsageError)


def test_defaults_filled_and_instances_returned() -> None:
    args = order.validate('{"customer": "ann", "items": [{"sku": "a"}], "unit": "f"}')
    assert args == {
        "customer": "ann",
        "items": [Item(sku="a", qty=1)],
        "unit": Unit.F,
        "window": None,
        "note": "plain",
    }
    assert isinstance(args["items"][0], Item)
    assert args["unit"] is Unit.F
    assert list(args) == ["customer", "items", "unit", "window", "note"]


def test_nested_dataclass_instance() -> None:
    args = order.validate('{"customer": "a", "items": [], "window": {"start": 1, "end": 2}}')
    assert args["window"] == Window(start=1, end=2)


def test_empty_arguments_count_as_empty_object() -> None:
    assert noargs.validate("") == {}
    assert noargs.validate("  \n") == {}
    assert noargs.validate("{}") == {}
    assert problems("") == [
        "customer: missing required argument",
        "items: missing required argument",
    ]


def test_malformed_json() -> None:
    (problem,) = problems('{"customer": "a",')
    assert problem.startswith("the arguments are not valid JSON (")
    # Where the parser stopped, in words any language can carry (not the parser's English).
    (problem,) = problems('{"customer": "a", }')
    assert problem == "the arguments are not valid JSON (at line 1, column 19)"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "[1, 2]"), ("null", "null"), ('"x"', '"x"'), ("3", "3")],
)
def test_not_an_object(text: str, kind: str) -> None:
    assert problems(text) == [f"the arguments must be a JSON object, got {kind}"]


def test_wrong_types_and_paths() -> None:
    found = problems('{"customer": 5, "items": [{"sku": "a"}, {"sku": "b", "qty": "many"}]}')
    assert found == [
        "customer: expected string, got 5",
        'items[1].qty: expected integer, got "many"',
    ]


def test_missing_nested_field() -> None:
    assert problems('{"customer": "a", "items": [{"qty": 2}]}') == [
        "items[0].sku: missing required field"
    ]


def test_unknown_arguments_are_refused_with_the_expected_names() -> None:
    assert problems('{"customer": "a", "items": [], "colour": "red"}') == [
        "colour: unknown argument (expected: customer, items, unit, window, note)"
    ]
    with pytest.raises(ToolArgumentsError) as info:
        noargs.validate('{"x": 1}')
    assert info.value.problems == ["x: unknown argument (the tool takes no arguments)"]


def test_invalid_enum_and_literal() -> None:
    found = problems('{"customer": "a", "items": [], "unit": "k", "note": "x"}')
    assert found == [
        'unit: must be one of "c", "f", got "k"',
        'note: must be one of "gift", "plain", got "x"',
    ]


def test_message_is_short_and_readable() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        order.validate('{"items": 3}')
    assert str(info.value) == (
        "Invalid arguments for tool 'order':\n"
        "- customer: missing required argument\n"
        "- items: expected array, got 3"
    )


def test_long_inputs_and_many_problems_are_truncated() -> None:
    @tool
    def many(
        a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int, j: int
    ) -> None:
        pass

    with pytest.raises(ToolArgumentsError) as info:
        many.validate('{"a": "' + "x" * 500 + '"}')
    found = info.value.problems
    assert len(found) == 9
    assert found[-1] == "... and 2 more problem(s)"
    assert len(found[0]) < 160
    assert found[0].endswith("...")
