"""Tool calls as a scripted model makes them, and the tool results it received."""

from __future__ import annotations

from typing import Any

from oma.core.schema.messages import ToolResultBlock
from oma.core.schema.results import AgentRunResult


def tool_use(tool_id: str, name: str, **args: Any) -> dict[str, Any]:
    """A scripted ``tool_use`` block: tool ``name`` called with ``args``."""
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args}


def tool_results(result: AgentRunResult) -> list[ToolResultBlock]:
    """Every tool result the model received, in order."""
    return [
        b
        for m in result.messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


def turn_results(result: AgentRunResult, turn: int = 0) -> list[ToolResultBlock]:
    """The tool results the model received after its ``turn``-th answer."""
    message = [m for m in result.messages if m.role == "user"][turn + 1]
    return [b for b in message.content if isinstance(b, ToolResultBlock)]
