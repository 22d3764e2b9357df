"""The built-in tools of an LLM agent: ``bash``, ``file_read``,
``file_write``, ``file_edit``, ``glob`` and ``grep``, as plain async Python
that the ``tool_call`` activity (or the in-process ``Agent``) calls.

The file tools and the ``path`` of ``glob`` and ``grep`` are confined to the
agent's ``cwd`` (``resolve_in_sandbox``); ``bash`` is not a sandbox. Every
result is a ``ToolOutput`` the model reads, a mistake included: only an
unknown tool name (``KeyError``) and a cancellation raise. See docs/tools.md.
"""

from oma.activities.tools.registry import BUILTIN_TOOLS, run_builtin
from oma.activities.tools.sandbox import PathOutsideSandboxError, resolve_in_sandbox
from oma.activities.tools.tool import (
    DEFAULT_MAX_OUTPUT_CHARS,
    BuiltinTool,
    ToolContext,
    ToolError,
    ToolOutput,
    cap_output,
)
from oma.core.schema.tools import PRESETS

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "PRESETS",
    "BuiltinTool",
    "PathOutsideSandboxError",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "cap_output",
    "resolve_in_sandbox",
    "run_builtin",
]
