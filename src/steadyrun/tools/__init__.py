"""Tools the model can call: the ``@tool`` decorator, its schema and validation, and tool sets.

A tool is a plain (sync or async) function with type hints and a Google-style docstring::

    @tool(concurrency_key="")
    async def get_weather(city: str, units: Literal["c", "f"] = "c") -> str:
        \"\"\"Current weather for a city (parameters documented under Args:).\"\"\"

The runtime validates the model's arguments with ``Tool.validate``, calls ``Tool.invoke`` and
shows the model ``Tool.render`` of the result.
"""

from __future__ import annotations

from steadyrun.tools._arguments import (
    ArgumentIssue,
    ToolArgumentsError,
    describe_issue,
    describe_issues,
)
from steadyrun.tools._context import ToolContext
from steadyrun.tools._names import MAX_TOOL_NAME_LENGTH, safe_tool_name, validate_tool_name
from steadyrun.tools._schema_tool import schema_tool, validate_strictly
from steadyrun.tools._tool import (
    DEFAULT_MAX_RESULT_CHARS,
    ConcurrencyKey,
    Policy,
    Retain,
    Tool,
    tool,
)
from steadyrun.tools._toolset import ToolSet

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "ArgumentIssue",
    "MAX_TOOL_NAME_LENGTH",
    "ConcurrencyKey",
    "Policy",
    "Retain",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolSet",
    "describe_issue",
    "describe_issues",
    "safe_tool_name",
    "schema_tool",
    "tool",
    "validate_strictly",
    "validate_tool_name",
]
