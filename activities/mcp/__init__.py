"""MCP servers as an LLM agent's tools: OMA is the MCP client (docs/mcp.md).

``McpServer`` is one connection (``mcp`` SDK ``ClientSession``);
``McpServerPool`` keeps a worker's servers across activities; the activities
are in ``oma.activities.mcp_tools``.
"""

from oma.activities.mcp.pool import McpServerPool
from oma.activities.mcp.server import McpServer

__all__ = ["McpServer", "McpServerPool"]
