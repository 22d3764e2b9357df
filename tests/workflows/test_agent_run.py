"""AgentRun: the model loop against the real anthropic SDK, and process agents
on Temporal (including cancellation of a process tree)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import Worker

from oma.core.contracts.names import ActivityName, QueryName, WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.workflows._options import LLM_TURN
from oma.workflows.agent_run import AgentRun
from tests.support.anthropic_server import AnthropicServer
from tests.support.procs import alive
from tests.support.runs import TASK_QUEUE, assert_replays, process, run_agent, run_team, task

pytestmark = pytest.mark.usefixtures("worker")


def claude(name: str = "claude", **extra: Any) -> dict[str, Any]:
    return {"name": name, "system_prompt": "Be brief.", "provider": "anthropic", **extra}


async def test_anthropic_agent_answers_through_the_local_messages_api(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("Hello from Claude.", input_tokens=12, output_tokens=4)
    result = await run_agent(client, workflow_id, claude(model="claude-test"), "Say hello.")
    assert (result.status, result.output, result.turns) == ("completed", "Hello from Claude.", 1)
    assert result.token_usage.model_dump(include={"input_tokens", "output_tokens"}) == {
        "input_tokens": 12,
        "output_tokens": 4,
    }
    [request] = anthropic_server.requests
    assert request.body["model"] == "claude-test"
    assert request.body["system"] == "Be brief."
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello."}]}
    ]
    await assert_replays(client, workflow_id)


async def test_rate_limited_turn_is_retried_by_temporal_then_succeeds(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_error(429, "slow down", headers={"retry-after-ms": "100"})
    anthropic_server.reply_text("second time lucky")
    result = await run_agent(client, workflow_id, claude(), "hi")
    assert result.output == "second time lucky"
    assert len(anthropic_server.requests) == 2
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    [completed] = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert completed.activity_task_started_event_attributes.attempt == 2
    await assert_replays(client, workflow_id)


RETRY_AFTER_S = 3.0
"""What the rate-limited answer asks for: longer than the retry policy's own
first interval plus the slack, so the two cases cannot be mistaken."""

RETRY_SLACK_S = 1.5
"""What a retry may take beyond its delay: the failure reaching the server,
the retry timer firing, the worker picking the attempt up, the request."""


async def gap_between_two_attempts(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer, **headers: str
) -> float:
    """Seconds between the two requests of a turn whose first answer is a 429
    with ``headers``, retried by Temporal."""
    anthropic_server.reset()
    anthropic_server.reply_error(429, "slow down", headers=headers)
    anthropic_server.reply_text("after the wait")
    result = await run_agent(client, workflow_id, claude(), "hi")
    assert result.output == "after the wait"
    first, second = anthropic_server.requests
    return second.received_at - first.received_at


async def test_retry_after_of_a_rate_limited_turn_delays_the_next_attempt_by_that_long(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    gap = await gap_between_two_attempts(
        client, workflow_id, anthropic_server, **{"retry-after": f"{RETRY_AFTER_S:g}"}
    )

    assert RETRY_AFTER_S <= gap < RETRY_AFTER_S + RETRY_SLACK_S, f"{gap:.2f} s"


async def test_a_rate_limited_turn_without_retry_after_is_retried_after_the_policys_interval(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    interval = LLM_TURN["retry_policy"].initial_interval.total_seconds()

    gap = await gap_between_two_attempts(client, workflow_id, anthropic_server)

    assert interval <= gap < interval + RETRY_SLACK_S < RETRY_AFTER_S, f"{gap:.2f} s"


async def test_bad_request_fails_the_task_without_retry_and_carries_the_provider_message(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_error(400, "messages: roles must alternate")
    result = await run_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [claude()]}, "tasks": [task("ask", "claude")]},
    )
    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "PROVIDER_ERROR")
    assert "messages: roles must alternate" in (failed.error or "")
    assert "400" in (failed.error or "")
    assert len(anthropic_server.requests) == 1
    await assert_replays(client, workflow_id)


async def test_agent_run_input_is_validated_and_names_the_field(
    client: Client, workflow_id: str
) -> None:
    with pytest.raises(WorkflowFailureError) as info:
        await run_agent(client, workflow_id, {"name": "x", "provider": "gemini"}, "hi")
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_RUN_INPUT"
    assert "agent.provider: Input should be 'anthropic', 'openai' or 'scripted'" in cause.message


@pytest.mark.parametrize("workflow_type", [WorkflowName.AGENT_RUN, WorkflowName.TEAM_RUN])
async def test_a_run_started_without_its_input_fails_at_once(
    client: Client, workflow_id: str, workflow_type: str
) -> None:
    # `temporal workflow start` without --input: the workflow must fail with a
    # clear error, not retry a workflow task that cannot call it forever
    handle = await client.start_workflow(workflow_type, id=workflow_id, task_queue=TASK_QUEUE)
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), 10)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_RUN_INPUT"
    assert cause.message == (
        f"{workflow_type} takes exactly one input, a JSON object; got 0 "
        "(pass it with --input or --input-file)"
    )
    await assert_replays(client, workflow_id)


async def test_message_list_to_a_process_agent_fails_before_spawning(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    marker = tmp_path / "spawned"
    agent = process("p", f"open({str(marker)!r}, 'w')")
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    with pytest.raises(WorkflowFailureError) as info:
        await run_agent(client, workflow_id, agent, messages)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_MESSAGE"
    assert not marker.exists()


GRANDCHILD = """
import subprocess, sys, time
sys.stdin.read()
# a background grandchild that would outlive its parent: only a kill of the
# whole process group ends it (a plain `sleep` may exit with its parent here)
child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
open(sys.argv[1], "w").write(f"{child.pid}\\n")
time.sleep(300)
"""


async def test_cancelling_a_team_run_kills_the_process_tree_of_a_running_task(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    agent = process("sleeper", GRANDCHILD)
    agent["backend"]["args"] = ["-c", GRANDCHILD, str(pids)]
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {"team": {"name": "t", "agents": [agent]}, "tasks": [task("long", "sleeper")]},
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    for _ in range(100):
        if pids.exists() and pids.read_text().endswith("\n"):
            break
        await asyncio.sleep(0.1)
    grandchild = int(pids.read_text())
    assert alive(grandchild)
    await handle.cancel()
    cancelled_at = asyncio.get_running_loop().time()
    while alive(grandchild) and asyncio.get_running_loop().time() - cancelled_at < 2.0:
        await asyncio.sleep(0.05)
    assert not alive(grandchild), "the grandchild survived 2 s after the cancel"
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert isinstance(info.value.cause, CancelledError)
    child = await client.get_workflow_handle(f"{workflow_id}/long").describe()
    assert child.status == WorkflowExecutionStatus.CANCELED
    state = await handle.query(QueryName.STATE, result_type=TeamRunResult)
    assert [(t.id, t.status, t.error) for t in state.tasks] == [
        ("long", "failed", "cancelled with the run")
    ]
    await assert_replays(client, workflow_id)


@activity.defn(name=ActivityName.BEFORE_RUN)
async def before_run_with_a_bug(inp: Any) -> None:
    """A ``before_run`` activity that fails as a bug would: an exception no
    activity maps (its type is the class name), not retried (user code)."""
    raise KeyError("prompt")


async def test_an_exception_no_activity_maps_fails_the_run_with_a_catalogue_code(
    client: Client, workflow_id: str
) -> None:
    queue = f"{workflow_id}-unmapped"
    agent = {**process("p", "print('hi')"), "before_run": "tests.support.hooks:shout"}
    async with Worker(
        client, task_queue=queue, workflows=[AgentRun], activities=[before_run_with_a_bug]
    ):
        handle = await client.start_workflow(
            WorkflowName.AGENT_RUN, {"agent": agent, "input": "x"}, id=workflow_id, task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ACTIVITY_FAILED"
    assert cause.message == "KeyError: 'prompt'"
    assert cause.details[0]["error_code"] == "ACTIVITY_FAILED"
    await assert_replays(client, workflow_id)
