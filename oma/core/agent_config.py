"""An agent of a team: an LLM agent (``provider`` + ``model``) or an external one
(``backend``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from oma.core.backends import BackendConfig
from oma.core.errors import InvalidMessageError
from oma.core.evaluation import EvaluationConfig
from oma.core.mcp import McpServerConfig, McpTool
from oma.core.messages import ContentBlock, LLMMessage
from oma.core.providers import Provider
from oma.core.task import BackendKind
from oma.core.tools import ToolRef, resolve_tools

DEFAULT_MODEL = "claude-sonnet-4-6"
"""The model an ``anthropic`` agent uses when it names none."""

_LLM_ONLY_FIELDS = (
    "provider",
    "model",
    "script",
    "max_tokens",
    "history",
    "tools",
    "allowed_tools",
    "disallowed_tools",
    "cwd",
    "mcp_servers",
    "prompt_caching",
)


class AgentConfig(BaseModel):
    """One team member, as written in a run input's ``team.agents``.

    ``provider`` ``anthropic`` calls the Anthropic Messages API with the worker's
    ``ANTHROPIC_API_KEY``; ``scripted`` replays ``script`` (one entry per model
    turn of a run, in order) and exists for the no-key demo and tests.

    Raises ``pydantic.ValidationError`` when ``backend`` is combined with an
    LLM-only field, or when ``provider`` is ``scripted`` without a ``script``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, description="Unique within the team; tasks name it as assignee."
    )
    description: str = Field(
        default="", description="What the agent is for (seen by a coordinator)."
    )
    system_prompt: str = Field(default="", description="Instructions given before every prompt.")
    capabilities: list[str] = Field(
        default_factory=list,
        description="What the agent can do, e.g. ['python', 'review']: matched against "
        "tasks' requires.capabilities and used by capability-match scheduling.",
    )
    provider: Provider | None = Field(
        default=None, description="Model provider; default 'anthropic' for an LLM agent."
    )
    model: str | None = Field(default=None, description=f"Model name; default {DEFAULT_MODEL!r}.")
    script: list[str | list[ContentBlock]] | None = Field(
        default=None,
        description="scripted provider only: the responses, one per model turn; an entry is "
        "a text, or the content blocks of the answer in the Anthropic shape (e.g. a tool_use).",
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="Anthropic max_tokens per turn (default 4096)."
    )
    max_turns: int = Field(default=10, ge=1, description="Upper bound on model turns per run.")
    prompt_caching: bool | None = Field(
        default=None,
        description="Anthropic prompt caching; default on where it pays (an agent with tools: "
        "breakpoints after the tools and system prompt and on the conversation so far, so "
        "each turn of the tool loop reads the last one's prompt from the cache); true: on for "
        "any agent; false: off.",
    )
    tools: list[str] | None = Field(
        default=None,
        description="Tools the agent may call (off unless declared): built-in tools (bash, "
        "file_read, file_write, file_edit, glob, grep), presets (readonly, readwrite, full), "
        "custom tools as 'package.module:function'. See oma.core.tools.",
    )
    allowed_tools: list[str] | None = Field(
        default=None, description="Keep only these of the declared tools (names)."
    )
    disallowed_tools: list[str] | None = Field(
        default=None, description="Drop these of the declared tools (names)."
    )
    cwd: str | None = Field(
        default=None,
        description="Where the agent's tools work: the file tools' sandbox and bash's working "
        "directory, relative to the worker's working directory (the default).",
    )
    max_tool_output_chars: int = Field(
        default=30_000, ge=100, description="A tool result longer than this is cut (said so)."
    )
    max_repeated_tool_calls: int = Field(
        default=5,
        ge=2,
        description="The same tool called with the same input this many times in one run "
        "stops it (TOOL_LOOP_DETECTED).",
    )
    backend: BackendConfig | None = Field(
        default=None, description="Run this agent as an external process or ACP agent."
    )
    before_run: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="A hook called before each run, by import path 'package.module:function' "
        "(loaded by the worker); see oma.core.before_run.",
    )
    evaluation: EvaluationConfig | None = Field(
        default=None, description="An online evaluator run on a sample of this agent's runs."
    )
    history: list[LLMMessage] | None = Field(
        default=None,
        description="Earlier turns restored for Agent.prompt() only (LLM agents); run() and "
        "team tasks never read it.",
    )

    mcp_servers: list[McpServerConfig] | None = Field(
        default=None,
        description="MCP servers whose tools the agent may call as '<name>__<tool>' "
        "(stdio or streamable HTTP); see docs/mcp.md.",
    )
    mcp_tools: list[McpTool] | None = Field(
        default=None,
        description="The tools the MCP servers listed, recorded by the run (mcp_list_tools); "
        "set by the run, not by hand.",
    )

    @model_validator(mode="after")
    def _check_kind(self) -> AgentConfig:
        if self.backend is not None:
            set_llm = [f for f in _LLM_ONLY_FIELDS if getattr(self, f) is not None]
            if set_llm:
                raise ValueError(
                    f"agent {self.name!r} has a backend, so the LLM-only field(s) "
                    f"{', '.join(set_llm)} do not apply; remove them"
                )
        elif self.resolved_provider == "scripted" and not self.script:
            raise ValueError(f"agent {self.name!r} uses provider 'scripted' but has no 'script'")
        names = [server.name for server in self.mcp_servers or []]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"agent {self.name!r}: MCP server name(s) {repeated} repeat")
        if self.tools is not None or self.allowed_tools or self.disallowed_tools or names:
            self.resolved_tools()  # unknown names are an input error, before anything runs
        return self

    def resolved_tools(self) -> list[ToolRef]:
        """The tools this agent may call (``oma.core.tools.resolve_tools``);
        raises ``ValueError`` for an unknown name."""
        return resolve_tools(
            self.tools or [],
            self.allowed_tools,
            self.disallowed_tools or [],
            self.mcp_servers,
            self.mcp_tools,
        )

    def check_accepts_messages(self) -> None:
        """Raise ``InvalidMessageError`` if this agent cannot take a message list.

        External backends (``process``, ``acp``) are text transports, so
        structured input fails before any process is spawned or session opened
        rather than losing images or history (structured-input.md, "External
        process and ACP backends").
        """
        if self.backend is not None:
            raise InvalidMessageError(
                f"agent {self.name!r} runs a {self.backend.kind!r} backend, which takes a "
                "text prompt only; pass a string instead of a message list"
            )

    @property
    def kind(self) -> BackendKind:
        """``llm`` for an LLM agent, else its backend's ``kind``."""
        return "llm" if self.backend is None else self.backend.kind

    @property
    def resolved_provider(self) -> Provider:
        """The provider this LLM agent uses (``anthropic`` when none is named)."""
        return self.provider or "anthropic"

    @property
    def resolved_model(self) -> str:
        """The model this LLM agent uses (``DEFAULT_MODEL`` when none is named)."""
        return self.model or DEFAULT_MODEL
