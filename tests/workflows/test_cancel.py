"""Temporal cancellation reaches a running model turn within 2 s, even while
the model is silent (activities heartbeat on a timer, the worker throttles
heartbeats to 0.5 s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import AgentRunResult
from oma.workflows.agent_run import AgentRun
from oma.workflows.team_run import TeamRun
from tests.support.anthropic_server import AnthropicServer
from tests.support.runs import TASK_QUEUE, assert_replays, start_team

pytestmark = pytest.mark.usefixtures("worker")


async def test_cancel_reaches_a_model_turn_between_two_stream_events(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    # message_start at once, then 4 s of silence before each later event
    anthropic_server.reply_text("slow answer", pieces=1, delay_s=4)
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": {"name": "slow", "provider": "anthropic"}, "input": "hi"},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    deadline = time.monotonic() + 10
    while not anthropic_server.requests or not anthropic_server.requests[0].events:
        assert time.monotonic() < deadline, "the model turn never started streaming"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.6)  # inside the first silent gap

    cancelled_at = time.monotonic()
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    took = time.monotonic() - cancelled_at

    assert isinstance(failure.value.cause, CancelledError)
    # the turn was abandoned mid-stream: the server never sent its last event
    assert len(anthropic_server.requests[0].events) < 4
    assert took < 2.0, f"the cancel took {took:.2f} s to end the run"
    await assert_replays(client, workflow_id)


# -- a cancel while a run reads what it starts from --------------------------------


@pytest.fixture
async def no_activities(client: Client, workflow_id: str) -> AsyncIterator[str]:
    """A task queue whose worker runs the workflows and no activity: a run's
    first activity waits there until the test cancels the run."""
    queue = f"{workflow_id}-no-activities"
    async with Worker(client, task_queue=queue, workflows=[TeamRun, AgentRun]):
        yield queue


async def cancelled_in_time(handle: WorkflowHandle[Any, Any]) -> BaseException | None:
    """Cancel ``handle`` once its first activity waits; what its run ended with."""
    deadline = time.monotonic() + 10
    while not (await handle.describe()).raw_description.pending_activities:
        assert time.monotonic() < deadline, "the run never scheduled its first activity"
        await asyncio.sleep(0.05)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), timeout=15)
    return failure.value.cause


async def test_a_cancel_while_a_run_asks_for_its_search_attributes_ends_it_cancelled(
    client: Client, workflow_id: str, no_activities: str
) -> None:
    # started as the stock CLI starts a run (no OmaStatus): it asks the
    # server first (registered_search_attributes), and that is where the cancel lands
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": {"name": "p", "backend": {"kind": "process", "command": "true"}}, "input": "x"},
        id=workflow_id,
        task_queue=no_activities,
        result_type=AgentRunResult,
    )
    assert isinstance(await cancelled_in_time(handle), CancelledError)
    await assert_replays(client, workflow_id)


async def test_a_cancel_while_a_fork_reads_its_source_ends_it_cancelled(
    client: Client, workflow_id: str, no_activities: str
) -> None:
    handle = await start_team(
        client, workflow_id, {"fork": {"run_id": "any-run"}}, task_queue=no_activities
    )
    assert isinstance(await cancelled_in_time(handle), CancelledError)
    await assert_replays(client, workflow_id)
