"""Tool name validation and provider-safe names."""

from hypothesis import given
from hypothesis import strategies as st

from steadyrun.tools import MAX_TOOL_NAME_LENGTH, safe_tool_name, validate_tool_name


def test_valid_names() -> None:
    for name in ["a", "_", "get_weather", "Get-Weather2", "x" * 64, "_9"]:
        assert validate_tool_name(name) == [], name


def test_invalid_names() -> None:
    assert validate_tool_name("") == ["tool name is empty"]
    assert validate_tool_name(3) == ["tool name must be a string, got int"]
    assert validate_tool_name("9lives") == [
        "tool name '9lives' must start with a letter or '_'",
        "a valid alternative is '_9lives'",
    ]
    assert validate_tool_name("a.b c") == [
        "tool name 'a.b c' may only contain letters, digits, '_' and '-', not ' ' '.'",
        "a valid alternative is 'a_b_c'",
    ]
    assert validate_tool_name("x" * 65)[0] == (
        "tool name is 65 characters long; at most 64 are allowed"
    )
    assert validate_tool_name("-dash")[0] == "tool name '-dash' must start with a letter or '_'"
    assert validate_tool_name("é")[0].startswith("tool name 'é' may only contain")
    # a trailing newline must not sneak past the pattern
    assert validate_tool_name("name\n") != []


def test_safe_names() -> None:
    assert safe_tool_name("get_weather") == "get_weather"
    assert safe_tool_name("mcp.server/read file") == "mcp_server_read_file"
    assert safe_tool_name("3d") == "_3d"
    assert safe_tool_name("-x") == "_-x"
    assert safe_tool_name("") == "_"
    assert safe_tool_name("ü") == "_"
    assert safe_tool_name("a" * 100) == "a" * MAX_TOOL_NAME_LENGTH
    assert safe_tool_name("1" * 100) == "_" + "1" * 63


@given(st.text())
def test_safe_name_is_always_valid(name: str) -> None:
    safe = safe_tool_name(name)
    assert validate_tool_name(safe) == []
    assert safe_tool_name(safe) == safe


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", fullmatch=True))
def test_valid_names_are_kept(name: str) -> None:
    assert validate_tool_name(name) == []
    assert safe_tool_name(name) == name
