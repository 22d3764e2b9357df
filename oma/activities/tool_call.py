"""The ``tool_call`` activity: one call of one of an LLM agent's tools.

A built-in tool (``oma.activities.tools``) runs in the agent's ``cwd``, its
file tools confined to it; a custom tool (``oma.activities.tools.custom``) is
the user's function, loaded on this worker; an MCP tool is a ``tools/call``
on the agent run's server (``oma.activities.mcp_tools.call_mcp_tool``), which
for a stdio server lives on the worker that started it. Either way the result is what the
model reads: the output, or what went wrong as an ``is_error`` result with a
message, cut to ``max_output_chars``. The activity heartbeats while the tool
runs, so a cancel reaches it within about a second (and ``bash``'s process
tree dies with it).

Temporal runs it at least once, as it runs ``process_run``
(``oma.activities._attempt``): the heartbeat timeout outlasts a 30 s outage,
the outcome waits for a server that is away, and an attempt Temporal gave up
kills ``bash``'s process tree at once (tools.md, "Retries").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio import activity

from oma.activities._attempt import await_server
from oma.activities._heartbeat import heartbeating
from oma.activities.mcp import McpServerPool
from oma.activities.mcp_tools import call_mcp_tool
from oma.activities.tools import BUILTIN_TOOLS, ToolContext, ToolOutput, cap_output, run_builtin
from oma.activities.tools.custom import load_custom_tool
from oma.core.contracts.names import ActivityName
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import OMAError
from oma.core.schema.tools import ToolTraits

_SURROGATE = re.compile("[\ud800-\udfff]")

HEARTBEAT_INTERVAL_S = 0.5
"""Seconds between two heartbeats while a tool runs."""

MCP_TOOL_TIMEOUT_S = 600.0
"""Seconds an MCP ``tools/call`` may take; then it is cancelled and the call
is an error result (below the activity's start-to-close timeout, which would
have Temporal call the tool again)."""


class ToolActivities:
    """The ``tool_call`` activity of one worker: ``mcp_pool`` holds the MCP
    servers of its runs, ``worker_task_queue`` is the task queue only this
    worker polls (an MCP call's output names it)."""

    def __init__(self, mcp_pool: McpServerPool, worker_task_queue: str | None) -> None:
        self.mcp_pool = mcp_pool
        self.worker_task_queue = worker_task_queue

    @activity.defn(name=ActivityName.TOOL_CALL)
    async def tool_call(self, inp: ToolCallInput) -> ToolCallOutput:
        """Run ``inp.tool`` on ``inp.input``; never raises for the tool's own
        failure (it is the model's to read), only for a cancellation. The
        outcome is held until the Temporal server answers (``await_server``),
        so that an outage does not lose it and have the tool run again."""
        progress = {"tool": inp.tool.name, "last": ""}

        def note(text: str) -> None:
            progress["last"] = text[-200:]

        with heartbeating(lambda: dict(progress), HEARTBEAT_INTERVAL_S):
            out = await run_tool(inp, note, self.mcp_pool, self.worker_task_queue)
            await await_server()
        return out


async def run_tool(
    inp: ToolCallInput,
    note: Callable[[str], None] | None = None,
    mcp_pool: McpServerPool | None = None,
    worker_task_queue: str | None = None,
) -> ToolCallOutput:
    """One tool call, the activity's work without the activity (the in-process
    ``Agent`` calls it directly). ``note`` receives progress lines of a long
    tool (bash's output), when given; ``mcp_pool`` holds the MCP servers (an
    MCP tool without one is an error result). The content is always text
    JSON can carry (``_encodable``)."""
    out = await _run_tool(inp, note, mcp_pool, worker_task_queue)
    return out.model_copy(update={"content": _encodable(out.content)})


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate (a custom tool's ``"\ud800"``, an MCP
    server's ``"\\udc80"``) replaced by U+FFFD: UTF-8 cannot encode one, so
    the result could not be sent, and Temporal would run the tool again."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


async def _run_tool(
    inp: ToolCallInput,
    note: Callable[[str], None] | None,
    mcp_pool: McpServerPool | None,
    worker_task_queue: str | None,
) -> ToolCallOutput:
    if inp.mcp is not None:
        if mcp_pool is None:
            return ToolCallOutput(content="no MCP servers on this caller", is_error=True)
        try:
            mcp_out = await asyncio.wait_for(
                call_mcp_tool(mcp_pool, inp, worker_task_queue), MCP_TOOL_TIMEOUT_S
            )
        except TimeoutError:
            return ToolCallOutput(
                content=f"the MCP tool {inp.mcp.tool!r} of server {inp.mcp.server.name!r} did "
                f"not answer within {MCP_TOOL_TIMEOUT_S:g} s; the call was cancelled",
                is_error=True,
                worker_task_queue=worker_task_queue,
            )
        capped = cap_output(
            ToolOutput(content=mcp_out.content, is_error=mcp_out.is_error), inp.max_output_chars
        )
        return mcp_out.model_copy(update={"content": capped.content, "truncated": capped.truncated})
    if inp.tool.source == "builtin":
        cwd = Path(inp.cwd or ".").resolve()
        if not cwd.is_dir():
            return ToolCallOutput(
                content=f"the agent's cwd {inp.cwd!r} is not a directory on this worker",
                is_error=True,
            )
        ctx = ToolContext(cwd=cwd, max_output_chars=inp.max_output_chars, heartbeat=note)
        out = await run_builtin(inp.tool.name, inp.input, ctx)
        return ToolCallOutput(content=out.content, is_error=out.is_error, truncated=out.truncated)
    try:
        tool = load_custom_tool(inp.tool.source)
    except OMAError as err:
        return ToolCallOutput(content=f"{err.code}: {err.message}", is_error=True)
    text, is_error = await tool.call(inp.input, raise_errors=_attempts_left(inp))
    text = text or ("the tool failed" if is_error else "(no output)")
    out = cap_output(ToolOutput(content=text, is_error=is_error), inp.max_output_chars)
    return ToolCallOutput(content=out.content, is_error=out.is_error, truncated=out.truncated)


def tool_traits(agent: AgentConfig) -> dict[str, ToolTraits]:
    """What the agent's custom tools declare (``oma.consequential``,
    ``oma.retried``), by name; tools that declare nothing are left out.
    Raises ``InvalidHookError`` for one this worker cannot load."""
    traits = {
        ref.name: load_custom_tool(ref.source).traits
        for ref in agent.resolved_tools()
        if ref.source != "builtin" and not ref.source.startswith("mcp:")
    }
    return {name: t for name, t in traits.items() if t != ToolTraits()}


def _attempts_left(inp: ToolCallInput) -> bool:
    """Whether a raising tool is tried again (``oma.retried``): then its error
    fails this attempt instead of becoming the result."""
    attempt = activity.info().attempt if activity.in_activity() else inp.traits.max_attempts
    return attempt < inp.traits.max_attempts


def offered_tools(agent: AgentConfig) -> list[dict[str, Any]]:
    """The tools a model turn of ``agent`` is sent (``tool_definitions``;
    none for an agent that names no tool and lists no MCP tool): what the
    providers send and a turn's ``RequestDigest`` digests. Raises
    ``InvalidHookError`` for a custom tool this worker cannot load."""
    return tool_definitions(agent) if agent.tools or agent.mcp_tools else []


def tool_definitions(agent: AgentConfig) -> list[dict[str, Any]]:
    """The agent's tools as the Anthropic Messages API's ``tools``
    (``name``, ``description``, ``input_schema``), in declaration order, its
    MCP servers' tools as the run recorded their listing last.
    Raises ``InvalidHookError`` for a custom tool this worker cannot load."""
    definitions = []
    listed = {tool.name: tool for tool in agent.mcp_tools or []}
    for ref in agent.resolved_tools():
        if (mcp := listed.get(ref.name)) is not None and ref.source.startswith("mcp:"):
            definitions.append(
                {"name": ref.name, "description": mcp.description, "input_schema": mcp.input_schema}
            )
            continue
        tool = BUILTIN_TOOLS[ref.name] if ref.source == "builtin" else load_custom_tool(ref.source)
        definitions.append(
            {"name": ref.name, "description": tool.description, "input_schema": tool.input_schema()}
        )
    return definitions
