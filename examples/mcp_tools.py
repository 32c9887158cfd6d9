"""An agent using the tools of an MCP server, started as a subprocess over stdio.

Needs the ``mcp`` extra (``pip install -e '.[mcp]'``); a scripted model stands in for a real
one, so it runs without an API key: ``python examples/mcp_tools.py``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import steadyrun as sr
from steadyrun.extensions.mcp import McpServer, McpTraits
from steadyrun.testing import ScriptedModel, text, tool_calls

SERVER = Path(__file__).with_name("mcp_server.py")


async def main() -> None:
    async with McpServer.stdio(sys.executable, [str(SERVER)], name="calc") as calc:
        # Traits per tool, by MCP name: note writing may take 10 s at most.
        tools = await calc.tools(per_tool={"notes.write": McpTraits(timeout=10)})
        for tool in tools:
            print(f"tool {tool.name}: side_effects={tool.side_effects}")
        notes = next(t.name for t in tools if t.name.startswith("calc_notes_write"))

        model = ScriptedModel(
            [
                tool_calls(("calc_add", {"a": 19, "b": 23})),
                tool_calls((notes, {"text": "the answer is 42"})),
                text("19 + 23 = 42, and I made a note of it."),
            ]
        )
        agent = sr.Agent(name="calculator", model=model, tools=tools)
        runtime = sr.Runtime(sr.MemoryStore())
        result = await runtime.run(agent, run_id="sum-1", input="What is 19 + 23?")

    add_call, note_call = result.calls
    print(f"add(19, 23) = {add_call.result}")
    print(f"{note_call.name}: {note_call.result}")
    print(f"run: {result.status}: {result.text}")


if __name__ == "__main__":
    asyncio.run(main())
