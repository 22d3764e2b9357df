"""The provider registry: an adapter for every provider an agent may name."""

from __future__ import annotations

from typing import get_args

from oma.activities.providers import ADAPTERS, default_providers
from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.core.providers import PROVIDERS, Provider


def test_every_provider_an_agent_may_name_has_traits_and_an_adapter() -> None:
    assert set(get_args(Provider)) == set(PROVIDERS) == set(ADAPTERS)


def test_the_default_providers_are_one_adapter_of_each() -> None:
    providers = default_providers()
    assert {name: type(adapter) for name, adapter in providers.items()} == {
        "anthropic": AnthropicProvider,
        "scripted": ScriptedProvider,
    }
