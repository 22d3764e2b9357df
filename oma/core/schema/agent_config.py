"""An agent of a team: an LLM agent (``provider`` + ``model``) or an external one
(``backend``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from oma.core.schema.backends import BackendConfig
from oma.core.schema.errors import InvalidMessageError
from oma.core.schema.evaluation import EvaluationConfig
from oma.core.schema.limits import MAX_NAME_CHARS
from oma.core.schema.mcp import McpServerConfig, McpTool
from oma.core.schema.messages import ContentBlock, LLMMessage
from oma.core.schema.providers import PROVIDERS, Provider
from oma.core.schema.task import BackendKind
from oma.core.schema.tools import ToolRef, resolve_tools

DEFAULT_MODEL = "claude-sonnet-4-6"
"""The model an ``anthropic`` agent uses when it names none (an ``openai``
agent must name its model)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What API keys look like (OpenAI/Anthropic/DeepSeek "sk-...", Groq "gsk_...",
# OpenRouter "sk-or-..."), or any long token mixing lower case and digits:
# environment variable names are not written that way.
_KEY_LIKE = re.compile(r"^(?:sk-|gsk_|xai-)|^(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9_-]{32,}$")

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
    "base_url",
    "api_key_env",
)


class AgentConfig(BaseModel):
    """One team member, as written in a run input's ``team.agents``.

    ``provider`` ``anthropic`` calls the Anthropic Messages API with the worker's
    ``ANTHROPIC_API_KEY``; ``openai`` calls the OpenAI Chat Completions API (at
    OpenAI, or at ``base_url``: Ollama, vLLM, LM Studio, ...) with the key in
    the worker's environment variable ``api_key_env`` (docs/providers.md);
    ``scripted`` replays ``script`` (one entry per model turn of a run, in
    order) and exists for the no-key demo and tests.

    Raises ``pydantic.ValidationError`` when ``backend`` is combined with an
    LLM-only field, when ``provider`` is ``scripted`` without a ``script`` or
    ``openai`` without a ``model``, when ``base_url`` / ``api_key_env`` are given
    for a provider that takes no endpoint (``anthropic``, ``scripted``), when
    ``api_key_env`` is not an environment variable name (a key value is
    refused, and not repeated in the error), or ``base_url`` not http(s).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="Unique within the team; tasks name it as assignee. It becomes the "
        "search attribute OmaAgent of the agent's runs.",
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
        default=None,
        ge=1,
        description="Output tokens per turn: Anthropic max_tokens (default 4096); for openai "
        "max_completion_tokens at OpenAI, max_tokens elsewhere (default: the server's).",
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
        "custom tools as 'package.module:function'. See oma.core.schema.tools.",
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
        description="The model asking for the same tool with the same input for the "
        "n-th time in one run stops it (TOOL_LOOP_DETECTED) before that call runs: "
        "n-1 identical calls run.",
    )
    backend: BackendConfig | None = Field(
        default=None, description="Run this agent as an external process or ACP agent."
    )
    before_run: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="A hook called before each run, by import path 'package.module:function' "
        "(loaded by the worker); see oma.core.schema.before_run.",
    )
    evaluation: EvaluationConfig | None = Field(
        default=None, description="An online evaluator run on a sample of this agent's runs."
    )
    history: list[LLMMessage] | None = Field(
        default=None,
        description="Earlier turns restored for Agent.prompt() only (LLM agents); run() and "
        "team tasks never read it.",
    )

    base_url: str | None = Field(
        default=None,
        description="openai provider only: the Chat Completions API's base URL, e.g. "
        "'http://localhost:11434/v1' (Ollama); default the worker's OPENAI_BASE_URL, else "
        "https://api.openai.com/v1.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="openai provider only: the NAME of the worker's environment variable "
        "that holds the API key (default OPENAI_API_KEY), never the key itself; the worker "
        "sends it only to an origin its OMA_CREDENTIALS allows for that variable.",
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
        else:
            self._check_endpoint()
        names = [server.name for server in self.mcp_servers or []]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"agent {self.name!r}: MCP server name(s) {repeated} repeat")
        if self.tools is not None or self.allowed_tools or self.disallowed_tools or names:
            self.resolved_tools()  # unknown names are an input error, before anything runs
        return self

    def _check_endpoint(self) -> None:
        provider = self.resolved_provider
        traits = PROVIDERS[provider]
        if self.model is None and traits.default_model is None:
            raise ValueError(
                f"agent {self.name!r} uses provider {provider!r}, which has no default model: "
                "name one in 'model' (e.g. 'gpt-4.1-mini' at OpenAI, 'llama3.2' on Ollama)"
            )
        given = [f for f in ("base_url", "api_key_env") if getattr(self, f) is not None]
        if given and not traits.takes_endpoint:
            raise ValueError(
                f"agent {self.name!r}: {' and '.join(given)} "
                f"{'apply' if len(given) > 1 else 'applies'} to provider 'openai' only, "
                f"not {provider!r}; remove them"
            )
        check_endpoint(self.base_url, self.api_key_env, f"agent {self.name!r}")

    def resolved_tools(self) -> list[ToolRef]:
        """The tools this agent may call (``oma.core.schema.tools.resolve_tools``);
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
        """The model this LLM agent uses (its provider's default, ``DEFAULT_MODEL``
        for ``anthropic``, when none is named)."""
        return self.model or PROVIDERS[self.resolved_provider].default_model or DEFAULT_MODEL


def check_endpoint(base_url: str | None, api_key_env: str | None, who: str) -> None:
    """Raise ``ValueError`` unless ``base_url`` is an http(s) URL and
    ``api_key_env`` an environment variable name (when given). A value of
    ``api_key_env`` that looks like a key is refused without being repeated:
    the message ends up in errors and logs."""
    if base_url is not None and not re.match(r"https?://[^\s/]+", base_url):
        raise ValueError(
            f"{who}: base_url {base_url!r} is not an http:// or https:// URL "
            "(e.g. 'http://localhost:11434/v1')"
        )
    if api_key_env is None:
        return
    if _KEY_LIKE.search(api_key_env):
        raise ValueError(
            f"{who}: api_key_env looks like an API key, not the name of an environment "
            "variable; put the key in the worker's environment (e.g. OPENAI_API_KEY=...) and "
            'give its name, e.g. "api_key_env": "OPENAI_API_KEY" (never the key itself: '
            "run input is stored in the workflow history)"
        )
    if not _ENV_NAME.fullmatch(api_key_env):
        raise ValueError(
            f"{who}: api_key_env {api_key_env!r} is not an environment variable name "
            "(letters, digits and _, not starting with a digit), e.g. 'OPENAI_API_KEY'"
        )
