"""Events an agent run emits while it works: ``Agent.stream()`` yields them,
progress callbacks receive them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from oma.core.schema.messages import LLMMessage
from oma.core.schema.results import AgentRunResult


class AgentStart(BaseModel):
    """The run starts. ``payload`` is ``{"prompt": str}`` for string input and
    ``{"messages": [...]}`` for structured input (structured-input.md,
    "Progress and online evaluation")."""

    type: Literal["agent_start"] = "agent_start"
    agent: str
    payload: dict[str, Any]


class TextDelta(BaseModel):
    """A piece of the answer's text, as the provider streamed it."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallEvent(BaseModel):
    """The model asked for a tool (its input complete, joined from every
    ``input_json_delta`` piece)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class Done(BaseModel):
    """The run ended; ``result`` is what ``run()`` would have returned."""

    type: Literal["done"] = "done"
    result: AgentRunResult


StreamEvent = Annotated[AgentStart | TextDelta | ToolCallEvent | Done, Field(discriminator="type")]


def agent_start(agent: str, prompt: str | None, messages: list[LLMMessage] | None) -> AgentStart:
    """The ``agent_start`` event for string input (``prompt``) or structured input."""
    if messages is not None:
        return AgentStart(
            agent=agent, payload={"messages": [m.model_dump(mode="json") for m in messages]}
        )
    return AgentStart(agent=agent, payload={"prompt": prompt or ""})
