"""The ``mcp_list_tools`` and ``mcp_close_run`` activities' inputs and
outputs (an agent's MCP servers themselves: ``oma.core.schema.mcp``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.schema.mcp import McpServerConfig, McpTool


class McpListToolsInput(BaseModel):
    """Input of the ``mcp_list_tools`` activity: start (or reach) an agent
    run's servers and list their tools."""

    run_key: str = Field(description="'<workflow id>/<Temporal run id>' of the agent run.")
    agent: str
    servers: list[McpServerConfig]
    custom_tools: dict[str, str] = Field(
        default_factory=dict,
        description="The agent's custom tools, name -> import path: a server's tool of one of "
        "these names is an input error (INVALID_RUN_INPUT), not shadowed.",
    )


class McpListToolsOutput(BaseModel):
    """Every tool of every server, in declaration order, and where the stdio
    servers now run."""

    tools: list[McpTool]
    run_key: str = Field(default="", description="The run key the servers are held under.")
    worker_task_queue: str | None = Field(
        default=None, description="The task queue of the worker holding the stdio servers."
    )


class McpCloseRunInput(BaseModel):
    """Input of the ``mcp_close_run`` activity."""

    run_key: str


class McpCloseRunOutput(BaseModel):
    closed_servers: int = 0
