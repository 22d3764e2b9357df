"""The ``tool_call`` activity's input and output: one call of one tool
(``oma.core.schema.tools`` says which tools an agent may call)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from oma.core.schema.mcp import McpCall
from oma.core.schema.tools import ToolRef, ToolTraits


class ToolCallInput(BaseModel):
    """Input of the ``tool_call`` activity: one call of one tool."""

    agent: str = Field(description="The agent that calls it.")
    tool: ToolRef
    tool_use_id: str = Field(description="The model's id of the call (``tool_use.id``).")
    input: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")
    cwd: str | None = Field(
        default=None,
        description="The agent's working directory (the file tools' sandbox); none: the worker's.",
    )
    max_output_chars: int = Field(default=30_000, ge=1)
    traits: ToolTraits = Field(
        default_factory=ToolTraits, description="What the tool declares about its calls."
    )
    mcp: McpCall | None = Field(default=None, description="An MCP tool's server and name.")


class ToolCallOutput(BaseModel):
    """What a tool call gave: the ``tool_result`` the model receives."""

    content: str = Field(description="The tool's output, or what went wrong (never empty).")
    is_error: bool = False
    truncated: bool = Field(default=False, description="The output was cut to the cap.")
    worker_task_queue: str | None = Field(
        default=None, description="An MCP tool of a stdio server: the worker holding the server."
    )
