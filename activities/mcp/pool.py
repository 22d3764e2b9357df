"""The worker's MCP servers, keyed by (run, agent, server).

The routing of ACP sessions (docs/external-agents.md,
"Sessions on Temporal"), reused: the worker that starts a stdio server keeps it here;
the agent run's later calls are routed to this worker's own task queue and
find it again. Servers end when the run ends (``close_run``, and the reaper
``oma.activities.acp.reaper`` for a run that ended without saying so) or the
worker stops (``close_all``); a stdio server's guard
(``oma.activities.mcp._guard``) ends it when the worker dies.
"""

from __future__ import annotations

import asyncio

from oma.activities.mcp.server import McpServer
from oma.core.schema.mcp import McpServerConfig

ServerKey = tuple[str, str, str]
"""(run_key, agent, server name)."""


class McpServerPool:
    """Worker-local MCP servers; one pool per worker process (or per
    in-process ``Agent``). ``spawn_count``: servers started so far."""

    def __init__(self) -> None:
        self._servers: dict[ServerKey, McpServer] = {}
        self._locks: dict[ServerKey, asyncio.Lock] = {}
        self.spawn_count = 0

    def __len__(self) -> int:
        return len(self._servers)

    def run_keys(self) -> set[str]:
        """The runs this pool holds servers for."""
        return {key[0] for key in self._servers}

    async def get_or_open(
        self, run_key: str, agent: str, config: McpServerConfig
    ) -> tuple[McpServer, bool]:
        """The live server of (``run_key``, ``agent``, ``config.name``), or a
        new one (``True``). A held server that has exited is replaced. Raises
        what ``McpServer.open`` raises."""
        key = (run_key, agent, config.name)
        async with self._locks.setdefault(key, asyncio.Lock()):
            server = self._servers.get(key)
            if server is not None:
                if server.alive:
                    return server, False
                del self._servers[key]
                await server.close()
            server = await McpServer.open(config)
            self._servers[key] = server
            self.spawn_count += 1
            return server, True

    async def close_run(self, run_key: str) -> int:
        """Close every server of ``run_key`` (stdio: its process tree dies).
        Returns how many."""
        keys = [key for key in self._locks if key[0] == run_key]
        servers = []
        for key in keys:
            async with self._locks[key]:
                server = self._servers.pop(key, None)
            self._locks.pop(key, None)
            if server is not None:
                servers.append(server)
        await asyncio.gather(*(server.close() for server in servers))
        return len(servers)

    async def close_all(self) -> int:
        """Close every server (at worker shutdown). Returns how many."""
        servers = list(self._servers.values())
        self._servers.clear()
        self._locks.clear()
        await asyncio.gather(*(server.close() for server in servers))
        return len(servers)
