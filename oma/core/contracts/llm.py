"""Input and output of the ``llm_turn`` activity: one model turn."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import ProviderError
from oma.core.schema.messages import ContentBlock, LLMMessage
from oma.core.schema.pricing import ModelPrice, priced
from oma.core.schema.tools import ToolTraits
from oma.core.schema.usage import MAX_TURN_TOKENS, TokenUsage


class ConversationRef(BaseModel):
    """Where the conversation of a turn lives: the first ``length`` messages
    of the ``AgentRun`` ``workflow_id``/``run_id`` (its ``conversation``
    query). The ``llm_turn`` activity reads them there, so that the history
    holds each message once instead of once per later turn."""

    workflow_id: str
    run_id: str
    length: int = Field(ge=1)


class AgentRef(BaseModel):
    """Where the agent of a turn lives: the config the model turns of the
    ``AgentRun`` ``workflow_id``/``run_id`` are given (its MCP servers' listed
    tools included), whose ``agent_digest`` is ``sha256`` (its ``agent``
    query). The ``llm_turn`` activity reads it there, or from its worker's
    cache by ``sha256``, so that the history holds the listing, the tool
    schemas and the system prompt once per run instead of once per turn."""

    workflow_id: str
    run_id: str
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
    ``run_id`` (and its children), by request (``RequestDigest``)."""

    run_id: str = Field(min_length=1)
    on_miss: Literal["strict", "fallback"] = Field(
        default="strict",
        description="strict: a request the recording lacks fails the task (RECORDING_MISS); "
        "fallback: it goes to the live provider.",
    )


DIGEST_CHARS = 16
"""Hex characters of each digest of a request (64 bits: enough to tell a
run's requests apart, short enough to record with every turn)."""


class RequestDigest(BaseModel):
    """What a model turn asked, as digests: the model, the system prompt, the
    tools, and the messages (how many, and a chain over them: ``chain`` of
    ``messages`` messages is the digest of the one of ``messages - 1`` and
    of the last message). Recorded with the turn's answer
    (``LlmTurnOutput.request``); two turns with equal digests made the same
    request (``oma.activities.recordings``)."""

    model: str = Field(description="<provider>/<model>, readable.")
    system: str
    tools: str
    messages: int = Field(ge=0)
    chain: str

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.model, self.system, self.tools, self.messages, self.chain)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def message_chain(messages: list[LLMMessage]) -> list[str]:
    """The chain of ``messages``: element ``i`` is the digest of the first
    ``i`` messages (element 0, of none: ``""``)."""
    chain = [""]
    for message in messages:
        chain.append(_digest(chain[-1] + _digest(message.model_dump_json())))
    return chain


TOOL_FIELDS = frozenset({"tools", "allowed_tools", "disallowed_tools", "mcp_tools"})
"""The fields of an agent's config that say which tools a model turn offers."""


def request_digest(agent: AgentConfig, messages: list[LLMMessage]) -> RequestDigest:
    """The ``RequestDigest`` of a turn of ``agent`` on ``messages`` (the
    whole conversation, as the provider gets it)."""
    tools = agent.model_dump_json(include=set(TOOL_FIELDS))
    return RequestDigest(
        model=f"{agent.resolved_provider}/{agent.resolved_model}",
        system=_digest(agent.system_prompt),
        tools=_digest(tools),
        messages=len(messages),
        chain=message_chain(messages)[-1],
    )


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
    """The assistant's answer to one turn, as the Anthropic Messages API names it."""

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
