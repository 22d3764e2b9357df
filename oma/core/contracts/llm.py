"""Input and output of the ``llm_turn`` activity: one model turn."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import ProviderError
from oma.core.schema.messages import ContentBlock, LLMMessage
from oma.core.schema.pricing import ModelPrice, priced
from oma.core.schema.tools import ToolTraits
from oma.core.schema.usage import MAX_TURN_TOKENS, TokenUsage


class ConversationRef(BaseModel):
    """Where the conversation of a turn lives: the first ``length`` messages
    of the ``AgentRun`` ``workflow_id``'s execution ``temporal_run_id`` (its
    ``conversation`` query). The ``llm_turn`` activity reads them there, so
    that the history holds each message once instead of once per later turn.
    ``temporal_run_id`` keeps its JSON key, ``run_id``: the ``llm_turn``
    inputs in histories hold it, and an activity in flight during an upgrade
    reads it."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    workflow_id: str
    temporal_run_id: str = Field(
        alias="run_id", description="The Temporal run id of the AgentRun's execution."
    )
    length: int = Field(ge=1)


class AgentRef(BaseModel):
    """Where the agent of a turn lives: the config the model turns of the
    ``AgentRun`` ``workflow_id``'s execution ``temporal_run_id`` are given
    (its MCP servers' listed tools included), whose ``agent_digest`` is
    ``sha256`` (its ``agent`` query). The ``llm_turn`` activity reads it
    there, or from its worker's cache by ``sha256``, so that the history
    holds the listing, the tool schemas and the system prompt once per run
    instead of once per turn. ``temporal_run_id`` keeps its JSON key,
    ``run_id``, as a ``ConversationRef``'s."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    workflow_id: str
    temporal_run_id: str = Field(
        alias="run_id", description="The Temporal run id of the AgentRun's execution."
    )
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def agent_digest(agent: AgentConfig) -> str:
    """The SHA-256 of ``agent``'s JSON, in hex: the key of an ``AgentRef``."""
    return hashlib.sha256(agent.model_dump_json().encode()).hexdigest()


def agent_named(agent: AgentConfig) -> AgentConfig:
    """``agent`` as an ``llm_turn`` input that refers to it names it (an
    ``AgentRef`` holds the rest): its name, provider and model, which the Web
    UI, the activity's span and a log line show."""
    return AgentConfig(name=agent.name, provider=agent.provider, model=agent.model)


class ConversationSlice(BaseModel):
    """Input of an ``AgentRun``'s ``conversation`` query: the messages from
    ``start`` up to ``end`` (exclusive), as many as fit in ``max_bytes`` of
    JSON (at least one)."""

    start: int = Field(default=0, ge=0)
    end: int | None = None
    max_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        le=1024 * 1024,
        description="At most 1 MiB: a query's answer is capped like any payload (2 MB).",
    )


class RecordedTurns(BaseModel):
    """Where a turn's answer comes from when a run replays recorded model turns
    (``options.models`` ``recorded``): the model turns of the ``TeamRun``
    ``run_id``'s execution ``temporal_run_id`` (and its children), by
    request (``RequestDigest``)."""

    run_id: str = Field(min_length=1)
    temporal_run_id: str | None = Field(
        default=None,
        min_length=1,
        description="The Temporal run id of the execution of run_id whose turns are replayed "
        "(options.models.temporal_run_id); none (a run from before): the latest.",
    )
    on_miss: Literal["strict", "fallback"] = Field(
        default="strict",
        description="strict: a request the recording lacks fails the task (RECORDING_MISS); "
        "fallback: it goes to the live provider.",
    )


DIGEST_CHARS = 16
"""Hex characters of each digest of a request (64 bits: enough to tell a
run's requests apart, short enough to record with every turn)."""

DIGEST_VERSION = 2
"""The form of the ``RequestDigest`` this code makes: its ``tools`` digest
the tool definitions the provider is sent. Version 1 (recorded before it had
a version) digested the agent's tool configuration, in which a custom tool is
its import path: a tool whose parameters or docstring changed kept its
digest."""

TOOL_DIGESTS_MAX = 32
"""The most tools a request digests one by one (``RequestDigest.tool_digests``):
what a miss names; an agent offering more (an MCP server's listing) records
only the digest of them all."""

TOOL_DIGEST_CHARS = 8
"""Hex characters of one tool's digest: it only tells which tool changed."""


class RequestDigest(BaseModel):
    """What a model turn asked, as digests: the model, the system prompt, the
    tools as the provider is sent them, and the messages (how many, and a
    chain over them: ``chain`` of ``messages`` messages is the digest of the
    one of ``messages - 1`` and of the last message). Recorded with the
    turn's answer (``LlmTurnOutput.request``); two turns with equal digests
    of one ``version`` made the same request (``oma.activities.recordings``)."""

    model: str = Field(description="<provider>/<model>, readable.")
    system: str
    tools: str = Field(
        description="Version 2: the digest of the tool definitions sent (each tool's name, "
        "description and input schema, in order); 1: of the agent's tool configuration."
    )
    messages: int = Field(ge=0)
    chain: str
    version: int = Field(
        default=1,
        ge=1,
        description="The form of the digest (DIGEST_VERSION); 1: a turn recorded before "
        "digests had a version, whose tools digest holds a custom tool's import path only.",
    )
    tool_digests: dict[str, str] = Field(
        default_factory=dict,
        description="Version 2, for an agent offering at most TOOL_DIGESTS_MAX tools: each "
        "tool's digest, by name (what a miss names).",
    )

    @property
    def key(self) -> tuple[int, str, str, str, int, str]:
        return (self.version, self.model, self.system, self.tools, self.messages, self.chain)


def _digest(text: str, chars: int = DIGEST_CHARS) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def chain_after(chain: str, message: LLMMessage) -> str:
    """The chain of a conversation whose chain is ``chain``, after ``message``."""
    return chain_after_json(chain, message.model_dump_json())


def chain_after_json(chain: str, message_json: str) -> str:
    """``chain_after`` a message given as its JSON (``model_dump_json``)."""
    return _digest(chain + _digest(message_json))


def message_chain(messages: list[LLMMessage]) -> list[str]:
    """The chain of ``messages``: element ``i`` is the digest of the first
    ``i`` messages (element 0, of none: ``""``)."""
    chain = [""]
    for message in messages:
        chain.append(chain_after(chain[-1], message))
    return chain


class ToolsDigest(NamedTuple):
    """The digests of the tools a turn offers (``RequestDigest.tools`` and
    ``tool_digests``)."""

    tools: str
    each: dict[str, str]


def tools_digest(tools: list[dict[str, Any]]) -> ToolsDigest:
    """The digests of ``tools``, the tool definitions the provider is sent
    (``name``, ``description``, ``input_schema``:
    ``oma.activities.tool_call.offered_tools``), in order. (A listing of a
    thousand MCP tools, ~1 MB of JSON, takes tens of milliseconds: the
    ``llm_turn`` activity keeps it per agent.)"""
    each = (
        {str(t.get("name")): _digest(_canonical(t), TOOL_DIGEST_CHARS) for t in tools}
        if len(tools) <= TOOL_DIGESTS_MAX
        else {}
    )
    return ToolsDigest(_digest(_canonical(tools)), each)


def request_digest(
    agent: AgentConfig, messages: list[LLMMessage], tools: ToolsDigest, chain: str | None = None
) -> RequestDigest:
    """The ``RequestDigest`` of a turn of ``agent`` on ``messages`` (the
    whole conversation, as the provider gets it) offering the tools
    ``tools`` digests (``tools_digest``). ``chain``: the chain of
    ``messages`` (``message_chain``), when the caller keeps it as the
    conversation grows; else it is computed here, over every message."""
    return RequestDigest(
        model=f"{agent.resolved_provider}/{agent.resolved_model}",
        system=_digest(agent.system_prompt),
        tools=tools.tools,
        messages=len(messages),
        chain=message_chain(messages)[-1] if chain is None else chain,
        version=DIGEST_VERSION,
        tool_digests=tools.each,
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


NO_TOOLS = _digest(_canonical([]))
"""The ``tools`` digest (version 2) of a turn that offers no tool."""

LEGACY_TOOL_FIELDS = frozenset({"tools", "allowed_tools", "disallowed_tools", "mcp_tools"})
"""The fields of an agent's config a version 1 digest digested as its tools."""


def legacy_digest(request: RequestDigest, agent: AgentConfig) -> RequestDigest | None:
    """``request`` (of a turn of ``agent``) in the form of version 1, when
    that form says all a turn offered: no tool at all (its tools digest then
    says the agent's configuration offered none, which no tool's code can
    change). None when the turn offers tools: a version 1 digest cannot tell
    whether they changed, so a recording of that form has no answer to it."""
    if request.tools != NO_TOOLS:
        return None
    tools = agent.model_dump_json(include=set(LEGACY_TOOL_FIELDS))
    return request.model_copy(update={"tools": _digest(tools), "version": 1})


class LlmTurnInput(BaseModel):
    """One model turn for ``agent`` given the conversation so far.

    ``turn`` is the 0-based turn index within the agent run (the ``scripted``
    provider answers with ``agent.script[turn]``). The conversation is
    ``messages``, or, from an ``AgentRun``, ``conversation``: a reference the
    ``llm_turn`` activity reads the messages through. Likewise the agent:
    from an ``AgentRun``, ``agent`` only names it (``agent_named``) and
    ``agent_ref`` says where the whole config is. No credential is ever part
    of this input: providers read them from the worker's environment.
    """

    agent: AgentConfig
    messages: list[LLMMessage] = Field(default_factory=list)
    turn: int = Field(ge=0)
    conversation: ConversationRef | None = None
    agent_ref: AgentRef | None = Field(
        default=None, description="The whole agent config, by reference (then 'agent' names it)."
    )
    pricing: dict[str, ModelPrice] | None = Field(
        default=None, description="The run's price overrides (options.pricing), by model name."
    )
    recorded: RecordedTurns | None = Field(
        default=None,
        description="Answer from another run's recorded turns (options.models 'recorded').",
    )


class LlmTurnOutput(BaseModel):
    """The assistant's answer to one turn, as the Anthropic Messages API names it.
    ``recorded_from_temporal_run_id`` keeps its JSON key,
    ``recorded_from_run_id``: histories hold it, and docs/fork.md names it."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    content: list[ContentBlock]
    stop_reason: str = Field(description="end_turn | tool_use | max_tokens | stop_sequence | ...")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str = ""
    tool_traits: dict[str, ToolTraits] = Field(
        default_factory=dict,
        description="What the agent's custom tools declare (oma.consequential, oma.retried), "
        "by name. Read by the worker, so that the workflow knows it from the history.",
    )
    request: RequestDigest | None = Field(
        default=None,
        description="What the turn asked (a provider that does I/O): how a later run finds "
        "this answer when it replays recorded turns.",
    )
    recorded_from: str | None = Field(
        default=None,
        description="A replayed turn: the AgentRun whose recorded answer this is; the "
        "provider was not called.",
    )
    recorded_from_temporal_run_id: str | None = Field(
        default=None,
        alias="recorded_from_run_id",
        description="A replayed turn: the Temporal run id of the execution of recorded_from "
        "whose answer this is (none: read from exported histories that do not say).",
    )


def price_turn(inp: LlmTurnInput, out: LlmTurnOutput) -> LlmTurnOutput:
    """``out`` with its usage priced (``oma.core.schema.pricing.priced``): by the
    model the agent names, else (a model without a price) the one that
    answered; a ``scripted`` turn by the answer's ``scripted``, which costs
    nothing unless the run prices it. The agent's model comes first because the answer's
    name is whatever the endpoint says (a proxy may say ``scripted``). The
    ``llm_turn`` activity and the in-process model port call it, so a turn's
    cost is recorded with the turn. Raises ``ProviderError`` (not retryable)
    when the answer reports more than ``MAX_TURN_TOKENS`` of a kind."""
    for kind, count in out.usage.model_dump(include=_TOKEN_COUNTS).items():
        if count > MAX_TURN_TOKENS:
            raise ProviderError(
                f"the model's answer reports {kind} of {count}, over the {MAX_TURN_TOKENS} "
                "a turn can have: its cost cannot be counted",
                error_type="usage_out_of_range",
            )
    models = [out.model, inp.agent.resolved_model]
    if inp.agent.resolved_provider != "scripted":
        models.reverse()
    usage = priced(out.usage, models, inp.pricing)
    return out.model_copy(update={"usage": usage})


_TOKEN_COUNTS = {
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
}
