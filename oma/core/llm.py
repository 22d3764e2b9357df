"""Input and output of the ``llm_turn`` activity: one model turn."""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.agent_config import AgentConfig
from oma.core.messages import ContentBlock, LLMMessage
from oma.core.usage import TokenUsage


class LlmTurnInput(BaseModel):
    """One model turn for ``agent`` given the conversation so far.

    ``turn`` is the 0-based turn index within the agent run (the ``scripted``
    provider answers with ``agent.script[turn]``). No credential is ever part
    of this input: providers read them from the worker's environment.
    """

    agent: AgentConfig
    messages: list[LLMMessage]
    turn: int = Field(ge=0)


class LlmTurnOutput(BaseModel):
    """The assistant's answer to one turn, as the Anthropic Messages API names it."""

    content: list[ContentBlock]
    stop_reason: str = Field(description="end_turn | tool_use | max_tokens | stop_sequence | ...")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str = ""
