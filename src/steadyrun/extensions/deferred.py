"""Deferred tools: bound to the agent, hidden from the model until a tool call advertises them.

A large tool catalogue costs tokens on every request and confuses small models. With
``DeferredTools`` the model sees one search tool; the tools it finds become visible from the
next model call on, and stay visible for the rest of the run (the set is saved with the run).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.chat import ModelResponse
from steadyrun.runtime._extension import Extension, ModelCall, ModelNext, ToolCall, ToolNext
from steadyrun.tools import Tool, ToolContext, ToolSet, tool

__all__ = ["DeferredTools"]


class DeferredTools(Extension):
    """Tools hidden from the model until ``search_tools`` advertises them.

    Args:
        tools: The deferred tools (``@tool`` functions or plain functions).
        max_results: How many tools one search advertises at most.
        name: The extension's name (give each ``DeferredTools`` of an agent its own).
        search_tool_name: The name of the search tool the model sees.

    A call to a deferred tool that was not advertised yet fails with a reason the model sees
    (search first); it never runs.
    """

    def __init__(
        self,
        tools: Sequence[Tool | Callable[..., Any]],
        *,
        max_results: int = 5,
        name: str = "deferred_tools",
        search_tool_name: str = "search_tools",
    ) -> None:
        if max_results < 1:
            raise UsageError(f"max_results must be at least 1, got {max_results}")
        self.name = name
        self.catalogue = ToolSet(tools)
        self.max_results = max_results
        self.search_tool_name = search_tool_name
        self.advertised: set[str] = set()
        self._lock = asyncio.Lock()

    def for_run(self) -> DeferredTools:
        """An instance for one run, sharing the catalogue, with nothing advertised yet."""
        clone = DeferredTools.__new__(DeferredTools)
        clone.name = self.name
        clone.catalogue = self.catalogue
        clone.max_results = self.max_results
        clone.search_tool_name = self.search_tool_name
        clone.advertised = set()
        clone._lock = asyncio.Lock()
        return clone

    def save_state(self) -> Any:
        """The advertised tool names, sorted."""
        return sorted(self.advertised)

    def restore_state(self, state: Any) -> None:
        """Load the advertised names (``None``: none yet)."""
        self.advertised = {n for n in (state or []) if n in self.catalogue}

    def publish(self) -> list[str] | None:
        """The advertised tool names, once there are any."""
        return sorted(self.advertised) or None

    def search(self, query: str) -> list[Tool]:
        """Catalogue tools matching ``query`` by words in their names and descriptions."""
        words = {w for w in re.split(r"\W+", query.lower()) if w}
        scored = []
        for t in self.catalogue:
            text = f"{t.name.replace('_', ' ')} {t.description}".lower()
            hay = set(re.split(r"\W+", text))
            score = sum(1 for w in words if w in hay) + sum(0.5 for w in words if w in t.name)
            if score or not words:
                scored.append((-score, t.name, t))
        scored.sort(key=lambda x: (x[0], x[1]))
        return [t for _, _, t in scored[: self.max_results]]

    async def advertise(self, names: Sequence[str]) -> None:
        """Make tools visible from the next model call on."""
        async with self._lock:
            self.advertised.update(n for n in names if n in self.catalogue)

    def tools(self) -> Sequence[Tool]:
        """The search tool and every deferred tool (hidden from requests until advertised)."""
        ext = self

        @tool(name=self.search_tool_name, replayable=True, retain="keep")
        async def search_tools(query: str, ctx: ToolContext) -> str:
            """Find tools for a task; the tools found can be called from your next step on.

            Args:
                query: Words describing what you need to do.
                ctx: The call's context, filled by the runtime.
            """
            run = ext.of(ctx)
            found = run.search(query)
            if not found:
                return ctx.texts.search_no_match
            await run.advertise([t.name for t in found])
            lines = [f"- {t.name}: {t.description.splitlines()[0]}" for t in found]
            return ctx.texts.search_found.format(tools="\n".join(lines))

        return (search_tools, *self.catalogue)

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        """Leave out of the request the deferred tools not advertised yet."""
        hidden = {n for n in self.catalogue.names if n not in self.advertised}
        if not hidden:
            return await next(call)
        request = call.request
        tools = [d for d in request.tools if d.name not in hidden]
        return await next(replace(call, request=replace(request, tools=tools)))

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        """Refuse a deferred tool the model has not found through the search tool yet."""
        name = call.tool.name
        if name in self.catalogue and name not in self.advertised:
            texts = call.context.texts
            raise LookupError(
                texts.tool_not_found_yet.format(name=name, search_tool=self.search_tool_name)
            )
        return await next(call)
