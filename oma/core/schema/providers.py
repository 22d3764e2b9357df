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

Provider = Literal["anthropic", "openai", "scripted"]
"""An LLM agent's ``provider``: the API it speaks (``openai`` is the Chat
Completions API, at OpenAI or at any server compatible with it)."""


@dataclass(frozen=True)
class ProviderTraits:
    """What the runtime needs to know of a provider, beyond its adapter."""

    needs_io: bool
    """False for a provider whose turn is instant and deterministic (no network,
    no clock): in a workflow its ``llm_turn`` runs as a local activity, a marker
    in the history with no task queue round trip. Such a turn is given the
    conversation's latest message only (all the ``scripted`` provider reads):
    a local activity runs inside the workflow task, which the whole
    conversation would make grow with the run."""

    default_model: str | None = None
    """The model an agent of this provider uses when it names none; ``None``
    when there is no sensible default (an OpenAI-compatible server serves
    whatever models it was given), so ``model`` is required."""

    takes_endpoint: bool = False
    """Whether an agent may give ``base_url`` and ``api_key_env`` (where its
    adapter sends turns and which worker environment variable holds the key)."""


PROVIDERS: Mapping[Provider, ProviderTraits] = {
    "anthropic": ProviderTraits(needs_io=True, default_model="claude-sonnet-4-6"),
    "openai": ProviderTraits(needs_io=True, takes_endpoint=True),
    # scripted answers from its script whatever the model; the name is only reported
    "scripted": ProviderTraits(needs_io=False, default_model="claude-sonnet-4-6"),
}
"""Every provider an agent may name (``AgentConfig.provider``)."""
