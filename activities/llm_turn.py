"""The ``llm_turn`` activity: one model turn, dispatched on the agent's provider."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio import activity

from oma.activities.providers import ModelProvider, default_providers
from oma.core.errors import OMAError, application_error
from oma.core.llm import LlmTurnInput, LlmTurnOutput


class LlmActivities:
    """Holds the worker's provider adapters (built once per worker, by default
    one per provider of the registry, ``oma.activities.providers``) and exposes
    ``llm_turn``. Credentials are read by the adapters from the worker's
    environment; they never appear in activity input or history."""

    def __init__(self, providers: Mapping[str, ModelProvider] | None = None) -> None:
        self.providers: Mapping[str, ModelProvider] = providers or default_providers()

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
