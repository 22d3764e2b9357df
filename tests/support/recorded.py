"""Runs whose model turns a fork answers from the recording (docs/fork.md):
a worker and a Messages API server of a test's own, which the test can stop
while the worker goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.client import Client

from oma import worker as oma_worker
from oma.core.schema.results import TeamRunResult
from tests.support.anthropic_server import AnthropicServer
from tests.support.runs import start_team, task, team_result, worker_activities

QUEUE = "oma-recorded"
"""The task queue of the test's own worker."""


def team_input() -> dict[str, Any]:
    """Two tasks, ``t2`` after ``t1``, by one ``anthropic`` agent: two model turns."""
    agent = {"name": "writer", "provider": "anthropic", "system_prompt": "Be brief."}
    return {
        "team": {"name": "rec", "agents": [agent]},
        "tasks": [task("t1", "writer"), task("t2", "writer", "t1")],
    }


@asynccontextmanager
async def own_api_and_worker(client: Client) -> AsyncIterator[AnthropicServer]:
    """A Messages API server and a worker of this test's own (on ``QUEUE``),
    so that the test can stop the server while the worker goes on."""
    with AnthropicServer() as api:
        activities = worker_activities(QUEUE, api.base_url)
        async with oma_worker.build_worker(client, QUEUE, activities):
            yield api


async def run_on_queue(
    client: Client, workflow_id: str, run_input: dict[str, Any]
) -> TeamRunResult:
    """``run_input`` run to its result on ``QUEUE``."""
    return await team_result(await start_team(client, workflow_id, run_input, QUEUE))
