"""Process and ACP tasks under Temporal's at-least-once activities: a task
reports every time Temporal ran its command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from tests._runs import agent_result, run_team, task


@pytest.mark.usefixtures("worker")
async def test_an_acp_turn_temporal_ran_again_shows_in_backend_attempts(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # the agent's first process exits mid-turn (ACP_AGENT_EXITED, which
    # Temporal retries); the retry's fresh agent answers
    agent_script = str(Path(__file__).parent / "acp_agent.py")
    exits = {"turns": [{"steps": [{"text": "half"}, {"exit": 3}]}]}
    answers = {"turns": [{"steps": [{"text": "whole"}]}]}
    first = tmp_path / "first-spawn"
    command = (
        f"if [ -e {first} ]; then exec {sys.executable} {agent_script}; fi\n"
        f"touch {first}\n"
        f"ACP_TEST_SCRIPT='{json.dumps(exits)}' exec {sys.executable} {agent_script}\n"
    )
    coder = {
        "name": "coder",
        "backend": {
            "kind": "acp",
            "command": "sh",
            "args": ["-c", command],
            "env": {"ACP_TEST_SCRIPT": json.dumps(answers)},
        },
    }

    result = await run_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [coder]}, "tasks": [task("code", "coder")]},
    )

    [code] = result.tasks
    assert (code.status, code.output, code.attempts, code.backend_attempts) == (
        "completed",
        "whole",
        1,
        2,
    )
    assert (await agent_result(client, workflow_id, "code")).backend_attempts == 2
