"""The worker's MCP servers, keyed by (run, agent, server): a ``PinnedPool``
(``oma.activities.pinned``) of ``McpServer``.

The routing of ACP sessions (docs/external-agents.md, "Sessions on
Temporal"): the worker that starts a stdio server keeps it here; the agent
run's later calls are routed to this worker's own task queue and find it
again. A stdio server's guard (``oma.activities.mcp._guard``) also ends it
when the worker dies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma.activities._lazy import import_off_loop
from oma.activities.pinned import PinnedPool
from oma.core.schema.mcp import McpServerConfig

if TYPE_CHECKING:
    from oma.activities.mcp.server import McpServer


class McpServerPool(PinnedPool["McpServer"]):
    """Worker-local MCP servers; one pool per worker process (or per
    in-process ``Agent``)."""

    async def get_or_open(
        self, run_key: str, agent: str, config: McpServerConfig
    ) -> tuple[McpServer, bool]:
        """The live server of (``run_key``, ``agent``, ``config.name``), or a
        new one (``True``). A held server that has exited is replaced. Raises
        what ``McpServer.open`` raises."""
        # the mcp SDK, imported by the first server opened, not by the pool
        server = await import_off_loop("oma.activities.mcp.server")

        return await self.acquire(
            (run_key, agent, config.name), lambda: server.McpServer.open(config)
        )
