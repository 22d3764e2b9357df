"""AgentRun on Temporal: before_run and the online evaluator run as activities,
and the agent_start event is queryable."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import QueryName
from tests.support.anthropic_server import AnthropicServer
from tests.support.runs import assert_replays, process, run_agent

pytestmark = pytest.mark.usefixtures("worker")


async def test_before_run_by_import_path_rewrites_the_prompt_on_the_worker(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("ok")
    agent = {"name": "a", "provider": "anthropic", "before_run": "tests.support.hooks:shout"}
    await run_agent(client, workflow_id, agent, "quiet please")
    assert anthropic_server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "QUIET PLEASE"}]}
    ]
    events = await client.get_workflow_handle(workflow_id).query(QueryName.EVENTS)
    assert [(e["type"], e["payload"]) for e in events] == [
        ("agent_start", {"prompt": "QUIET PLEASE"})
    ]
    await assert_replays(client, workflow_id)


async def test_external_agent_hook_that_changes_messages_fails_before_spawning(
    client: Client, workflow_id: str, tmp_path: Any
) -> None:
    marker = tmp_path / "spawned"
    agent = process("p", f"open({str(marker)!r}, 'w')")
    agent["before_run"] = "tests.support.hooks:replace_messages"
    with pytest.raises(WorkflowFailureError) as info:
        await run_agent(client, workflow_id, agent, "hello")
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_MESSAGE"
    assert not marker.exists()


async def test_a_missing_hook_fails_the_run_naming_it(client: Client, workflow_id: str) -> None:
    agent = {
        "name": "a",
        "provider": "scripted",
        "script": ["x"],
        "before_run": "tests.nowhere:hook",
    }
    with pytest.raises(WorkflowFailureError) as info:
        await run_agent(client, workflow_id, agent, "hello")
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_HOOK"
    assert "tests.nowhere" in cause.message


async def test_a_hook_that_raises_fails_the_run_naming_the_hook_under_an_oma_code(
    client: Client, workflow_id: str
) -> None:
    agent = {
        "name": "a",
        "provider": "scripted",
        "script": ["x"],
        "before_run": "tests.support.hooks:index_like_a_dict",
    }
    with pytest.raises(WorkflowFailureError) as info:
        await run_agent(client, workflow_id, agent, "hello")
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ACTIVITY_FAILED"
    assert cause.message == (
        "before_run hook 'tests.support.hooks:index_like_a_dict' raised TypeError: "
        "'BeforeRunContext' object is not subscriptable (its argument is a BeforeRunContext, "
        "read by attribute: ctx.prompt)"
    )
    await assert_replays(client, workflow_id)


async def test_sampled_run_is_evaluated_with_redacted_stored_payloads(
    client: Client, workflow_id: str
) -> None:
    agent = {
        "name": "a",
        "provider": "scripted",
        "script": ["four"],
        "evaluation": {
            "evaluator": "tests.support.hooks:output_length",
            "sample_rate": 1.0,
            "store_payloads": "redacted",
        },
    }
    result = await run_agent(client, workflow_id, agent, "my key is sk-ant-api03-secretsecret")
    record = result.evaluation
    assert record is not None
    assert (record.sampled, record.score, record.label, record.output) == (
        True,
        4.0,
        "length",
        "four",
    )
    assert record.input == {"prompt": "my key is [redacted]"}
    await assert_replays(client, workflow_id)


async def test_unsampled_run_is_not_evaluated(client: Client, workflow_id: str) -> None:
    agent = {
        "name": "a",
        "provider": "scripted",
        "script": ["four"],
        "evaluation": {"evaluator": "tests.support.hooks:output_length", "sample_rate": 0.0},
    }
    result = await run_agent(client, workflow_id, agent, "hi")
    assert result.evaluation is not None and result.evaluation.sampled is False
    assert result.evaluation.score is None
