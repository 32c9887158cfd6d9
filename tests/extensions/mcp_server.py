"""A small MCP server for the tests of steadyrun.extensions.mcp.

Run over stdio (``python mcp_server.py``) or streamable HTTP on a loopback port
(``python mcp_server.py --http PORT``, endpoint ``http://127.0.0.1:PORT/mcp``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, ToolAnnotations

server = MCPServer("testkit", log_level="WARNING")

LONG_NAME = "summarise_the_quarterly_revenue_report_for_every_region_and_product_line"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return " ".join([text] * times)


@server.tool(name=LONG_NAME)
def long_named() -> str:
    """A tool whose name is longer than providers accept."""
    return "summary"


@server.tool(name="files.read", annotations=ToolAnnotations(read_only_hint=True))
def files_read(path: str) -> str:
    """A tool whose name has a character providers reject."""
    return f"contents of {path}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


@server.tool()
def fail(message: str) -> str:
    """Always raise."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def crash() -> str:
    """Stop the server in the middle of the call."""
    os._exit(1)


@server.tool()
def whoami(ctx: Context) -> dict[str, Any]:
    """The request metadata the client sent."""
    meta = ctx.request_context.meta or {}
    return {"meta": {k: v for k, v in dict(meta).items() if k.startswith("steadyrun")}}


@server.tool()
def picture() -> list[Any]:
    """Return an image and a caption."""
    return [ImageContent(data="iVBORw0KGgo=", mime_type="image/png"), "a caption"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
