"""The ``llm_turn`` activity: one model turn, dispatched on the agent's provider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from temporalio import activity

from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.core.errors import OMAError, application_error
from oma.core.llm import LlmTurnInput, LlmTurnOutput


class ModelProvider(Protocol):
    """What a provider adapter offers: one turn, raising ``OMAError`` subclasses;
    ``on_event`` receives ``TextDelta`` / ``ToolCallEvent`` as they stream."""

    async def turn(
        self, inp: LlmTurnInput, on_event: Callable[[Any], None] | None = None
    ) -> LlmTurnOutput: ...


class LlmActivities:
    """Holds the worker's provider adapters (built once per worker) and exposes
    ``llm_turn``. Credentials are read by the adapters from the worker's
    environment; they never appear in activity input or history."""

    def __init__(self, providers: dict[str, ModelProvider] | None = None) -> None:
        self.providers: dict[str, ModelProvider] = providers or {
            "anthropic": AnthropicProvider(),
            "scripted": ScriptedProvider(),
        }

    @activity.defn(name="llm_turn")
    async def llm_turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        """Run one model turn for ``inp.agent``.

        Raises ``ApplicationError`` typed with the ``OMAError`` code:
        ``PROVIDER_ERROR`` (retryable for 429/5xx/network/timeouts),
        ``MISSING_CREDENTIALS``, ``SCRIPT_EXHAUSTED`` (non-retryable).
        """
        provider = self.providers[inp.agent.resolved_provider]
        try:
            return await provider.turn(inp)
        except OMAError as err:
            raise application_error(err) from err
