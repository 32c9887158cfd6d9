"""Tools of MCP servers as steadyrun tools, through the official ``mcp`` SDK.

Connect to a server over stdio or streamable HTTP and list its tools as ``Tool`` objects::

    async with McpServer.stdio("python", ["files_server.py"], name="files") as files:
        tools = await files.tools(per_tool={"delete": McpTraits(policy=confirm_delete)})
        agent = sr.Agent(name="assistant", model=model, tools=tools)
        result = await runtime.run(agent, run_id="job-1", input="Tidy up /tmp.")

Tool names are ``<prefix>_<tool>`` made provider-safe (see ``_mcp_names``), the same on every
connection, so a resumed run finds its tools again. Traits come from the tools' MCP annotations,
or the safe default (side effects, not replayable), overridden per server and per tool with
``McpTraits``. Needs the ``mcp`` extra: ``pip install 'steadyrun[mcp]'``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Any, Final, TextIO, cast
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from mcp import Client, MCPError
from mcp import types as mcp_types
from mcp.client import Transport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from steadyrun._errors import SteadyrunError, ToolDefinitionError, UsageError
from steadyrun._texts import Texts
from steadyrun._version import __version__
from steadyrun.control import HostFailure
from steadyrun.extensions._mcp_names import mcp_tool_names
from steadyrun.tools import ConcurrencyKey, Policy, Retain, Tool, ToolContext
from steadyrun.tools._schema_tool import schema_tool

__all__ = [
    "CALL_ID_META_KEY",
    "RUN_ID_META_KEY",
    "McpError",
    "McpServer",
    "McpToolError",
    "McpTraits",
]

RUN_ID_META_KEY: Final = "steadyrun/run_id"
"""The ``_meta`` key of a ``tools/call`` request carrying the steadyrun run id."""

CALL_ID_META_KEY: Final = "steadyrun/call_id"
"""The ``_meta`` key carrying the call's record id: stable across resumes, for deduplication."""

# Error codes after which a call may or may not have run on the server.
_UNKNOWN_OUTCOME = frozenset(
    {mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT, mcp_types.INTERNAL_ERROR}
)
_TRANSPORT_ERRORS = (
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.HTTPError,
)


class McpError(SteadyrunError):
    """An MCP server could not be reached, or answered in a way steadyrun cannot use."""


class McpToolError(McpError):
    """An MCP tool reported an error (``isError``) or the server refused the call.

    The call is recorded ``failed``; the model reads the server's text.
    """


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


_UNSET: Final = _Unset.UNSET


@dataclass(frozen=True, kw_only=True)
class McpTraits:
    """Tool traits for MCP tools; a trait left unset keeps the value from the level below.

    The levels, lowest first: the tool's MCP annotations (or the safe default), the traits
    given for the whole server, the traits given for the tool. See ``steadyrun.tool`` for what
    each trait means.

    Attributes:
        side_effects: Whether the tool changes the world outside the run.
        replayable: Whether a call may simply run again when a resume finds it unfinished.
        concurrency_key: ``None`` (alone), a constant key (``""``: freely concurrent) or a
            function of the arguments.
        policy: Decides per call whether it runs, is submitted, or waits for confirmation.
        timeout: Seconds a call may run before it is settled as interrupted (or needs review).
        direct_result: Whether the result ends the turn as the answer.
        retain: How results survive history trimming.
        main_only: Whether only the main agent may use the tool.
        strict: Whether providers should enforce the schema exactly.
    """

    side_effects: bool | _Unset = _UNSET
    replayable: bool | _Unset = _UNSET
    concurrency_key: ConcurrencyKey | _Unset = _UNSET
    policy: Policy | None | _Unset = _UNSET
    timeout: float | None | _Unset = _UNSET
    direct_result: bool | _Unset = _UNSET
    retain: Retain | _Unset = _UNSET
    main_only: bool | _Unset = _UNSET
    strict: bool | _Unset = _UNSET

    def given(self) -> dict[str, Any]:
        """The traits that were set, by name."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not _UNSET}

    @staticmethod
    def from_annotations(annotations: mcp_types.ToolAnnotations | None) -> McpTraits:
        """The default traits of a tool with these MCP annotations.

        ``readOnlyHint`` means no side effects, replayable and freely concurrent. Otherwise the
        tool has side effects, runs alone, and is replayable only with ``idempotentHint``.
        Without annotations: side effects, not replayable (a resume never repeats the call).

        Args:
            annotations: The tool's annotations as the server listed them, if any.

        Returns:
            Traits with ``side_effects``, ``replayable`` and ``concurrency_key`` set.
        """
        if annotations is not None and annotations.read_only_hint:
            return McpTraits(side_effects=False, replayable=True, concurrency_key="")
        idempotent = annotations is not None and annotations.idempotent_hint is True
        return McpTraits(side_effects=True, replayable=idempotent, concurrency_key=None)


@dataclass(frozen=True)
class _Stdio:
    params: StdioServerParameters
    errlog: TextIO | None


@dataclass(frozen=True)
class _Http:
    url: str
    headers: dict[str, str]


class McpServer:
    """A connection to one MCP server; use ``McpServer.stdio`` or ``McpServer.http``.

    Enter it (``async with``) to connect; the tools it makes call the server while it is open.
    Enter and leave it in the same task.
    """

    def __init__(
        self, endpoint: _Stdio | _Http, *, describe: str, name: str | None, connect_timeout: float
    ) -> None:
        """Use ``McpServer.stdio`` or ``McpServer.http`` instead."""
        self._endpoint = endpoint
        self._name = name
        self._describe = describe  # for messages: the command line, or the URL sans userinfo
        self._connect_timeout = connect_timeout
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        errlog: TextIO | None = None,
        connect_timeout: float = 30.0,
    ) -> McpServer:
        """A server started as a subprocess, speaking MCP over its stdin and stdout.

        Args:
            command: The program to run, e.g. ``"npx"`` or ``sys.executable``.
            args: Its arguments.
            env: Environment variables added to the SDK's default (safe) environment.
            cwd: The working directory of the process.
            name: The server's name, the default tool name prefix; defaults to the name the
                server gives itself (pass one to keep tool names stable across versions).
            errlog: Where the server's stderr goes; defaults to ``sys.stderr``.
            connect_timeout: Seconds to start the server and complete the handshake.

        Returns:
            The (not yet connected) server.
        """
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        shown = " ".join([command, *args])
        return cls(
            _Stdio(params, errlog), describe=shown, name=name, connect_timeout=connect_timeout
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
    ) -> McpServer:
        """A server reached over streamable HTTP.

        Args:
            url: The MCP endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
            headers: Sent with every request (e.g. ``Authorization``).
            name: The server's name, the default tool name prefix; defaults to the name the
                server gives itself.
            connect_timeout: Seconds to complete the handshake.

        Returns:
            The (not yet connected) server.
        """
        parts = urlsplit(url)
        shown = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        endpoint = _Http(url, dict(headers or {}))
        return cls(endpoint, describe=shown, name=name, connect_timeout=connect_timeout)

    @property
    def name(self) -> str:
        """The name given, else the name the connected server reports, else ``"mcp"``."""
        if self._name is not None:
            return self._name
        info = self._client.server_info if self._client is not None else None
        return info.name if info is not None and info.name else "mcp"

    @property
    def connected(self) -> bool:
        """Whether the connection is open."""
        return self._client is not None

    async def __aenter__(self) -> McpServer:
        """Start or reach the server and complete the MCP handshake.

        Raises:
            UsageError: The server is connected already.
            McpError: The server did not start or the connection failed.
        """
        if self._stack is not None:
            raise UsageError(f"MCP server {self._describe!r} is connected already")
        stack = AsyncExitStack()
        try:
            async with asyncio.timeout(self._connect_timeout):
                transport = await self._open_transport(stack)
                client = Client(
                    transport,
                    client_info=mcp_types.Implementation(name="steadyrun", version=__version__),
                )
                await stack.enter_async_context(client)
        except BaseException as exc:
            await stack.aclose()
            if not isinstance(exc, Exception):
                raise
            timed_out = isinstance(exc, TimeoutError)
            reason = f"no answer within {self._connect_timeout} s" if timed_out else _reason(exc)
            raise McpError(f"cannot connect to MCP server {self._describe!r}: {reason}") from exc
        self._stack, self._client = stack, client
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the connection (and stop a stdio server)."""
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def _open_transport(self, stack: AsyncExitStack) -> Transport:
        endpoint = self._endpoint
        if isinstance(endpoint, _Stdio):
            errlog = endpoint.errlog or sys.stderr
            return cast(Transport, stdio_client(endpoint.params, errlog=errlog))
        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: SSE streams stay open
        http = httpx2.AsyncClient(headers=endpoint.headers, timeout=timeout)
        await stack.enter_async_context(http)
        return cast(Transport, streamable_http_client(endpoint.url, http_client=http))

    async def list_tools(self) -> list[mcp_types.Tool]:
        """The server's tools as MCP describes them, every page.

        Raises:
            McpError: Not connected, or the listing failed.
        """
        client = self._connected()
        found: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            while True:
                page = await client.list_tools(cursor=cursor)
                found.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return found
        except (MCPError, *_TRANSPORT_ERRORS) as exc:
            raise McpError(f"MCP server {self.name!r} could not list its tools: {exc}") from exc

    async def tools(
        self,
        *,
        traits: McpTraits | None = None,
        per_tool: Mapping[str, McpTraits] | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        prefix: str | None = None,
        taken: Collection[str] = (),
        use_annotations: bool = True,
    ) -> list[Tool]:
        """The server's tools as steadyrun tools, sorted by MCP name.

        Args:
            traits: Traits for every tool of this server, over the defaults.
            per_tool: Traits by MCP tool name, over ``traits``.
            include: Only these MCP tools (default: all).
            exclude: Leave these MCP tools out.
            prefix: Put before each name with ``_``; defaults to ``name``; ``""`` for none.
            taken: Names other tools of the agent use; no tool here gets one of them.
            use_annotations: Derive default traits from the tools' MCP annotations (hints the
                server gives); when false every tool starts from the safe default.

        Returns:
            One ``Tool`` per selected MCP tool; calling it calls the server.

        Raises:
            UsageError: ``include`` or ``per_tool`` names a tool the server does not have.
            McpError: Not connected, the listing failed, or a tool's schema is unusable.
        """
        listed = {info.name: info for info in await self.list_tools()}
        asked = set(include or ()) | set(per_tool or {})
        unknown = sorted(asked - set(listed))
        if unknown:
            have = ", ".join(sorted(listed)) or "none"
            raise UsageError(
                f"MCP server {self.name!r} has no tool {', '.join(map(repr, unknown))} "
                f"(it has: {have})"
            )
        # Names are given over the whole listing, so include/exclude never rename a tool.
        names = mcp_tool_names(listed, prefix=self.name if prefix is None else prefix, taken=taken)
        made: list[Tool] = []
        for original in sorted(listed):
            if (include is not None and original not in include) or original in exclude:
                continue
            info = listed[original]
            base = McpTraits.from_annotations(info.annotations if use_annotations else None)
            chosen = base.given() | (traits.given() if traits else {})
            if per_tool and original in per_tool:
                chosen |= per_tool[original].given()
            made.append(self._tool(info, names[original], chosen))
        return made

    def _tool(self, info: mcp_types.Tool, name: str, traits: dict[str, Any]) -> Tool:
        original = info.name

        async def call(arguments: dict[str, Any], ctx: ToolContext | None) -> str:
            return await self.call(original, arguments, ctx)

        description = info.description or info.title or f"The {original!r} tool of {self.name}."
        try:
            return schema_tool(name, description, dict(info.input_schema), call, **traits)
        except ToolDefinitionError as exc:
            raise McpError(f"MCP tool {original!r} of {self.name!r} cannot be used: {exc}") from exc

    async def call(
        self, tool: str, arguments: dict[str, Any], ctx: ToolContext | None = None
    ) -> str:
        """Call an MCP tool by its MCP name; what the steadyrun tools do.

        Args:
            tool: The tool's name on the server.
            arguments: Its arguments.
            ctx: The steadyrun call; its run id and record id go in the request's ``_meta``
                (``RUN_ID_META_KEY``, ``CALL_ID_META_KEY``) so the server can deduplicate.

        Returns:
            The result as text: text content as is, structured content as JSON when there is
            no other content, other content as a short note (``[image omitted: image/png]``).

        Raises:
            McpToolError: The tool reported an error, or the server refused the call.
            HostFailure: The connection failed during the call: it may or may not have run.
            McpError: Not connected.
        """
        client = self._connected()
        meta = None if ctx is None else {RUN_ID_META_KEY: ctx.run_id, CALL_ID_META_KEY: ctx.call_id}
        try:
            result = await client.call_tool(tool, arguments, meta=cast(Any, meta))
        except MCPError as exc:
            if exc.code in _UNKNOWN_OUTCOME:
                raise HostFailure(f"MCP server {self.name!r}: {exc}") from exc
            raise McpToolError(f"{tool} ({self.name}): {exc}") from exc
        except _TRANSPORT_ERRORS as exc:
            raise HostFailure(f"MCP server {self.name!r}: {_reason(exc)}") from exc
        texts = (ctx.texts if ctx is not None else None) or Texts()
        text = _render_result(result, texts)
        if result.is_error:
            raise McpToolError(text or texts.mcp_tool_error)
        return text

    def _connected(self) -> Client:
        if self._client is None:
            raise McpError(
                f"MCP server {self._describe!r} is not connected; use it inside "
                "`async with server:`"
            )
        return self._client


def _render_result(result: mcp_types.CallToolResult, texts: Texts) -> str:
    """The text of an MCP tool result, as the model reads it.

    Args:
        result: The result of ``tools/call``.
        texts: The runtime's model-facing sentences (the notes in place of media).

    Returns:
        Text blocks as they are, joined by newlines; the structured content as JSON when there
        are no content blocks; images, audio and binary resources as a short note.
    """
    parts = [_render_block(block, texts) for block in result.content]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def _render_block(block: mcp_types.ContentBlock, texts: Texts) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return texts.mcp_media_omitted.format(kind=block.type, mime=block.mime_type)
    if isinstance(block, mcp_types.ResourceLink):
        return texts.mcp_resource_link.format(uri=str(block.uri))
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return resource.text
    mime = resource.mime_type or "binary"
    return texts.mcp_resource_omitted.format(uri=str(resource.uri), mime=mime)


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an exception (or exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
