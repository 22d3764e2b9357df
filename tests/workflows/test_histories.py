"""Recorded histories keep replaying against the current workflow code."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from oma.records.history_files import read_history_file
from oma.worker import plugin
from tests.support.paths import HISTORIES as HISTORIES_DIR
from tests.support.record_histories import SCENARIOS

HISTORIES = sorted(HISTORIES_DIR.glob("*.json"))


@pytest.mark.parametrize("strict", [False, True], ids=["worker_sandbox", "strict_sandbox"])
@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path, strict: bool) -> None:
    # as a worker runs it, and with OMA's code under the sandbox's restrictions
    history = read_history_file(path)
    replayer = plugin.replayer(strict_sandbox=strict)
    await replayer.replay_workflow(history)


def test_the_corpus_holds_team_runs_of_each_kind_and_both_agent_kinds() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "team_run_hybrid_scripted",
        "team_run_goal_plan_approval",
        "team_run_dispatch_gate_abort",
        "team_run_continued_as_new",
        "agent_run_process",
        "agent_run_scripted",
        "team_run_dispatch_gates_decided",
        "team_run_round_gates",
        "team_run_approval_expired",
        "team_run_resumed_with_open_approval",
        "team_run_failed_task_cascade",
        "team_run_task_timeout_retries",
        "team_run_run_timeout",
        "team_run_token_budget",
        "team_run_cancelled",
        "team_run_tool_call_approved",
        "team_run_acp_two_turns",
        "agent_run_acp_routed_turn",
        "agent_run_anthropic_retry_hooks",
        "team_run_fork",
        "team_run_fork_of_a_goal_run",
        "team_run_fork_refused",
        "team_run_reuse",
        "agent_run_recorded_turn",
        "agent_run_recording_miss",
        "team_run_awaiting_approval",
    }


def test_every_recorded_history_has_a_recorder() -> None:
    assert {p.stem for p in HISTORIES} <= set(SCENARIOS)


SHOWS: dict[str, set[str]] = {
    "team_run_dispatch_gates_decided": {
        "WORKFLOW_EXECUTION_SIGNALED decide",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED decide",
    },
    "team_run_round_gates": {
        "WORKFLOW_EXECUTION_SIGNALED decide",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED decide",
    },
    "team_run_approval_expired": {"TIMER_FIRED"},
    "team_run_resumed_with_open_approval": {
        "continued as new carrying dispatch-gated",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED decide",
    },
    "team_run_failed_task_cascade": {"CHILD_WORKFLOW_EXECUTION_FAILED"},
    "team_run_task_timeout_retries": {"TIMER_FIRED", "CHILD_WORKFLOW_EXECUTION_CANCELED"},
    "team_run_run_timeout": {"TIMER_FIRED", "CHILD_WORKFLOW_EXECUTION_CANCELED"},
    "team_run_cancelled": {
        "WORKFLOW_EXECUTION_CANCEL_REQUESTED",
        "CHILD_WORKFLOW_EXECUTION_CANCELED",
        "WORKFLOW_EXECUTION_CANCELED",
    },
    "team_run_tool_call_approved": {
        "WORKFLOW_EXECUTION_SIGNALED tool_approval_request",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED decide",
        "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED decide",
    },
    "team_run_acp_two_turns": {"activity acp_close_run (routed)"},
    "agent_run_acp_routed_turn": {"activity acp_prompt (routed)"},
    "agent_run_anthropic_retry_hooks": {
        "activity before_run",
        "activity llm_turn (retried)",
        "activity evaluate",
    },
    "team_run_fork": {"activity read_fork_source", "CHILD_WORKFLOW_EXECUTION_COMPLETED"},
    "team_run_fork_refused": {"activity read_fork_source", "WORKFLOW_EXECUTION_FAILED"},
    "team_run_reuse": {"activity read_fork_source", "CHILD_WORKFLOW_EXECUTION_COMPLETED"},
    "agent_run_recorded_turn": {"activity llm_turn", "WORKFLOW_EXECUTION_COMPLETED"},
    "agent_run_recording_miss": {"ACTIVITY_TASK_FAILED", "WORKFLOW_EXECUTION_FAILED"},
    "team_run_fork_of_a_goal_run": {
        "activity read_fork_source",
        "CHILD_WORKFLOW_EXECUTION_COMPLETED",
    },
}
"""What a recorded history shows, beyond the outcome its recorder asserted."""


def _shown(raw: dict[str, Any]) -> set[str]:
    """The event types of a history, with the signal, update and activity
    names, and whether an activity ran on another task queue than the
    workflow's (routed) or took more than one attempt (retried)."""
    started = raw["events"][0]["workflowExecutionStartedEventAttributes"]
    queue = started["taskQueue"]["name"]
    shown: set[str] = set()
    if started.get("continuedExecutionRunId"):
        carried = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
        for request in carried["resume"].get("requests", []):
            shown.add(f"continued as new carrying {request['request_id']}")
    activities: dict[str, str] = {}
    for event in raw["events"]:
        kind = event["eventType"].removeprefix("EVENT_TYPE_")
        shown.add(kind)
        if signal := event.get("workflowExecutionSignaledEventAttributes"):
            shown.add(f"{kind} {signal['signalName']}")
        if sent := event.get("signalExternalWorkflowExecutionInitiatedEventAttributes"):
            shown.add(f"{kind} {sent['signalName']}")
        if update := event.get("workflowExecutionUpdateAcceptedEventAttributes"):
            shown.add(f"{kind} {update['acceptedRequest']['input']['name']}")
        if scheduled := event.get("activityTaskScheduledEventAttributes"):
            name = scheduled["activityType"]["name"]
            activities[event["eventId"]] = name
            shown.add(f"activity {name}")
            if scheduled["taskQueue"]["name"] != queue:
                shown.add(f"activity {name} (routed)")
        if (attempt := event.get("activityTaskStartedEventAttributes")) and attempt["attempt"] > 1:
            shown.add(f"activity {activities[attempt['scheduledEventId']]} (retried)")
    return shown


@pytest.mark.parametrize("stem", sorted(SHOWS))
def test_recorded_history_shows_what_its_scenario_is_for(stem: str) -> None:
    raw = json.loads((HISTORIES_DIR / f"{stem}.json").read_text())
    assert SHOWS[stem] <= _shown(raw)
