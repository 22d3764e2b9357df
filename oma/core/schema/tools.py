"""An LLM agent's tools: which ones it may call (one call's input and output,
the ``tool_call`` activity's, are ``oma.core.contracts.tools``).

An agent declares ``tools``: built-in tool names (``bash``, ``file_read``,
``file_write``, ``file_edit``, ``glob``, ``grep``), presets (``readonly``,
``readwrite``, ``full``) and custom tools by import path
(``package.module:function``, the model sees the function's name).
``allowed_tools`` keeps only the names it lists; ``disallowed_tools`` drops
the names it lists. Tools are off unless declared. Each call is one
``tool_call`` activity (in-process: a direct call), whatever the tool.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from oma.core.schema.mcp import McpServerConfig, McpTool, split_tool_name
from oma.core.schema.validation import EntryError, did_you_mean

BUILTIN_TOOL_NAMES = ("bash", "file_read", "file_write", "file_edit", "glob", "grep")
"""The built-in tools (``oma.activities.tools``)."""

PRESETS: dict[str, tuple[str, ...]] = {
    "readonly": ("file_read", "glob", "grep"),
    "readwrite": ("file_read", "glob", "grep", "file_write", "file_edit"),
    "full": ("file_read", "glob", "grep", "file_write", "file_edit", "bash"),
}
"""Named sets of built-in tools."""

CUSTOM_TOOL_PATH = re.compile(r"^[A-Za-z_][\w.]*:([A-Za-z_]\w*)$")
"""A custom tool's import path, ``package.module:function``."""

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a tool's name may be (the Anthropic Messages API's ``tools[].name``)."""


class ToolTraits(BaseModel):
    """What a custom tool declares about its calls (``consequential``,
    ``retried``); read by the worker and recorded with the model's turn, so
    the workflow's choices replay."""

    consequential: bool = Field(default=False, description="Every call is gated.")
    max_attempts: int = Field(
        default=1, ge=1, description="Attempts of a call whose tool raises (Temporal retries)."
    )
    retry_interval_s: float = Field(default=1.0, gt=0, description="Before the first retry.")


TRAITS = "__oma_tool_traits__"
"""The attribute the decorators below set on a custom tool's function."""

F = TypeVar("F", bound=Callable[..., Any])


def consequential(function: F) -> F:
    """Mark a custom tool as consequential: every call of it is an approval
    request (boundary ``tool``), whether or not ``options.approvals.tools``
    names it::

        @oma.consequential
        def deploy(environment: str) -> str:
            ...
    """
    traits = getattr(function, TRAITS, ToolTraits())
    setattr(function, TRAITS, traits.model_copy(update={"consequential": True}))
    return function


def retried(max_attempts: int, interval_s: float = 1.0) -> Callable[[F], F]:
    """Declare a custom tool's retry policy: a call that raises is tried
    again (a new ``tool_call`` attempt, ``interval_s`` seconds later, then
    twice as long each time) up to ``max_attempts`` attempts in all; the last
    one's error is the result the model reads. Undeclared, a raising tool is
    not retried (its error goes to the model at once)::

        @oma.retried(max_attempts=3)
        def fetch(url: str) -> str:
            ...
    """

    def mark(function: F) -> F:
        traits = getattr(function, TRAITS, ToolTraits())
        update = {"max_attempts": max_attempts, "retry_interval_s": interval_s}
        setattr(function, TRAITS, traits.model_copy(update=update))
        return function

    return mark


class ToolRef(BaseModel):
    """One tool an agent may call: the ``name`` the model calls it by, and
    where it comes from: ``builtin``, or a custom tool's import path."""

    name: str
    source: str


def resolve_tools(
    tools: list[str],
    allowed: list[str] | None,
    disallowed: list[str],
    mcp_servers: list[McpServerConfig] | None = None,
    mcp_tools: list[McpTool] | None = None,
) -> list[ToolRef]:
    """The tools an agent declares, presets expanded, in declaration order
    without repeats, then the tools its MCP servers listed (``mcp_tools``,
    source ``mcp:<server>``), narrowed by ``allowed`` and ``disallowed``
    (tool names). Before the listing, a ``<server>__<tool>`` name in
    ``allowed``/``disallowed`` only needs a declared server.

    Raises ``ValueError`` naming an entry that is neither a built-in tool, a
    preset nor an import path, a custom tool whose name is not a valid tool
    name or repeats another tool's, and an ``allowed``/``disallowed`` name
    that none of the declared tools has (a typo would silently keep a tool).
    """
    refs: dict[str, ToolRef] = {}
    for index, entry in enumerate(tools):
        if entry in PRESETS or entry in BUILTIN_TOOL_NAMES:
            for name in PRESETS.get(entry, (entry,)):
                refs.setdefault(name, ToolRef(name=name, source="builtin"))
            continue
        match = CUSTOM_TOOL_PATH.match(entry)
        at = ("tools", index)
        if match is None:
            meant = did_you_mean(entry, [*BUILTIN_TOOL_NAMES, *PRESETS])
            raise EntryError(
                f"unknown tool {entry!r}{f' (did you mean {meant!r}?)' if meant else ''}: "
                f"give a built-in tool ({', '.join(BUILTIN_TOOL_NAMES)}), a preset "
                f"({', '.join(PRESETS)}) or a custom tool as 'package.module:function'",
                at,
            )
        name = match.group(1)
        if not TOOL_NAME.match(name):
            raise EntryError(f"custom tool {entry!r}: {name!r} is not a valid tool name", at)
        earlier = refs.get(name)
        if earlier is not None and earlier.source != entry:
            raise EntryError(f"custom tool {entry!r} has the name of tool {earlier.source!r}", at)
        refs[name] = ToolRef(name=name, source=entry)
    for tool in mcp_tools or []:
        refs.setdefault(tool.name, ToolRef(name=tool.name, source=f"mcp:{tool.server}"))
    servers = {server.name for server in mcp_servers or []}
    for field, names in (("allowed_tools", allowed or []), ("disallowed_tools", disallowed)):
        unknown = [n for n in names if n not in refs and not _of_server(n, servers)]
        if unknown:
            raise ValueError(
                f"{field} names {', '.join(map(repr, unknown))}, which the agent's tools "
                f"do not declare (declared: {', '.join(refs) or 'none'})"
            )
    return [
        ref
        for name, ref in refs.items()
        if (allowed is None or name in allowed) and name not in disallowed
    ]


def _of_server(name: str, servers: set[str]) -> bool:
    split = split_tool_name(name)
    return split is not None and split[0] in servers
