"""An LLM agent's MCP servers: their config and the tools they list
(docs/mcp.md; the activities' inputs and outputs are in ``oma.core.contracts.mcp``).

An agent's ``mcp_servers`` each give a ``name`` and either a stdio server
(``command``, ``args``, ``env``, ``cwd``: a subprocess of the worker) or a
streamable HTTP one (``url``, ``headers``). A server's tools reach the model
as ``<name>__<tool>`` (the Anthropic Messages API allows letters, digits,
``_`` and ``-``, at most 64 characters). The listing a run uses is fetched
once per agent run by the ``mcp_list_tools`` activity and recorded in
history, so a replay never asks a server (MCP specification, "Tools":
``tools/list``, ``tools/call``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, model_validator

SEPARATOR = "__"
"""Between a server's name and its tool's name in the name the model sees."""

SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
"""A server's name: letters, digits, ``-`` and single ``_`` (no ``__``, which
separates it from the tool's name)."""

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""The name of an environment variable of the worker."""

TOOL_NAME_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a tool's name may be (the Anthropic Messages API's ``tools[].name``)."""

MAX_SERVER_NAME_CHARS = 40
"""Leaves at least 22 characters of the 64 a tool name may have for the tool."""


class McpServerConfig(BaseModel):
    """One MCP server of an agent, as written in its ``mcp_servers``.

    stdio: ``command`` (with ``args``, ``env`` added to the worker's minimal
    environment, ``cwd``), one process per (agent run, server) on the worker
    that started it. Streamable HTTP: ``url``; ``headers`` maps a header to
    the *name* of an environment variable of the worker that holds its value
    (``{"Authorization": "GITHUB_MCP_AUTH"}``), so no secret is ever in the
    run input or the history; the worker sends it only to a ``url`` its
    operator allowed for that variable (``OMA_CREDENTIALS``, docs/security.md).

    Raises ``pydantic.ValidationError`` for a bad ``name``, for both or
    neither of ``command`` and ``url``, for a field of the other transport,
    and for a header value that is not an environment variable's name.
    """

    name: str = Field(description="Prefix of the server's tools: '<name>__<tool>'.")
    command: str | None = Field(default=None, description="stdio: the server's executable.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio: variables added to its environment (recorded in history: no secrets).",
    )
    cwd: str | None = Field(default=None, description="stdio: its working directory.")
    url: str | None = Field(default=None, description="Streamable HTTP: the server's endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Streamable HTTP: header -> NAME of the worker's environment variable "
        "holding its value (sent only if its OMA_CREDENTIALS allows that variable for url).",
    )

    @model_validator(mode="after")
    def _check(self) -> McpServerConfig:
        if len(self.name) > MAX_SERVER_NAME_CHARS or not SERVER_NAME.match(self.name):
            raise ValueError(
                f"MCP server name {self.name!r}: use letters, digits, '-' and single '_' "
                f"(no '__'), at most {MAX_SERVER_NAME_CHARS} characters; its tools are "
                f"'{self.name}__<tool>'"
            )
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"MCP server {self.name!r}: give either 'command' (stdio) or 'url' (HTTP)"
            )
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError(f"MCP server {self.name!r}: args, env and cwd are for stdio servers")
        if self.command is not None and self.headers:
            raise ValueError(f"MCP server {self.name!r}: headers are for HTTP servers")
        bad = [v for v in self.headers.values() if not ENV_NAME.match(v)]
        if bad:
            raise ValueError(
                f"MCP server {self.name!r}: a header's value is the NAME of an environment "
                "variable of the worker that holds it (e.g. 'MCP_TOKEN'), never the value itself"
            )
        return self

    @property
    def stdio(self) -> bool:
        return self.command is not None


class McpTool(BaseModel):
    """One tool a server listed, under the name the model calls it by."""

    name: str = Field(description="'<server>__<tool>'.")
    server: str
    tool: str = Field(description="The tool's name on its server.")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class McpCall(BaseModel):
    """What a ``tool_call`` of an MCP tool needs besides the call itself."""

    run_key: str
    server: McpServerConfig
    tool: str = Field(description="The tool's name on its server.")


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``"fs__read_file"`` -> ``("fs", "read_file")``; ``None`` without ``__``."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None
