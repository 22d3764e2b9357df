"""The MCP activities: ``mcp_list_tools`` (start an agent run's servers and
list their tools, once per agent run) and ``mcp_close_run`` (end every server
a run started on this worker); a call of an MCP tool is a ``tool_call``
(``call_mcp_tool``).

docs/external-agents.md, "Sessions on Temporal": a stdio server outlives
the activity in the worker's ``McpServerPool``; the outputs name this
worker's own task queue, so that the workflow routes the run's later calls
back here.
"""

from __future__ import annotations

from temporalio import activity

from oma.activities.mcp import McpServerPool
from oma.core.contracts.mcp import (
    McpCloseRunInput,
    McpCloseRunOutput,
    McpListToolsInput,
    McpListToolsOutput,
)
from oma.core.contracts.names import ActivityName
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.schema.errors import InvalidRunInputError, McpServerError, OMAError
from oma.core.schema.mcp import McpTool


class McpActivities:
    """The MCP activities of one worker, sharing its ``McpServerPool``;
    ``worker_task_queue`` is the task queue only this worker polls."""

    def __init__(self, pool: McpServerPool, worker_task_queue: str | None) -> None:
        self.pool = pool
        self.worker_task_queue = worker_task_queue

    @activity.defn(name=ActivityName.MCP_LIST_TOOLS)
    async def mcp_list_tools(self, inp: McpListToolsInput) -> McpListToolsOutput:
        """Start (or reach) each of ``inp.servers`` for (``run_key``,
        ``agent``) and list its tools (``tools/list``), in declaration order.

        Raises (a worker records the failure of its code): ``MCP_SERVER_FAILED``
        naming the server that could not start or list (retryable: Temporal
        tries again, but not after an HTTP refusal), ``MISSING_CREDENTIALS``
        for an unset header variable, ``INVALID_RUN_INPUT`` for a listed tool
        of a custom tool's name. A failed listing closes the servers it opened.
        """
        return await list_mcp_tools(self.pool, inp, self.worker_task_queue)

    @activity.defn(name=ActivityName.MCP_CLOSE_RUN)
    async def mcp_close_run(self, inp: McpCloseRunInput) -> McpCloseRunOutput:
        """Close every server of ``inp.run_key`` on this worker and kill the
        stdio servers' process trees."""
        return McpCloseRunOutput(closed_servers=await self.pool.close_run(inp.run_key))


async def list_mcp_tools(
    pool: McpServerPool, inp: McpListToolsInput, worker_task_queue: str | None = None
) -> McpListToolsOutput:
    """``mcp_list_tools``'s work without the activity (the in-process
    ``Agent``); raises ``McpServerError``, ``MissingCredentialsError``,
    ``InvalidRunInputError``, having closed the run's servers."""
    tools = []
    try:
        for config in inp.servers:
            server, _ = await pool.get_or_open(inp.run_key, inp.agent, config)
            tools += await server.list_tools()
        _check_no_shadow(inp, tools)
    except BaseException:
        await pool.close_run(inp.run_key)
        raise
    return McpListToolsOutput(tools=tools, run_key=inp.run_key, worker_task_queue=worker_task_queue)


def _check_no_shadow(inp: McpListToolsInput, tools: list[McpTool]) -> None:
    for tool in tools:
        source = inp.custom_tools.get(tool.name)
        if source is not None:
            raise InvalidRunInputError(
                f"agent {inp.agent!r}: custom tool {source!r} has the name of MCP server "
                f"{tool.server!r}'s tool {tool.tool!r} ({tool.name}); rename the function or "
                "the server"
            )


async def call_mcp_tool(
    pool: McpServerPool, inp: ToolCallInput, worker_task_queue: str | None = None
) -> ToolCallOutput:
    """One ``tools/call`` of ``inp.mcp.tool`` on the run's server, started
    here first when this worker holds none (its earlier worker is lost): then
    the result says so, since whatever the old server held is gone. A tool
    that fails (``isError``), a server that cannot start or exits are
    ``is_error`` results the model reads; a cancellation propagates."""
    assert inp.mcp is not None
    mcp = inp.mcp
    queue = worker_task_queue
    try:
        server, new = await pool.get_or_open(mcp.run_key, inp.agent, mcp.server)
        text, is_error = await server.call_tool(mcp.tool, inp.input)
    except McpServerError as err:
        return ToolCallOutput(content=err.message, is_error=True, worker_task_queue=queue)
    except OMAError as err:
        return ToolCallOutput(content=f"{err.code}: {err.message}", is_error=True)
    text = text or ("the tool failed" if is_error else "(no output)")
    if new and mcp.server.stdio:
        text = (
            f"[MCP server {mcp.server.name!r} was started anew for this call (the earlier "
            "one exited or its worker was lost): whatever it held is gone]\n" + text
        )
    return ToolCallOutput(content=text, is_error=is_error, worker_task_queue=queue)
