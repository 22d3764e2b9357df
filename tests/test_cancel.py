"""Temporal cancellation reaches a running model turn within 2 s, even while
the model is silent (activities heartbeat on a timer, the worker throttles
heartbeats to 0.5 s)."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

from oma.core.schema.results import AgentRunResult
from tests._runs import TASK_QUEUE, assert_replays
from tests.anthropic_server import AnthropicServer

pytestmark = pytest.mark.usefixtures("worker")


async def test_cancel_reaches_a_model_turn_between_two_stream_events(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    # message_start at once, then 4 s of silence before each later event
    anthropic_server.reply_text("slow answer", pieces=1, delay_s=4)
    handle = await client.start_workflow(
        "AgentRun",
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
