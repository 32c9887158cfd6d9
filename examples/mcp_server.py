"""A tiny MCP server for ``examples/mcp_tools.py``, built with the official SDK.

Run on its own it speaks MCP over stdin and stdout: ``python examples/mcp_server.py``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("calc", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="notes.write", annotations=ToolAnnotations(destructive_hint=False))
def write_note(text: str) -> str:
    """Keep a note (a name with a dot, which model providers do not accept)."""
    return f"noted: {text}"


if __name__ == "__main__":
    server.run()
