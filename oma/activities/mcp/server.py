"""One connection to one MCP server: a stdio subprocess or a streamable HTTP
endpoint, through the ``mcp`` SDK's ``ClientSession``.

The SDK's transports are anyio context managers that must be entered and left
by the same task, while a server outlives the activity that started it
(docs/external-agents.md, "Sessions on Temporal"). So each connection runs
in a task of its own that holds the transport open until ``close``; calls are
made from the activities' tasks through the shared ``ClientSession``.

A stdio server runs under a guard (``oma.activities.mcp._guard``), so that
its process tree dies on every path: when it exits, when it is closed or
does not start in time, and within a second of its worker being SIGKILLed.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from contextlib import AsyncExitStack
from typing import Any, TextIO, cast

import httpx2
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR

from oma.activities.mcp._guard import guarded
from oma.core.rules.redact import redact
from oma.core.schema.errors import McpServerError, MissingCredentialsError
from oma.core.schema.mcp import SEPARATOR, TOOL_NAME_CHARS, McpServerConfig, McpTool
from oma.runtime.credentials import CredentialPolicy

START_TIMEOUT_S = 60.0
"""Seconds a server has to start and answer ``initialize``; then it is stopped."""

CLOSE_TIMEOUT_S = 15.0
"""Seconds a close waits for the SDK's shutdown (closing stdin, 2 s, SIGTERM to
the group, 2 s, SIGKILL: bounded by the SDK at about 7 s) before it abandons
the connection's task."""

STDERR_TAIL_CHARS = 2000
"""How much of a stdio server's stderr its errors quote, at most (characters)."""


class _NoAnswer(Exception):
    """The server did not answer ``initialize`` within ``START_TIMEOUT_S``."""


class McpServer:
    """A live connection to ``config``'s server. ``open`` it; ``close`` it
    (kills a stdio server's process tree: the SDK closes its stdin, then
    SIGTERM, then SIGKILL to its process group; the guard kills what the
    server left behind)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False  # the connection dropped: the server exited
        self._refusal: tuple[int, str] | None = None  # an HTTP server's last error status
        # a stdio server's stderr: kept for its errors, off the worker's console
        self._stderr: TextIO | None = (
            cast(TextIO, tempfile.TemporaryFile("w+"))  # noqa: SIM115 (closed by close())
            if config.command is not None
            else None
        )

    @classmethod
    async def open(cls, config: McpServerConfig) -> McpServer:
        """Start (stdio) or reach (HTTP) the server and ``initialize`` it.

        Raises ``McpServerError`` (``MCP_SERVER_FAILED``) naming the server
        when it cannot be started, refuses (an HTTP error status, named) or
        does not answer ``initialize`` in ``START_TIMEOUT_S`` (then it is
        stopped); ``CredentialNotAllowedError``, before connecting, for a
        header whose variable the worker does not allow to go to the server's
        ``url`` (``oma.runtime.credentials``); ``MissingCredentialsError``
        for a header whose variable is unset. A cancelled open stops the
        server before it propagates.
        """
        server = cls(config)
        headers = _headers(config)
        server._task = asyncio.create_task(server._hold(headers), name=f"mcp {config.name}")
        ready = asyncio.create_task(server._ready.wait())
        try:
            # _hold bounds the start by START_TIMEOUT_S
            await asyncio.wait({ready, server._task}, return_when="FIRST_COMPLETED")
        except asyncio.CancelledError:
            await _despite_cancellation(server.close())
            raise
        finally:
            ready.cancel()
        if server._session is None or server._task.done():
            said = server._said()
            await _despite_cancellation(server.close())
            reason, retryable = server._start_failure()
            error = McpServerError(f"MCP server {config.name!r} did not start: {reason}{said}")
            # a first start may be slow or flaky (npx installing the server):
            # Temporal tries the listing again (oma/workflows/_options.MCP_LIST_TOOLS)
            error.retryable = retryable
            raise error
        return server

    def _start_failure(self) -> tuple[str, bool]:
        """Why the server did not start, and whether another try may do better
        (not after an HTTP refusal: 4xx but a timeout or a rate limit)."""
        if self._refusal is not None and (self._failure is None or _stand_in(self._failure)):
            status, phrase = self._refusal
            reason = f"it answered initialize with HTTP {status} {phrase}".rstrip()
            return reason, status >= 500 or status in (408, 429)
        if isinstance(self._failure, _NoAnswer) or self._failure is None:
            return f"it did not answer initialize within {START_TIMEOUT_S:g} s", True
        return _describe(self._failure), True

    def _said(self) -> str:
        """``; its stderr ends: ...``: the last ``STDERR_TAIL_CHARS`` a stdio
        server wrote to its stderr, redacted (``oma.core.rules.redact``), for an
        error message; empty when it wrote nothing (or is an HTTP server)."""
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            text = self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
        except (OSError, ValueError):  # closed
            return ""
        return f"; its stderr ends:\n{redact(text)}" if text else ""

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._closed

    async def list_tools(self) -> list[McpTool]:
        """Every tool the server lists (all pages), named ``<server>__<tool>``.
        Raises ``McpServerError`` when the server fails or a name is not a
        valid tool name."""
        session = self._live()
        tools: list[McpTool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._guard("tools/list", session.list_tools(params=params))
            for tool in page.tools:
                name = f"{self.config.name}{SEPARATOR}{tool.name}"
                if not TOOL_NAME_CHARS.match(name):
                    raise McpServerError(
                        f"MCP server {self.config.name!r} lists tool {tool.name!r}, whose name "
                        f"{name!r} is not a valid tool name (letters, digits, '_', '-', at most "
                        "64 characters); shorten the server's name or disallow it on the server"
                    )
                tools.append(
                    McpTool(
                        name=name,
                        server=self.config.name,
                        tool=tool.name,
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema),
                    )
                )
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """``tools/call``: the result's text blocks joined (other blocks
        described), and whether the server flagged it ``isError``. A
        cancellation propagates (the SDK tells the server). Raises
        ``McpServerError`` when the server fails or has exited."""
        result = await self._guard("tools/call", self._live().call_tool(tool, arguments))
        if not isinstance(result, types.CallToolResult):
            raise McpServerError(f"MCP server {self.config.name!r} did not return a tool result")
        parts = [_text_of(block) for block in result.content]
        if not parts and result.structured_content is not None:
            parts.append(str(result.structured_content))
        return "\n".join(parts), bool(result.is_error)

    async def close(self) -> None:
        """End the connection: a stdio server's process tree dies (within
        about 7 s for one that ignores its closed stdin and SIGTERM)."""
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=CLOSE_TIMEOUT_S)
            if not self._task.done():  # the SDK's bounded shutdown did not end: give up on it
                self._task.cancel()
                await asyncio.wait({self._task})
        if self._stderr is not None:
            self._stderr.close()

    def _live(self) -> ClientSession:
        if self._session is None or not self.alive:
            raise McpServerError(f"MCP server {self.config.name!r} has exited")
        return self._session

    async def _guard(self, method: str, request: Any) -> Any:
        # a server that dies mid-request closes its streams; wait on both
        call = asyncio.ensure_future(request)
        assert self._task is not None
        done, _ = await asyncio.wait({call, self._task}, return_when="FIRST_COMPLETED")
        if call not in done:
            call.cancel()
            reason = f": {_describe(self._failure)}" if self._failure else ""
            raise McpServerError(
                f"MCP server {self.config.name!r} exited during {method}{reason}{self._said()}"
            )
        try:
            return call.result()
        except Exception as err:
            if isinstance(err, MCPError) and err.code == CONNECTION_CLOSED:
                self._closed = True
            if not self.alive:
                raise McpServerError(
                    f"MCP server {self.config.name!r} exited during {method}"
                ) from err
            why = _describe(err)
            if self._refusal is not None and _stand_in(err):
                why = f"HTTP {' '.join(map(str, self._refusal))}".rstrip()
            raise McpServerError(f"MCP server {self.config.name!r} failed {method}: {why}") from err

    async def _hold(self, headers: dict[str, str]) -> None:
        try:
            async with AsyncExitStack() as stack:
                if self.config.command is not None:
                    command, args = guarded(self.config.command, self.config.args)
                    params = StdioServerParameters(
                        command=command, args=args, env=self.config.env or None, cwd=self.config.cwd
                    )
                    assert self._stderr is not None
                    read, write = await stack.enter_async_context(
                        stdio_client(params, errlog=self._stderr)
                    )
                else:
                    assert self.config.url is not None
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=headers, event_hooks={"response": [self._saw_response]}
                        )
                    )
                    read, write = await stack.enter_async_context(
                        streamable_http_client(self.config.url, http_client=http)
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                if not await self._initialize(session):
                    return  # closed, or no answer in time (_failure says)
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as err:  # the server's failure is reported by whoever calls it
            self._failure = err

    async def _initialize(self, session: ClientSession) -> bool:
        """``initialize``, for at most ``START_TIMEOUT_S``; ``False`` when
        ``close`` came first or the time ran out (``_failure`` is then
        ``_NoAnswer``). Raises what the request raises. The request alone is
        cancelled, in a task of its own: this task leaves the transport the
        way it entered it, so that the SDK stops the server."""
        answer = asyncio.ensure_future(session.initialize())
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            done, _ = await asyncio.wait(
                {answer, stop}, timeout=START_TIMEOUT_S, return_when="FIRST_COMPLETED"
            )
        finally:
            stop.cancel()
            if not answer.done():
                answer.cancel()
                await asyncio.wait({answer})
        if answer not in done:
            if not self._stop.is_set():
                self._failure = _NoAnswer()
            return False
        answer.result()
        return True

    async def _saw_response(self, response: httpx2.Response) -> None:
        # the SDK answers a request whose POST got an error status without a
        # JSON-RPC error with a stand-in that does not say the status
        if response.request.method == "POST":
            failed = response.status_code >= 400
            self._refusal = (response.status_code, response.reason_phrase) if failed else None


def _headers(config: McpServerConfig) -> dict[str, str]:
    if config.headers:
        assert config.url is not None  # headers are for HTTP servers (McpServerConfig)
        credentials = CredentialPolicy.from_env()
        for variable in config.headers.values():
            credentials.check(variable, config.url, who=f"MCP server {config.name!r}")
    missing = [var for var in config.headers.values() if var not in os.environ]
    if missing:
        raise MissingCredentialsError(
            f"MCP server {config.name!r}: set {', '.join(missing)} in the worker's environment "
            "(its headers read their values from there)"
        )
    return {header: os.environ[var] for header, var in config.headers.items()}


def _stand_in(err: BaseException) -> bool:
    """Whether ``err`` is the SDK's error for an HTTP error status
    (``INTERNAL_ERROR``, "Server returned an error response"), or a group of them."""
    if isinstance(err, BaseExceptionGroup):
        return all(_stand_in(e) for e in err.exceptions)
    return isinstance(err, MCPError) and err.code == INTERNAL_ERROR


async def _despite_cancellation(closing: Any) -> None:
    """Await ``closing`` (a close, bounded in time) to its end even when the
    caller is cancelled meanwhile; then the cancellation propagates."""
    task = asyncio.ensure_future(closing)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()


def _text_of(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content left out]"


def _describe(err: BaseException) -> str:
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in err.exceptions)
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
