"""The built-in tools by name, their presets (``oma.core.schema.tools.PRESETS``), and
one call of one of them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from oma.activities.tools.bash import BASH
from oma.activities.tools.file_edit import FILE_EDIT
from oma.activities.tools.file_read import FILE_READ
from oma.activities.tools.file_write import FILE_WRITE
from oma.activities.tools.glob import GLOB
from oma.activities.tools.grep import GREP
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolOutput
from oma.core.schema.validation import format_validation_error

BUILTIN_TOOLS: dict[str, BuiltinTool[Any]] = {
    tool.name: tool for tool in (BASH, FILE_READ, FILE_WRITE, FILE_EDIT, GLOB, GREP)
}
"""Every built-in tool, by the name the model calls it by."""


async def run_builtin(name: str, raw_input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """Run built-in tool ``name`` on ``raw_input`` (a ``tool_use`` block's
    ``input``) in ``ctx``.

    Input that does not validate against the tool's input model is an
    ``is_error`` result naming each bad field and what was expected; the
    model's mistakes while running (a path outside the sandbox, a missing
    file, an ``old_string`` that is not unique) are ``is_error`` results too.
    The content is cut to ``ctx.max_output_chars`` (``truncated=True``, and
    a last line says how much was left out).

    Raises ``KeyError`` for an unknown ``name``; ``asyncio.CancelledError``
    propagates (bash kills its process group first).
    """
    tool = BUILTIN_TOOLS[name]
    try:
        args = tool.input_model.model_validate(raw_input)
    except ValidationError as err:
        return ToolOutput(content=_invalid_input(tool, err), is_error=True)
    return await tool.run(args, ctx)


def _invalid_input(tool: BuiltinTool[Any], err: ValidationError) -> str:
    schema = tool.input_schema()
    required = set(schema["required"])
    fields = ", ".join(
        f"{field} ({prop.get('type', 'any')}{', required' if field in required else ''})"
        for field, prop in schema["properties"].items()
    )
    problems = format_validation_error(err).replace("; ", "\n- ")
    return f"invalid input for {tool.name}:\n- {problems}\n{tool.name} takes: {fields}"
