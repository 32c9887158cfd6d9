"""String annotations (PEP 563) resolve like evaluated ones."""

from __future__ import annotations

from dataclasses import dataclass

from steadyrun.tools import ToolContext, tool


@dataclass
class Box:
    size: int


@tool
def pack(box: Box, count: int | None = None, ctx: ToolContext | None = None) -> str:
    """Pack boxes."""
    return f"{box.size}x{count}:{ctx is None}"


def test_string_annotations_resolve() -> None:
    assert pack.parameters["properties"]["box"] == {"$ref": "#/$defs/Box"}
    assert list(pack.parameters["properties"]) == ["box", "count"]


async def test_optional_context_is_injected() -> None:
    args = pack.validate('{"box": {"size": 2}}')
    assert args == {"box": Box(size=2), "count": None}
    assert await pack.invoke(args) == "2xNone:True"
