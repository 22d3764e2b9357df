"""The model providers an LLM agent may name, and what a workflow must know of each.

The adapters themselves (the code that talks to a provider) are
``oma.activities.providers.ADAPTERS``, keyed by these same names; this module
holds only what deterministic code may read: the names, and whether a
provider's turn does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Provider = Literal["anthropic", "scripted"]
"""An LLM agent's ``provider``."""


@dataclass(frozen=True)
class ProviderTraits:
    """What the runtime needs to know of a provider, beyond its adapter."""

    needs_io: bool
    """False for a provider whose turn is instant and deterministic (no network,
    no clock): in a workflow its ``llm_turn`` runs as a local activity, a marker
    in the history with no task queue round trip."""


PROVIDERS: Mapping[Provider, ProviderTraits] = {
    "anthropic": ProviderTraits(needs_io=True),
    "scripted": ProviderTraits(needs_io=False),
}
"""Every provider an agent may name (``AgentConfig.provider``)."""
