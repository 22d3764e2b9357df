"""MCP servers as the tests configure them: ``tests/support/mcp_server.py`` (a real
MCP server over stdio) and a scripted agent that calls its tools."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT


def python_server(name: str = "t", *args: str) -> dict[str, Any]:
    """``tests/support/mcp_server.py`` as the MCP server ``name``, with ``args``."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server", *args],
        "cwd": str(ROOT),
    }


def mcp_agent(*script: Any, servers: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    """A scripted agent ``clerk`` with ``servers`` for MCP servers."""
    return {
        "name": "clerk",
        "provider": "scripted",
        "script": list(script),
        "mcp_servers": servers,
        **config,
    }


async def started(marker: Path, within_s: float = 30.0) -> int:
    """The pid of the server once its ``slow`` call has started."""
    path = Path(str(marker) + ".started")
    deadline = time.monotonic() + within_s
    while not path.exists():
        assert time.monotonic() < deadline, "the slow call never started"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.05)
    return int(path.read_text())
