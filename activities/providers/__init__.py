"""The provider registry: every provider name an agent may give, mapped to its adapter.

The ``llm_turn`` activity (``LlmActivities``) and the in-process ``Agent``
both build their adapters from ``ADAPTERS``; what a workflow may know of a
provider (whether its turn does I/O) is ``oma.core.schema.providers.PROVIDERS``, keyed
by the same names. A new provider is its adapter module, a line in
``ADAPTERS``, and its name and traits in ``oma.core.schema.providers``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.openai import OpenAIProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.schema.providers import Provider


class ModelProvider(Protocol):
    """A provider adapter: one model turn, raising ``OMAError`` subclasses;
    ``on_event`` receives ``TextDelta`` / ``ToolCallEvent`` as they stream.

    Every adapter is also a ``oma.core.contracts.ports.ModelPort`` (called without
    ``on_event``)."""

    async def turn(
        self, inp: LlmTurnInput, on_event: Callable[[Any], None] | None = None
    ) -> LlmTurnOutput: ...


ADAPTERS: Mapping[Provider, Callable[[], ModelProvider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
    "scripted": ScriptedProvider,
}
"""Each provider's adapter, built with its defaults (the Anthropic adapter reads
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` from the environment; the
OpenAI one ``OPENAI_BASE_URL``, and at each turn the agent's ``api_key_env``,
default ``OPENAI_API_KEY``)."""


def default_providers() -> dict[str, ModelProvider]:
    """One adapter per provider of ``ADAPTERS``, built with its defaults."""
    return {name: adapter() for name, adapter in ADAPTERS.items()}
