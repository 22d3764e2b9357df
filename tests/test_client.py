"""OpenMultiAgent: agent and team runs started from Python on Temporal."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from oma.client import OpenMultiAgent
from oma.errors import InvalidMessageError
from tests._runs import TASK_QUEUE, assert_replays, process, scripted, task
from tests.anthropic_server import AnthropicServer

pytestmark = pytest.mark.usefixtures("worker")

PNG = "iVBORw0KGgo="


async def test_run_agent_runs_an_agent_run_workflow_with_a_message_list(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("An image.")
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        }
    ]
    result = await oma.run_agent(
        {"name": "vision", "provider": "anthropic"}, messages, workflow_id=workflow_id
    )
    assert result.output == "An image."
    assert anthropic_server.requests[0].body["messages"] == messages
    await assert_replays(client, workflow_id)


async def test_run_agent_rejects_invalid_input_before_starting_anything(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidMessageError) as info:
        await oma.run_agent(
            {"name": "a", "provider": "anthropic"}, [{"role": "robot", "content": []}]
        )
    assert "input[0].role" in info.value.message


async def test_run_agent_rejects_messages_for_a_process_agent(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidMessageError):
        await oma.run_agent(
            process("p", "print(1)"), [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
        )


async def test_run_tasks_runs_a_team_run(client: Client, workflow_id: str) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    result = await oma.run_tasks(
        {"name": "t", "agents": [scripted("writer", "drafted")]},
        [task("draft", "writer")],
        workflow_id=workflow_id,
    )
    assert (result.success, result.task_results["draft"].output) == (True, "drafted")
