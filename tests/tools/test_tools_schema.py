"""JSON schemas and descriptions built from signatures and docstrings."""

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from steadyrun.chat import ToolDefinition
from steadyrun.tools import ToolContext, tool


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip_code: int


@dataclass
class Point:
    x: int
    y: int = 0


def props(t: Any) -> dict[str, Any]:
    return t.parameters["properties"]  # type: ignore[no-any-return]


def test_scalars_are_required_and_typed() -> None:
    @tool
    def f(s: str, i: int, x: float, b: bool) -> None:
        pass

    assert f.parameters == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
        },
        "required": ["s", "i", "x", "b"],
        "additionalProperties": False,
    }


def test_no_parameters() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_enum_and_literal() -> None:
    @tool
    def f(color: Color, mode: Literal["fast", "slow"]) -> None:
        pass

    assert props(f)["color"] == {"$ref": "#/$defs/Color"}
    assert f.parameters["$defs"]["Color"] == {"enum": ["red", "blue"], "type": "string"}
    assert props(f)["mode"] == {"enum": ["fast", "slow"], "type": "string"}


def test_optional_and_defaults() -> None:
    @tool
    def f(a: int | None, b: int = 3, c: str | None = None, color: Color = Color.BLUE) -> None:
        pass

    assert props(f)["a"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props(f)["b"] == {"type": "integer", "default": 3}
    assert props(f)["c"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props(f)["color"] == {"$ref": "#/$defs/Color", "default": "blue"}
    assert f.parameters["required"] == ["a"]


def test_containers() -> None:
    @tool
    def f(tags: list[str], counts: dict[str, int], points: list[Point]) -> None:
        pass

    assert props(f)["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props(f)["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props(f)["points"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}


def test_nested_models_and_dataclasses_in_defs() -> None:
    @tool
    def f(address: Address, point: Point) -> None:
        pass

    defs = f.parameters["$defs"]
    assert props(f)["address"] == {"$ref": "#/$defs/Address"}
    assert defs["Address"]["properties"] == {
        "street": {"type": "string"},
        "zip_code": {"type": "integer"},
    }
    assert defs["Address"]["required"] == ["street", "zip_code"]
    assert defs["Point"]["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer", "default": 0},
    }
    assert defs["Point"]["required"] == ["x"]


def test_no_titles_anywhere() -> None:
    @tool
    def f(address: Address, color: Color, title: str) -> None:
        pass

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "title" in node:
                assert not isinstance(node["title"], str)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(f.parameters)
    # a parameter literally called "title" survives the stripping
    assert props(f)["title"] == {"type": "string"}


def test_annotated_field_description_and_constraints() -> None:
    @tool
    def f(
        n: Annotated[int, Field(description="How many.", ge=1, le=10)],
        m: Annotated[int, Field(description="From Field.")] = 2,
    ) -> None:
        """Do it.

        Args:
            n: From the docstring.
            m: Also from the docstring.
        """

    assert props(f)["n"] == {
        "type": "integer",
        "description": "How many.",
        "minimum": 1,
        "maximum": 10,
    }
    assert props(f)["m"] == {"type": "integer", "description": "From Field.", "default": 2}


def test_docstring_descriptions() -> None:
    @tool
    def search(query: str, limit: int = 10, *, exact: bool = False) -> list[str]:
        """Search the catalogue.

        Matches titles and authors,
        case-insensitively.

        Args:
            query: The words to look for. Long descriptions
                wrap onto further lines.
            limit (int): At most this many results.
            exact: Match the whole phrase.

                A second paragraph.

        Returns:
            Matching titles.
        """
        return []

    assert search.description == (
        "Search the catalogue.\n\nMatches titles and authors,\ncase-insensitively."
    )
    assert props(search)["query"]["description"] == (
        "The words to look for. Long descriptions wrap onto further lines."
    )
    assert props(search)["limit"]["description"] == "At most this many results."
    assert props(search)["exact"]["description"] == "Match the whole phrase.\n\nA second paragraph."


def test_missing_docstring_is_fine() -> None:
    @tool
    def f(a: int) -> None:
        pass

    assert f.description == ""
    assert "description" not in props(f)["a"]


def test_description_override_keeps_param_docs() -> None:
    @tool(description="Custom text.")
    def f(a: int) -> None:
        """Ignored summary.

        Args:
            a: The a.
        """

    assert f.description == "Custom text."
    assert props(f)["a"]["description"] == "The a."


def test_context_parameter_is_not_in_schema() -> None:
    @tool
    def f(a: int, context: ToolContext) -> None:
        """F.

        Args:
            a: The a.
            context: Documented but hidden.
        """

    assert list(props(f)) == ["a"]
    assert f.parameters["required"] == ["a"]
    assert "$defs" not in f.parameters


def test_awkward_parameter_names() -> None:
    @tool
    def f(_private: int, model_config: str, json: bool, copy: int = 1) -> None:
        pass

    assert list(props(f)) == ["_private", "model_config", "json", "copy"]
    assert f.validate('{"_private": 1, "model_config": "x", "json": true}') == {
        "_private": 1,
        "model_config": "x",
        "json": True,
        "copy": 1,
    }


def test_definition_is_cached_and_sorted_fields() -> None:
    @tool(name="lookup", strict=True)
    def f(a: int) -> None:
        """Look up."""

    d = f.definition()
    assert d is f.definition()
    assert d == ToolDefinition(
        name="lookup", description="Look up.", parameters=f.parameters, strict=True
    )


def test_method_can_be_a_tool() -> None:
    class Service:
        def __init__(self) -> None:
            self.base = 10

        def add(self, n: int) -> int:
            """Add to the base."""
            return self.base + n

    t = tool(Service().add)
    assert t.name == "add"
    assert list(props(t)) == ["n"]


def test_decorator_forms_and_traits() -> None:
    def key(args: dict[str, Any]) -> str | None:
        return None

    @tool()
    def plain() -> None:
        pass

    @tool(
        name="custom",
        replayable=True,
        side_effects=True,
        concurrency_key=key,
        direct_result=True,
        retain="intact",
        main_only=True,
        strict=True,
    )
    async def configured() -> None:
        pass

    assert (plain.name, plain.replayable, plain.retain, plain.concurrency_key) == (
        "plain",
        False,
        "default",
        None,
    )
    assert configured.name == "custom"
    assert configured.replayable and configured.side_effects and configured.direct_result
    assert configured.main_only and configured.strict
    assert configured.retain == "intact"
    assert configured.concurrency_key is key
