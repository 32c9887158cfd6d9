"""The built-in tool the model reads offloaded (and cleared) results with."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["READ_TOOL", "read_tool"]

READ_TOOL = "read_offloaded_result"

Ref = Annotated[str, Field(pattern=r"^m[0-9]{1,9}\.c[0-9]{1,6}$", max_length=20)]


def read_tool() -> Tool:
    """A fresh read tool (the runtime gives it to agents with a ``ContextPolicy``)."""

    @tool(name=READ_TOOL, retain="intact", replayable=True, concurrency_key="")
    def read_offloaded_result(
        ref: Ref,
        ctx: ToolContext,
        offset: Annotated[int, Field(ge=0)] = 0,
        length: Annotated[int, Field(ge=1, le=20_000)] = 4_000,
    ) -> str:
        """Read part of a tool result that was too large, or old, to stay in the conversation.

        Args:
            ref: The reference shown in place of the result, such as "m12.c1".
            ctx: The call's context, filled by the runtime (not part of the schema).
            offset: The first character to read.
            length: How many characters to read (at most 20000).
        """
        text = ctx.read_result(ref) if ctx.read_result is not None else None
        if text is None:
            raise LookupError(f"there is no offloaded or cleared result {ref!r} in this run")
        chunk = text[offset : offset + length]
        end = offset + len(chunk)
        more = f"; continue with offset={end}" if end < len(text) else ""
        return f"{chunk}\n[characters {offset}-{end} of {len(text)}{more}]"

    return read_offloaded_result
