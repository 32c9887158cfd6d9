"""MCP servers' tools as steadyrun tools: stdio and HTTP, results, errors, traits, meta."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.control import Confirm
from steadyrun.extensions.mcp import CALL_ID_META_KEY, McpError, McpServer, McpToolError, McpTraits
from steadyrun.testing import ScriptedModel, text, tool_calls
from steadyrun.tools import ToolArgumentsError, validate_tool_name
from steadyrun.tools._schema_tool import schema_tool

SERVER = Path(__file__).with_name("mcp_server.py")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LONG_NAME = "summarise_the_quarterly_revenue_report_for_every_region_and_product_line"


def stdio_server(**kw: object) -> McpServer:
    return McpServer.stdio(sys.executable, [str(SERVER)], **kw)  # type: ignore[arg-type]


async def run_with(tools: list[sr.Tool], *steps: object) -> sr.RunResult:
    model = ScriptedModel([*steps, text("Done.")])  # type: ignore[list-item]
    agent = sr.Agent(name="a", model=model, tools=tools)
    return await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="Go.")


async def test_an_agent_calls_a_tool_of_a_stdio_server() -> None:
    async with stdio_server() as server:
        assert server.name == "testkit"
        tools = await server.tools()
        result = await run_with(tools, tool_calls(("testkit_add", {"a": 2, "b": 3})))
    assert result.status == "completed"
    assert [(c.name, c.status, c.result) for c in result.calls] == [
        ("testkit_add", "succeeded", "5")
    ]


async def test_tool_names_are_prefixed_valid_and_sorted() -> None:
    async with stdio_server(name="kit") as server:
        names = [t.name for t in await server.tools()]
        unprefixed = [t.name for t in await server.tools(prefix="")]
    assert names == sorted(names)
    assert all(not validate_tool_name(n) for n in names + unprefixed)
    assert "kit_add" in names and "add" in unprefixed
    read = [n for n in names if n.startswith("kit_files_read_")]
    assert len(read) == 1 and len(read[0]) == len("kit_files_read_") + 8
    long = [n for n in names if n.startswith("kit_summarise")]
    assert len(long) == 1 and len(long[0]) == 64


async def test_a_tool_error_is_a_failed_call_with_the_servers_text() -> None:
    async with stdio_server() as server:
        tools = await server.tools()
        result = await run_with(tools, tool_calls(("testkit_fail", {"message": "disk full"})))
    (call,) = result.calls
    assert call.status == "failed"
    assert "McpToolError" in (call.error or "") and "disk full" in (call.error or "")


async def test_invalid_arguments_reach_the_model_and_not_the_server() -> None:
    async with stdio_server() as server:
        tools = await server.tools()
        result = await run_with(
            tools,
            tool_calls(("testkit_add", {"a": "two"}), ("testkit_echo", {"times": 2})),
        )
    first, second = result.calls
    assert first.status == second.status == "failed"
    assert (first.error or "").startswith("Invalid arguments for testkit_add: ")
    assert 'a: expected integer, got "two"' in (first.error or "")
    assert "b: missing required argument" in (first.error or "")
    assert first.started_at is None  # rejected before it ran
    assert "text: missing required argument" in (second.error or "")


async def test_content_other_than_text_is_noted() -> None:
    async with stdio_server() as server:
        tools = await server.tools()
        result = await run_with(tools, tool_calls(("testkit_picture", {})))
    assert result.calls[0].result == "[image omitted: image/png]\na caption"


async def test_the_record_id_reaches_the_server_in_meta() -> None:
    async with stdio_server() as server:
        tools = await server.tools()
        result = await run_with(tools, tool_calls(("testkit_whoami", {})))
    (call,) = result.calls
    meta = json.loads(call.result or "")["meta"]
    assert meta[CALL_ID_META_KEY] == call.id
    assert meta["steadyrun/run_id"] == "r"


async def test_traits_come_from_annotations_then_server_then_tool() -> None:
    def confirm(view: object) -> Confirm:
        return Confirm(prompt="Delete?")

    async with stdio_server() as server:
        default = {t.name: t for t in await server.tools()}
        custom = {
            t.name: t
            for t in await server.tools(
                traits=McpTraits(timeout=5.0, side_effects=True),
                per_tool={"delete_file": McpTraits(policy=confirm, concurrency_key="files")},
            )
        }
        plain = {t.name: t for t in await server.tools(use_annotations=False)}
    add, echo, delete = (
        default["testkit_add"],
        default["testkit_echo"],
        default["testkit_delete_file"],
    )
    assert (add.side_effects, add.replayable, add.concurrency_key) == (False, True, "")
    assert (echo.side_effects, echo.replayable) == (False, True)
    assert (delete.side_effects, delete.replayable, delete.concurrency_key) == (True, False, None)
    slow = default["testkit_slow"]  # no annotations: the safe default
    assert (slow.side_effects, slow.replayable, slow.timeout) == (True, False, None)
    assert custom["testkit_add"].side_effects is True and custom["testkit_add"].timeout == 5.0
    assert custom["testkit_delete_file"].policy is confirm
    assert custom["testkit_delete_file"].concurrency_key == "files"
    assert custom["testkit_echo"].policy is None
    assert plain["testkit_add"].side_effects is True and plain["testkit_add"].replayable is False


async def test_include_exclude_and_unknown_names() -> None:
    async with stdio_server() as server:
        some = await server.tools(include=["add", "echo", "files.read"], exclude=["echo"])
        with pytest.raises(sr.UsageError, match="no tool 'ad'"):
            await server.tools(per_tool={"ad": McpTraits(side_effects=False)})
        with pytest.raises(sr.UsageError, match="no tool 'nope'"):
            await server.tools(include=["nope"])
        everything = {t.name for t in await server.tools()}
    assert [t.name for t in some][0] == "testkit_add"
    assert len(some) == 2 and {t.name for t in some} <= everything  # names do not change


async def test_taken_names_are_avoided() -> None:
    async with stdio_server() as server:
        names = {t.name for t in await server.tools(taken={"testkit_add"})}
    assert "testkit_add" not in names
    assert any(n.startswith("testkit_add_") for n in names)


async def test_a_timeout_settles_a_call_with_side_effects_as_needing_review() -> None:
    async with stdio_server() as server:
        tools = await server.tools(per_tool={"slow": McpTraits(timeout=0.2)})
        result = await run_with(tools, tool_calls(("testkit_slow", {"seconds": 30})))
    assert result.calls[0].status == "needs_review"


async def test_a_lost_connection_leaves_the_outcome_unknown() -> None:
    async with stdio_server() as server:
        tools = await server.tools(per_tool={"crash": McpTraits(replayable=True)})
        result = await run_with(tools, tool_calls(("testkit_crash", {})))
    assert result.calls[0].status == "interrupted"  # replayable: the model may call again
    assert "Connection closed" in (result.calls[0].result or "")


async def test_calls_outside_the_connection_fail_clearly() -> None:
    async with stdio_server() as server:
        (add,) = await server.tools(include=["add"])
        assert await add.invoke({"a": 1, "b": 1}) == "2"
    assert not server.connected
    with pytest.raises(McpError, match="not connected"):
        await add.invoke({"a": 1, "b": 1})


async def test_direct_calls_raise_the_tools_error() -> None:
    async with stdio_server() as server:
        with pytest.raises(McpToolError, match="boom"):
            await server.call("fail", {"message": "boom"})
        with pytest.raises(McpToolError, match="Unknown tool"):
            await server.call("no_such_tool", {})


async def test_a_server_that_does_not_start_is_an_mcp_error() -> None:
    with pytest.raises(McpError, match="cannot connect to MCP server"):
        async with McpServer.stdio("/nonexistent/steadyrun-mcp-server"):
            pass
    quitter = McpServer.stdio(sys.executable, ["-c", "import sys; sys.exit(3)"])
    with pytest.raises(McpError, match="cannot connect"):
        async with quitter:
            pass
    with pytest.raises(McpError, match="cannot connect"):
        async with McpServer.http("http://127.0.0.1:9/mcp", connect_timeout=5):
            pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_an_agent_calls_a_tool_over_streamable_http(http_server: str) -> None:
    async with McpServer.http(http_server, headers={"X-Test": "1"}, name="web") as server:
        tools = await server.tools()
        result = await run_with(tools, tool_calls(("web_echo", {"text": "hi", "times": 2})))
    assert [(c.status, c.result) for c in result.calls] == [("succeeded", "hi hi")]


def test_schema_tool_validates_with_the_json_schema() -> None:
    def call(arguments: dict[str, object], ctx: object) -> str:
        return json.dumps(arguments)

    schema = {
        "type": "object",
        "properties": {"from": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["from"],
    }
    tool = schema_tool("copy", "Copy.", schema, call, side_effects=True)
    assert tool.side_effects and tool.definition().parameters == schema
    assert tool.validate('{"from": "a"}') == {"from": "a"}  # no defaults added
    for bad, problem in [
        ("  ", "from: missing required argument"),  # blank counts as {}
        ("[1]", r"must be a JSON object, got \[1\]"),
        ("{", "not valid JSON"),
        ('{"n": 0}', "from: missing required argument"),
        ('{"from": "a", "n": 0}', "n: must be >= 1, got 0"),
    ]:
        with pytest.raises(ToolArgumentsError, match=problem):
            tool.validate(bad)
    with pytest.raises(sr.ToolDefinitionError, match="not a valid JSON schema"):
        schema_tool("bad", "Bad.", {"type": 12}, call)
    with pytest.raises(sr.ToolDefinitionError, match="unknown trait 'sideeffects'"):
        schema_tool("bad", "Bad.", schema, call, sideeffects=True)
    with pytest.raises(sr.ToolDefinitionError):
        schema_tool("bad name", "Bad.", schema, call)


async def test_schema_tool_invokes_sync_and_async_functions() -> None:
    async def acall(arguments: dict[str, object], ctx: object) -> str:
        return f"async {arguments}"

    def scall(arguments: dict[str, object], ctx: object) -> str:
        return f"sync {arguments}"

    schema = {"type": "object"}
    assert await schema_tool("a", "A.", schema, acall).invoke({"x": 1}) == "async {'x': 1}"
    assert await schema_tool("s", "S.", schema, scall).invoke({"x": 1}) == "sync {'x': 1}"


def test_the_mcp_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp_tools.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "add(19, 23) = 42" in out.stdout


def test_mcp_notes_follow_the_runtimes_texts() -> None:
    from mcp import types as mcp_types

    from steadyrun.extensions.mcp import _render_result
    from steadyrun.runtime import Texts

    result = mcp_types.CallToolResult(
        content=[mcp_types.ImageContent(type="image", data="AAAA", mime_type="image/png")]
    )
    assert _render_result(result, Texts()) == "[image omitted: image/png]"
    assert _render_result(result, Texts.chinese()) == "[已省略image：image/png]"
