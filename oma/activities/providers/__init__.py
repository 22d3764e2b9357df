"""The provider registry: every provider name an agent may give, mapped to its adapter.

The ``llm_turn`` activity (``LlmActivities``) and the in-process ``Agent``
both build their adapters from ``ADAPTERS``; what a workflow may know of a
provider (whether its turn does I/O) is ``oma.core.schema.providers.PROVIDERS``, keyed
by the same names. A new provider is its adapter module, a line in
``ADAPTERS``, and its name and traits in ``oma.core.schema.providers``.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

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


def _adapter(module: str, name: str) -> Callable[[], ModelProvider]:
    """The adapter class ``name`` of ``oma.activities.providers.<module>``,
    imported when an adapter is built: each module imports its provider's SDK
    (``anthropic``, ``openai``: most of a second of CPU each), which a caller
    that never uses that provider should not pay for."""

    def build() -> ModelProvider:
        adapter: Callable[[], ModelProvider] = getattr(
            importlib.import_module(f"oma.activities.providers.{module}"), name
        )
        return adapter()

    build.__qualname__ = build.__name__ = name
    return build


ADAPTERS: Mapping[Provider, Callable[[], ModelProvider]] = {
    "anthropic": _adapter("anthropic", "AnthropicProvider"),
    "openai": _adapter("openai", "OpenAIProvider"),
    "scripted": _adapter("scripted", "ScriptedProvider"),
}
"""Each provider's adapter, built with its defaults (the Anthropic adapter reads
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` from the environment; the
OpenAI one ``OPENAI_BASE_URL``, and at each turn the agent's ``api_key_env``,
default ``OPENAI_API_KEY``). Calling one imports its module, and so its SDK."""


class DefaultProviders(Mapping[str, ModelProvider]):
    """One adapter per provider of ``ADAPTERS``, each built with its defaults
    on its first lookup (so a run on the ``scripted`` provider never imports
    the ``anthropic`` SDK). ``await built(name)`` builds it in a thread, so
    the first turn on a provider does not stop the caller's event loop for
    the second its SDK takes to import (``provider_for``). Looking up a name
    ``ADAPTERS`` lacks raises ``KeyError``."""

    def __init__(self) -> None:
        self._built: dict[str, ModelProvider] = {}
        self._building = threading.Lock()

    def __getitem__(self, name: str) -> ModelProvider:
        adapter = self._built.get(name)
        if adapter is None:
            with self._building:  # two first turns at once build one adapter
                adapter = self._built.get(name)
                if adapter is None:
                    adapter = self._built[name] = ADAPTERS[name]()  # type: ignore[index]
        return adapter

    async def built(self, name: str) -> ModelProvider:
        """The adapter of ``name``, built (its SDK imported) in a thread the
        first time. Raises ``KeyError`` for a name ``ADAPTERS`` lacks."""
        adapter = self._built.get(name)
        if adapter is None:
            if name not in ADAPTERS:
                raise KeyError(name)
            adapter = await asyncio.to_thread(self.__getitem__, name)
        return adapter

    def __iter__(self) -> Iterator[str]:
        return iter(ADAPTERS)

    def __len__(self) -> int:
        return len(ADAPTERS)


async def provider_for(providers: Mapping[str, ModelProvider], name: str) -> ModelProvider:
    """The adapter of ``name`` in ``providers``: built off the event loop when
    ``providers`` are the defaults (``DefaultProviders.built``). Raises
    ``KeyError`` for a name ``providers`` lacks."""
    if isinstance(providers, DefaultProviders):
        return await providers.built(name)
    return providers[name]


def default_providers() -> DefaultProviders:
    """One adapter per provider of ``ADAPTERS``, each built with its defaults
    when it is first looked up (``DefaultProviders``)."""
    return DefaultProviders()
