"""The provider registry: an adapter for every provider an agent may name, and
the trait that decides, in a workflow, where a provider's turn runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, get_args

import pytest

from oma.activities.providers import ADAPTERS, default_providers
from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.openai import OpenAIProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.contracts.names import ActivityName
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.messages import user_text
from oma.core.schema.providers import PROVIDERS, Provider
from oma.workflows import _agent_ports, _options, _patches


def test_every_provider_an_agent_may_name_has_traits_and_an_adapter() -> None:
    assert set(get_args(Provider)) == set(PROVIDERS) == set(ADAPTERS)


def test_the_default_providers_are_one_adapter_of_each() -> None:
    providers = default_providers()
    assert {name: type(adapter) for name, adapter in providers.items()} == {
        "anthropic": AnthropicProvider,
        "openai": OpenAIProvider,
        "scripted": ScriptedProvider,
    }


class RecordingWorkflow:
    """Stands in for ``temporalio.workflow`` in the port: records how the
    ``llm_turn`` activity would be scheduled."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[str, str, dict[str, Any]]] = []
        self.inputs: list[Any] = []

    def info(self) -> Any:
        return SimpleNamespace(workflow_id="wf", run_id="run")

    def instance(self) -> Any:
        return SimpleNamespace()  # a run started alone: its patches are its own

    def patched(self, patch_id: str) -> bool:
        return True  # a new run

    async def execute_activity(self, name: str, arg: Any, **options: Any) -> LlmTurnOutput:
        self.inputs.append(arg)
        return self._record("activity", name, options)

    async def execute_local_activity(self, name: str, arg: Any, **options: Any) -> LlmTurnOutput:
        self.inputs.append(arg)
        return self._record("local activity", name, options)

    def _record(self, kind: str, name: str, options: dict[str, Any]) -> LlmTurnOutput:
        options.pop("result_type")
        self.scheduled.append((kind, name, options))
        return LlmTurnOutput(content=[], stop_reason="end_turn")


@pytest.mark.parametrize(
    ("agent", "scheduled"),
    [
        ({"provider": "scripted", "script": ["x"]}, ("local activity", _options.LLM_TURN_LOCAL)),
        ({"provider": "anthropic"}, ("activity", _options.LLM_TURN)),
        ({"provider": "openai", "model": "m"}, ("activity", _options.LLM_TURN)),
    ],
    ids=["scripted", "anthropic", "openai"],
)
async def test_in_a_workflow_a_turn_is_a_local_activity_only_when_it_needs_no_io(
    monkeypatch: pytest.MonkeyPatch, agent: dict[str, Any], scheduled: tuple[str, Any]
) -> None:
    recording = RecordingWorkflow()
    monkeypatch.setattr(_agent_ports, "workflow", recording)
    monkeypatch.setattr(_patches, "workflow", recording)  # _patches.patched asks it
    config = AgentConfig.model_validate({"name": "a", **agent})
    asked = [user_text("hi")]
    await _agent_ports.ActivityModel().turn(LlmTurnInput(agent=config, messages=asked, turn=0))
    kind, options = scheduled
    model = "scripted" if kind == "local activity" else f"{config.provider} {config.resolved_model}"
    summary = f"a: model turn 1 ({model})"
    assert recording.scheduled == [(kind, ActivityName.LLM_TURN, {"summary": summary, **options})]
    [sent] = recording.inputs
    if kind == "activity":  # the conversation and the agent go by reference (linear history)
        assert (sent.messages, sent.conversation.length) == ([], 1)
        assert sent.agent_ref is not None and sent.agent.system_prompt == ""
    else:  # a local activity's input is not recorded: the latest message goes along
        assert (sent.messages, sent.conversation) == (asked, None)
