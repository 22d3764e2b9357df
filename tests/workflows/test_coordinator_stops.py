"""A stop while the coordinator works (planning, its correction, the
synthesis) ends the run as a stop during the tasks does: completed
``cancelled`` with ``ABORTED``, or ``failed`` with ``RUN_TIMEOUT``, with its
``run_end`` event. The coordinator runs on the real ``anthropic`` SDK against
the local Messages API server, whose slow answers keep a step busy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.client import Client

from oma.core.schema.task import TaskStatus
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import Run, children_started, eventually, result_within, start_run
from tests.support.runs import assert_replays, scripted

pytestmark = pytest.mark.usefixtures("worker")

PLAN = json.dumps([{"title": "Write", "description": "a line", "assignee": "writer"}])
SLOW_S = 20.0
"""Seconds before a slow answer's text arrives: far longer than any test waits."""


def goal_run(**options: Any) -> dict[str, Any]:
    return {
        "team": {"name": "t", "agents": [scripted("writer", "a line")]},
        "goal": "one line",
        "coordinator": {"provider": "anthropic", "model": "claude-test"},
        "options": options,
    }


async def step_started(
    client: Client, server: AnthropicServer, run: Run, step: str, requests: int
) -> None:
    """Wait until the coordinator's ``step`` child runs and its model request
    (the run's ``requests``-th) reached the server: a stop sent before the
    request would leave the scripted reply unconsumed."""
    child = f"{run.id}/coordinator/{step}"

    async def probe() -> bool | None:
        started = child in await children_started(client, run.id)
        return True if started and len(server.requests) >= requests else None

    await eventually(probe, f"the coordinator's {step} step", 15)


async def run_end(run: Run) -> str | None:
    events = await run.events()
    ends = [e.detail for e in events if e.type == "run_end"]
    assert len(ends) == 1, [e.type for e in events]
    return ends[0]


async def test_abort_while_the_coordinator_plans_ends_the_run_cancelled(
    client: Client, anthropic_server: AnthropicServer, workflow_id: str
) -> None:
    anthropic_server.reply_text(PLAN, pieces=1, delay_s=SLOW_S)
    run = await start_run(client, workflow_id, goal_run())
    await step_started(client, anthropic_server, run, "plan", requests=1)

    await run.abort("not now")
    result = await result_within(run, 15)

    assert (result.status, result.error_code, result.error) == (
        "cancelled",
        "ABORTED",
        "aborted: not now",
    )
    assert await run_end(run) == "cancelled"
    assert (await run.state()).status == "cancelled"
    await assert_replays(client, workflow_id)


async def test_run_timeout_while_the_coordinator_corrects_its_plan_fails_the_run(
    client: Client, anthropic_server: AnthropicServer, workflow_id: str
) -> None:
    anthropic_server.reply_text("no plan yet")
    anthropic_server.reply_text(PLAN, pieces=1, delay_s=SLOW_S)
    run = await start_run(client, workflow_id, goal_run(timeout_s=3))

    result = await result_within(run, 20)

    assert (result.status, result.error_code) == ("failed", "RUN_TIMEOUT")
    assert result.error == "the run passed options.timeout_s (3 s)"
    assert f"{workflow_id}/coordinator/plan-correction" in await children_started(
        client, workflow_id
    )
    assert await run_end(run) == "failed"
    await assert_replays(client, workflow_id)


async def test_abort_during_the_synthesis_keeps_the_task_outputs(
    client: Client, anthropic_server: AnthropicServer, workflow_id: str
) -> None:
    anthropic_server.reply_text(PLAN)
    anthropic_server.reply_text("the synthesis", pieces=1, delay_s=SLOW_S)
    run = await start_run(client, workflow_id, goal_run())
    await step_started(client, anthropic_server, run, "synthesis", requests=2)

    await run.abort("enough")
    result = await result_within(run, 15)

    assert (result.status, result.error_code, result.final_output) == (
        "cancelled",
        "ABORTED",
        None,
    )
    assert [(t.id, t.status, t.output) for t in result.tasks] == [
        ("t1", TaskStatus.COMPLETED, "a line")
    ]
    assert await run_end(run) == "cancelled"
    await assert_replays(client, workflow_id)
