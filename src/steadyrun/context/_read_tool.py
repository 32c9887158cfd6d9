"""The built-in tool the model reads offloaded (and cleared) results with."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["READ_TOOL", "read_tool"]

READ_TOOL = "read_offloaded_result"

Ref = Annotated[str, Field(pattern=r"^m[0-9]{1,9}\.c[0-9]{1,6}$", max_length=20)]


def read_tool(max_bytes: int | None = None) -> Tool:
    """A fresh read tool (the runtime gives it to agents with a ``ContextPolicy``).

    Its results are ordinary results: cleared and summarized like any other, so reading a
    large result back never pins it in the context.

    Args:
        max_bytes: Most UTF-8 bytes one read returns, its note included; a longer read is
            cut short and its note says where to continue. The runtime passes the policy's
            offload size, so a read-back chunk is never offloaded again. ``None``: no bound.
    """

    @tool(name=READ_TOOL, replayable=True, concurrency_key="")
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
        texts = ctx.texts
        text = ctx.read_result(ref) if ctx.read_result is not None else None
        if text is None:
            raise LookupError(texts.read_unknown_ref.format(ref=ref))
        chunk = text[offset : offset + length]
        while True:
            end = offset + len(chunk)
            span = {"start": str(offset), "end": str(end), "total": str(len(text))}
            if end < len(text):
                out = f"{chunk}\n{texts.read_range_more.format(**span)}"
            else:
                out = f"{chunk}\n{texts.read_range.format(**span)}"
            excess = len(out.encode()) - max_bytes if max_bytes is not None else 0
            if excess <= 0 or not chunk:
                return out
            # Cut the chunk by the excess bytes (never inside a character), then measure
            # again: the note's numbers may have shrunk too.
            data = chunk.encode()
            chunk = data[: max(0, len(data) - excess)].decode("utf-8", "ignore")

    return read_offloaded_result
