"""ToolSet: unique names and a deterministic order."""

import pytest

from steadyrun._errors import ToolDefinitionError, UsageError
from steadyrun.tools import Tool, ToolSet, tool


@tool
def zeta() -> None:
    """Z."""


@tool
def alpha(x: int) -> None:
    """A."""


def mid(y: str) -> str:
    """A plain function."""
    return y


def test_sorted_everywhere() -> None:
    tools = ToolSet([zeta, mid, alpha])
    assert tools.names == ["alpha", "mid", "zeta"]
    assert [t.name for t in tools] == ["alpha", "mid", "zeta"]
    assert [d.name for d in tools.definitions()] == ["alpha", "mid", "zeta"]
    assert tools.definitions()[0] is alpha.definition()
    assert len(tools) == 3
    assert "mid" in tools
    assert "nope" not in tools
    assert repr(tools) == "ToolSet(['alpha', 'mid', 'zeta'])"


def test_order_does_not_depend_on_input_order() -> None:
    assert ToolSet([alpha, zeta]).definitions() == ToolSet([zeta, alpha]).definitions()


def test_plain_functions_are_wrapped() -> None:
    tools = ToolSet([mid])
    wrapped = tools.get("mid")
    assert isinstance(wrapped, Tool)
    assert wrapped.function is mid
    assert wrapped.description == "A plain function."


def test_get_missing() -> None:
    assert ToolSet([alpha]).get("zeta") is None
    assert len(ToolSet()) == 0


def test_duplicates_are_named() -> None:
    other_alpha = tool(name="alpha")(mid)
    other_zeta = tool(name="zeta")(mid)
    with pytest.raises(UsageError, match=r"duplicate tool names: 'alpha', 'zeta'"):
        ToolSet([zeta, alpha, other_alpha, other_zeta])


def test_not_a_tool() -> None:
    with pytest.raises(UsageError, match="ToolSet takes tools or functions, got int"):
        ToolSet([alpha, 3])  # type: ignore[list-item]


def test_bad_plain_function_raises_definition_error() -> None:
    def untyped(a):  # type: ignore[no-untyped-def]
        return a

    with pytest.raises(ToolDefinitionError):
        ToolSet([untyped])


def test_toolset_from_toolset() -> None:
    first = ToolSet([alpha, zeta])
    assert ToolSet(first).names == first.names
