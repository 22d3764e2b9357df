"""What the CLI shows of an encrypted run: `oma show` without the key warns
once and says the totals it cannot read are unknown (not zero); `oma run`'s
live view shows a retried provider error decoded when it has the key (not
Temporal's ``Encoded failure``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from oma import worker as oma_worker
from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.runtime.codec import parse_keys
from oma.runtime.dev_server import DevServer, free_port
from tests.support.anthropic_server import AnthropicServer
from tests.support.cli import OMA, input_file
from tests.support.encryption import KEY_A, QUEUE, connect
from tests.support.procs import Processes
from tests.support.runs import ENCRYPTED_NAMESPACE, scripted, task, team_result, worker_activities
from tests.support.terminal import Terminal

pytestmark = pytest.mark.e2e


def env_of(dev_server: DevServer, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMA_CODEC")}
    return {
        **env,
        "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": ENCRYPTED_NAMESPACE,
        "OMA_TASK_QUEUE": QUEUE,
        "COLUMNS": "200",
        **more,
    }


async def test_oma_show_of_an_encrypted_run_without_the_key_warns_once_and_totals_unknown(
    dev_server: DevServer, anthropic_server: AnthropicServer
) -> None:
    keyed = await connect(dev_server, parse_keys(KEY_A))
    workflow_id = f"enc-show-{uuid.uuid4().hex[:8]}"
    run_input = {
        "team": {"name": "t", "agents": [scripted("writer", "one", "two", "three")]},
        "tasks": [task("a", "writer"), task("b", "writer", "a"), task("c", "writer", "b")],
    }
    activities = worker_activities(QUEUE, anthropic_server.base_url)
    async with oma_worker.build_worker(keyed, QUEUE, activities):
        handle = await keyed.start_workflow(
            WorkflowName.TEAM_RUN,
            run_input,
            id=workflow_id,
            task_queue=QUEUE,
            result_type=TeamRunResult,
        )
        assert (await team_result(handle)).success
    shown = await asyncio.to_thread(
        subprocess.run,
        [OMA, "show", workflow_id],
        env=env_of(dev_server),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    notes = [line for line in shown.stderr.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: cannot read 11 parts of the run (the run's input, the run's result, the input of "
        f"{workflow_id}/a and 8 more): CODEC_KEY_MISSING: the payload is encrypted with key id "
        "'key-a' and OMA_CODEC_KEYS is not set; set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) to a "
        "list holding that key"
    ], shown.stderr
    header = shown.stdout.splitlines()[1]
    assert header.endswith(", tokens and cost unknown (its result cannot be read)"), header
    assert "0 tokens" not in shown.stdout and "$0.00" not in shown.stdout


async def test_the_live_view_shows_a_retried_provider_error_decoded_with_the_key(
    dev_server: DevServer, processes: Processes, tmp_path: Path
) -> None:
    # a worker with the key whose openai base URL nothing listens on: every
    # attempt of the turn is refused, Temporal retries it, and the failure's
    # message is encrypted in the pending activity's last failure
    queue = f"enc-unreachable-{uuid.uuid4().hex[:8]}"
    env = env_of(
        dev_server,
        OMA_TASK_QUEUE=queue,
        OMA_CODEC_KEYS=KEY_A,
        OPENAI_API_KEY="sk-test-unreachable",
        OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
    )
    env.pop("COLUMNS")
    worker = processes.start([OMA, "worker"], env=env, stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    banner = await asyncio.wait_for(asyncio.to_thread(worker.stdout.readline), 120)
    assert banner.startswith("OMA worker on task queue"), banner
    run_input = {
        "team": {"name": "live", "agents": [{"name": "gpt", "provider": "openai", "model": "m"}]},
        "tasks": [{**task("ask", "gpt"), "title": "Ask the model"}],
    }
    workflow_id = f"enc-live-{uuid.uuid4().hex[:8]}"
    run_file = input_file(tmp_path, run_input)
    term = Terminal(
        dev_server, "run", "--no-worker", "--workflow-id", workflow_id, run_file, env=env
    )
    try:
        shown = await term.wait_for(
            r"ask +Ask the model +gpt +\d+\.\ds +retrying the model provider: attempt [2-9], "
            r"PROVIDER_ERROR: (.+)"
        )
        assert shown.group(1).startswith("could not reach the Chat Co"), shown.group(0)
        assert "Encoded failure" not in term.screen
    finally:
        term.kill()
        keyed = await connect(dev_server, parse_keys(KEY_A))
        await keyed.get_workflow_handle(workflow_id).terminate("test over")
