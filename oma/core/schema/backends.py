"""External agent backends: a local ``process`` or an ACP agent (``acp``).

An agent with a ``backend`` runs its own loop; the LLM-only fields of
``AgentConfig`` do not apply to it (setting them is a validation error, so a
mistaken config is caught before anything runs rather than silently ignored).
Source: ``docs/external-agents.md``, "Configuration".
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _BackendBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="Executable to spawn, e.g. 'python3', 'npx'.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to command.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment, merged over the worker's own."
    )
    cwd: str | None = Field(
        default=None,
        description="Working directory (relative paths resolve against the worker's); "
        "default: the worker's working directory.",
    )


class ProcessBackendConfig(_BackendBase):
    """A fresh local subprocess per agent run; stdout becomes the output."""

    kind: Literal["process"] = "process"
    input: Literal["stdin", "argument", "none"] = Field(
        default="stdin",
        description="How the prompt reaches the command: on stdin, as the last argument, "
        "or not at all.",
    )


class PermissionRule(BaseModel):
    """One rule of a declarative permission policy: matches a permission request
    by ``kind`` (ACP ``ToolKind``: read, edit, delete, move, search, execute,
    think, fetch, other) and/or a regular expression searched in its ``title``."""

    model_config = ConfigDict(extra="forbid")

    kind: str | None = None
    title_pattern: str | None = Field(default=None, description="Python regex, re.search.")
    decision: Literal["approve", "reject"]


class PermissionPolicy(BaseModel):
    """How an ``acp`` agent's ``session/request_permission`` is answered, when
    neither ``auto-approve`` nor ``reject`` fits.

    A JSON run input cannot carry a callback, so a policy is declarative: the
    first rule that matches decides, else ``default``. From Python, ``callable``
    may name a function by import path (``package.module:function``) that the
    worker loads; it receives ``{title, kind, option_kinds}`` and returns a bool
    (``True`` approves), and then ``rules`` are not consulted.
    """

    model_config = ConfigDict(extra="forbid")

    rules: list[PermissionRule] = Field(default_factory=list)
    default: Literal["approve", "reject"] = "reject"
    callable: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="package.module:function",
    )


class AcpBackendConfig(_BackendBase):
    """A coding agent spoken to over the Agent Client Protocol; OMA is the client."""

    kind: Literal["acp"] = "acp"
    permission: Literal["auto-approve", "reject"] | PermissionPolicy = Field(
        default="auto-approve",
        description="How to answer session/request_permission: 'auto-approve' picks "
        "allow_once when offered, else allow_always; 'reject' refuses; or a policy.",
    )


BackendConfig = Annotated[ProcessBackendConfig | AcpBackendConfig, Field(discriminator="kind")]
