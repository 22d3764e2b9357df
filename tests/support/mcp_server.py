"""A small MCP server (the ``mcp`` SDK's ``MCPServer``) for the error cases
of tests/workflows/test_mcp.py: state kept across calls, a tool that raises, a slow
tool, a server that dies, one that leaves a child process behind.
``python -m tests.support.mcp_server`` serves stdio; ``--http PORT`` serves
streamable HTTP on 127.0.0.1:PORT at ``/mcp``; ``--tools N`` adds N tools
``tool0000``... (a large listing), each with a description and a schema of
its own.

``slow`` writes ``<marker>.started`` when it starts and ``<marker>.done`` if
it ever finishes, so a test can see a call cancelled mid-way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
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


@server.tool()
def spawn_child(new_session: bool = False) -> int:
    """Start a child process that sleeps for 10 minutes, in this server's
    process group as a server's helper would be, or (``new_session``) in a
    session of its own, as a daemon; answers its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=new_session
    )
    return child.pid


def numbered_tool(number: int) -> None:
    """Register ``tool<number>``: it echoes its query."""

    def tool(query: str, limit: int = 10, exact: bool = False) -> str:
        return f"{number}: {query}"

    server.add_tool(
        tool,
        name=f"tool{number:04d}",
        description=f"Numbered tool {number:04d}: searches shelf {number} of the archive "
        "for a query and answers the matching entries, at most limit of them.",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--tools", type=int, default=0, metavar="N")
    args = parser.parse_args()
    for number in range(args.tools):
        numbered_tool(number)
    if args.http is not None:
        server.run("streamable-http", port=args.http)
    else:
        server.run()
