"""A regression test that runs offline: a team run answered from its recording.

``recorded/brief/`` holds the histories of a real run of
``recorded/brief-run.json`` (two Anthropic agents), exported with
``temporal workflow show --workflow-id ID --output json`` for the team run
and each of its tasks. ``oma.testing.recorded`` runs the team on a Temporal
dev server of its own, answering every model turn whose request the recording
holds with the recorded answer: no key, no network. Change a prompt, a task
or anything else a model is asked, and the run fails ``RECORDING_MISS``,
naming the agent, the task, the turn and what differs.

    pytest examples/test_recorded_team.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oma.testing import recorded

HERE = Path(__file__).parent / "recorded"
RUN = json.loads((HERE / "brief-run.json").read_text())

pytestmark = pytest.mark.asyncio


async def test_the_brief_team_writes_the_recorded_brief() -> None:
    async with recorded(HERE / "brief") as oma:
        result = await oma.run_tasks(RUN["team"], RUN["tasks"])
    assert result.success, result.error
    assert result.task("write").output.startswith("Durable execution writes every step")


async def test_a_changed_prompt_is_caught() -> None:
    team = json.loads(json.dumps(RUN["team"]))
    team["agents"][1]["system_prompt"] = "You write two sentences."
    async with recorded(HERE / "brief") as oma:
        result = await oma.run_tasks(team, RUN["tasks"])
    write = result.task("write")
    assert (result.success, write.error_code) == (False, "RECORDING_MISS")
    assert "agent 'writer', task 'write', model turn 1" in (write.error or "")
    assert "the system prompt differs" in (write.error or "")
