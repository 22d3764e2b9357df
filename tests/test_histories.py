"""Recorded histories keep replaying against the current workflow code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from oma import plugin
from oma.cli import _workflow_id_of

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    raw = json.loads(path.read_text())
    history = WorkflowHistory.from_json(_workflow_id_of(raw) or path.stem, raw)
    replayer = plugin.replayer()
    await replayer.replay_workflow(history)


def test_the_corpus_holds_team_runs_of_each_kind_and_both_agent_kinds() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "team_run_hybrid_scripted",
        "team_run_goal_plan_approval",
        "team_run_dispatch_gate_abort",
        "team_run_continued_as_new",
        "agent_run_process",
        "agent_run_scripted",
    }
