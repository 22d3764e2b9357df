"""Recorded model turns (docs/fork.md): a fork with ``options.models``
``recorded`` answers each model turn whose request its source recorded with
the recorded answer, with the real ``anthropic`` SDK's local server stopped;
a changed request fails ``RECORDING_MISS`` naming where it differs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from oma import worker as oma_worker
from oma.core.schema.results import TeamRunResult
from oma.runtime.dev_server import DevServer, is_listening
from tests._runs import assert_replays, start_team, task, team_result, worker_activities
from tests.anthropic_server import AnthropicServer
from tests.test_cli import OMA, run_cmd

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "oma-recorded"


def team_input() -> dict[str, Any]:
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


async def run(client: Client, workflow_id: str, run_input: dict[str, Any]) -> TeamRunResult:
    return await team_result(await start_team(client, workflow_id, run_input, QUEUE))


async def test_a_fork_replays_recorded_turns_with_the_model_server_stopped(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    with AnthropicServer() as api:
        address = api.base_url.removeprefix("http://")
        activities = worker_activities(QUEUE, api.base_url)
        async with oma_worker.build_worker(client, QUEUE, activities):
            api.reply_text("alpha", input_tokens=11, output_tokens=3)
            api.reply_text("beta", input_tokens=13, output_tokens=4)
            source = await run(client, workflow_id, team_input())
            assert source.success, source
            assert [t.output for t in source.tasks] == ["alpha", "beta"]
            assert len(api.requests) == 2
            api.stop()
            assert not is_listening(address)
            forked = await run(
                client,
                f"{workflow_id}-rec",
                {
                    "fork": {"run_id": workflow_id, "rerun": ["t1"]},
                    "options": {"models": "recorded"},
                },
            )
            assert forked.status == "completed", forked
            assert [(t.output, t.reused_from) for t in forked.tasks] == [
                ("alpha", None),
                ("beta", None),
            ]
            assert forked.total_token_usage.input_tokens == 11 + 13  # as recorded
            assert forked.total_cost_usd == 0.0  # nothing was spent
            missed = await run(
                client,
                f"{workflow_id}-miss",
                {
                    "fork": {
                        "run_id": workflow_id,
                        "edit": {"t2": {"description": "do t2 otherwise"}},
                    },
                    "options": {"models": "recorded"},
                },
            )
    assert missed.status == "failed"
    failed = missed.task("t2")
    assert failed.error_code == "RECORDING_MISS"
    assert failed.error is not None
    assert (
        f"agent 'writer', task 't2', model turn 1: run {workflow_id} recorded no turn with this "
        "request: message 1 (user) differs from the recording's"
    ) in failed.error
    await assert_replays(client, f"{workflow_id}-rec")
    await assert_replays(client, f"{workflow_id}-miss")


async def test_a_fork_of_a_fork_replays_the_turns_of_the_tasks_it_kept(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    async with own_api_and_worker(client) as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        assert (await run(client, workflow_id, team_input())).success
        api.stop()
        recorded = {"options": {"models": "recorded"}}
        first = await run(
            client,
            f"{workflow_id}-f",
            {"fork": {"run_id": workflow_id, "rerun": ["t2"]}, **recorded},
        )
        assert first.status == "completed", first
        # t1 was kept by the first fork: its turn is in the source's AgentRun, not the fork's
        second = await run(
            client,
            f"{workflow_id}-ff",
            {"fork": {"run_id": f"{workflow_id}-f", "rerun": ["t1"]}, **recorded},
        )
    assert second.status == "completed", second.task("t1").error
    assert [t.output for t in second.tasks] == ["alpha", "beta"]
    await assert_replays(client, f"{workflow_id}-ff")


async def test_oma_fork_models_recorded_with_fallback_calls_the_provider_on_a_miss(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    async with own_api_and_worker(client) as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        assert (await run(client, workflow_id, team_input())).success
        api.reset()
        api.reply_text("gamma")
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": QUEUE}
        proc = await run_cmd(
            OMA,
            "fork",
            workflow_id,
            "--no-worker",
            "--json",
            "--models",
            "recorded",
            "--on-miss",
            "fallback",
            "--set",
            "t2.description=do t2 otherwise",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert [t["output"] for t in result["tasks"]] == ["alpha", "gamma"]
        assert len(api.requests) == 1  # only the miss went to the provider


async def test_the_example_regression_test_runs_offline_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = await run_cmd(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "examples/test_recorded_team.py",
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
