"""No credential of the worker's environment in any history: process agents
that print ``$ANTHROPIC_API_KEY`` (on the session worker, whose activities
inherit this process's environment) against the real dev server."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from oma import worker as oma_worker
from oma.core.schema.task import TaskStatus
from tests.support.runs import assert_replays, histories_of, process, run_team, task


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    # No shape the pattern redactor knows (no sk-, no name=value): only the
    # worker's knowledge of its own environment can catch it.
    value = f"test-credential-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", value)
    return value


async def in_history(client: Client, workflow_id: str, value: str) -> list[str]:
    """The workflow ids of the run's histories (parent and children) whose
    events hold ``value`` anywhere (payload bytes, failure messages)."""
    found = []
    for history in await histories_of(client, workflow_id):
        if any(value.encode() in e.SerializeToString() for e in history.events):
            found.append(history.workflow_id)
    return found


async def test_a_process_printing_the_api_key_leaves_no_trace_in_history(
    client: Client, worker: oma_worker.OmaWorker, workflow_id: str, api_key: str
) -> None:
    leak = "import os, sys; sys.stdin.read(); print('key is', os.environ['ANTHROPIC_API_KEY'])"
    leak_err = (
        "import os, sys; sys.stdin.read(); "
        "sys.stderr.write('failed with ' + os.environ['ANTHROPIC_API_KEY']); sys.exit(1)"
    )

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("leaky", leak), process("broken", leak_err)]},
            "tasks": [task("say", "leaky"), task("fail", "broken")],
        },
    )

    assert result.task("say").output == "key is [redacted]\n"
    assert result.task("fail").status == TaskStatus.FAILED
    assert (result.task("fail").error or "").endswith("failed with [redacted]")
    assert await in_history(client, workflow_id, api_key) == []
    await assert_replays(client, workflow_id)
