"""MCP servers as an LLM agent's tools: OMA is the MCP client (docs/mcp.md).

``McpServer`` is one connection (``mcp`` SDK ``ClientSession``);
``McpServerPool`` keeps a worker's servers across activities; the activities
are in ``oma.activities.mcp_tools``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from oma.activities.mcp.pool import McpServerPool

if TYPE_CHECKING:
    from oma.activities.mcp.server import McpServer

__all__ = ["McpServer", "McpServerPool"]


def __getattr__(name: str) -> Any:
    # ``McpServer`` imports the mcp SDK: only when asked for (PEP 562)
    if name == "McpServer":
        return importlib.import_module("oma.activities.mcp.server").McpServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
