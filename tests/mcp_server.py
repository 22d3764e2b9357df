"""A small MCP server (the ``mcp`` SDK's ``MCPServer``) for the error cases
of tests/test_mcp.py: state kept across calls, a tool that raises, a slow
tool, a server that dies. ``python -m tests.mcp_server`` serves stdio;
``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``.

``slow`` writes ``<marker>.started`` when it starts and ``<marker>.done`` if
it ever finishes, so a test can see a call cancelled mid-way.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("oma-test", log_level="CRITICAL")
_memory: list[str] = []


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def remember(value: str) -> str:
    """Keep a value; answers everything kept so far."""
    _memory.append(value)
    return ",".join(_memory)


@server.tool()
def fail(message: str) -> str:
    """Raise ``RuntimeError(message)``."""
    raise RuntimeError(message)


@server.tool()
async def slow(seconds: float, marker: str) -> str:
    """Sleep ``seconds``, marking its start and end in files."""
    Path(marker + ".started").write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    Path(marker + ".done").write_text("done")
    return "slept"


@server.tool()
def die() -> str:
    """End this server's process at once."""
    os._exit(3)


@server.tool()
def authorization(ctx: Context) -> str:
    """The ``Authorization`` header of the HTTP request (HTTP only)."""
    request = ctx.request_context.request
    return str(request.headers.get("authorization", "")) if request is not None else ""


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run()
