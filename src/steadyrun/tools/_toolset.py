"""A named collection of tools with a deterministic order."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.chat import ToolDefinition
from steadyrun.tools._tool import Tool, tool

__all__ = ["ToolSet"]


class ToolSet:
    """The tools of an agent, by unique name.

    Iteration, ``names`` and ``definitions`` are all sorted by name, so the tool list sent to a
    provider is identical from call to call and prompt caches keep hitting.
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        """Collect tools, wrapping plain functions with ``tool()``.

        Args:
            tools: Tools, or functions to make into tools with default traits.

        Raises:
            UsageError: Two tools share a name, or an item is neither a tool nor a function.
            ToolDefinitionError: A plain function cannot be made into a tool.
        """
        collected: list[Tool] = []
        for item in tools:
            if isinstance(item, Tool):
                collected.append(item)
            elif inspect.isfunction(item) or inspect.ismethod(item):
                collected.append(tool(item))
            else:
                raise UsageError(
                    f"ToolSet takes tools or functions, got {type(item).__name__}: {item!r}"
                )
        counts = Counter(t.name for t in collected)
        duplicates = sorted(name for name, n in counts.items() if n > 1)
        if duplicates:
            shown = ", ".join(repr(n) for n in duplicates)
            raise UsageError(
                f"duplicate tool names: {shown}; give each tool a unique name with @tool(name=...)"
            )
        self._tools: dict[str, Tool] = {t.name: t for t in sorted(collected, key=_name)}

    def get(self, name: str) -> Tool | None:
        """The tool with this name, or ``None``."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """The tool names, sorted."""
        return list(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        """The tool definitions for a model request, sorted by name."""
        return [t.definition() for t in self._tools.values()]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolSet({self.names!r})"


def _name(t: Tool) -> str:
    return t.name
