"""``oma replay RUN --trace``: for each workflow task of a history, what
reached the workflow and what its code decided, in the team's words.

One replay with a probe (``oma.worker.replay_probe``): after each workflow
task, the commands the code answered with (tasks dispatched as children,
model turns and tool calls as activities, timers, signals, the run's end) and,
for a ``TeamRun``, the run events the task added (its ``events`` query: a
task dispatched, completed, failed, skipped or retried, an approval asked or
decided, the plan ready, a budget passed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC
from typing import Any

from rich.text import Text

from oma.cli.common import console, run_async, run_text
from oma.cli.debug import words
from oma.cli.debug.history import Debugged
from oma.cli.debug.session import replay
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema.errors import ReplayMismatchError
from oma.worker.replay_probe import Activation, ReplayProbe

RUN_EVENTS = {
    "run_start": "the run started",
    "plan_ready": "the plan is ready",
    "task_start": "task {task} dispatched",
    "task_complete": "task {task} completed",
    "task_failed": "task {task} failed",
    "task_skipped": "task {task} skipped",
    "task_retry": "task {task} will be retried",
    "shard_start": "a shard started",
    "shard_end": "a shard ended",
    "budget_exceeded": "the run passed its budget",
    "approval_request": "approval asked",
    "approval_decision": "approval decided",
    "approval_refused": "a decision refused",
    "abort": "the run was aborted",
    "warning": "warning",
    "run_end": "the run ended",
}


@dataclass
class Step:
    """One workflow task: ``workflow_task`` is its ``WorkflowTaskStarted``
    event id, ``arrived`` what reached the workflow since the previous one,
    ``decided`` what the code did (run events first, then commands)."""

    workflow_task: int
    time: str
    arrived: list[str] = field(default_factory=list)
    decided: list[str] = field(default_factory=list)


def run_event(event: dict[str, Any]) -> str:
    """A ``TeamRun``'s run event (its ``events`` query) in words."""
    kind = str(event.get("type"))
    said = RUN_EVENTS.get(kind, kind).format(task=event.get("task_id"))
    detail = str(event.get("detail") or "")
    if kind == "task_skipped":  # (a skip's reason says 'skipped: ...' itself)
        detail = detail.removeprefix("skipped: ")
    return f"{said}: {detail}" if detail else said


async def trace(debugged: Debugged) -> list[Step]:
    """The steps of ``debugged``'s history. Raises ``ReplayMismatchError``
    when the current code does not replay it (the steps so far in its
    message)."""
    history = debugged.history
    wid = debugged.workflow_id
    team_run = debugged.workflow_type == WorkflowName.TEAM_RUN
    steps: list[Step] = []
    seen = {"seq": -1, "event": 0}

    def _updates_after(started: int) -> list[Any]:
        # an update comes with the workflow task that handles it; its
        # acceptance is recorded after that task completes
        found = []
        for event in history.events[started:]:
            if event.HasField("workflow_task_started_event_attributes"):
                break
            if event.HasField("workflow_execution_update_accepted_event_attributes"):
                found.append(event)
        return found

    def observe(activation: Activation, query: Callable[..., Any]) -> None:
        started = activation.history_length
        event = history.events[started - 1]
        step = Step(started, event.event_time.ToDatetime(tzinfo=UTC).isoformat())
        for arrived in [*history.events[seen["event"] : started], *_updates_after(started)]:
            said = words.arrived(arrived, wid)
            if said is not None and (
                arrived.event_id > started
                or not arrived.HasField("workflow_execution_update_accepted_event_attributes")
            ):
                step.arrived.append(said)
        seen["event"] = started
        if team_run:
            new = query(QueryName.EVENTS, seen["seq"])
            if isinstance(new, list):
                for run_ev in new:
                    step.decided.append(run_event(run_ev))
                    seen["seq"] = max(seen["seq"], int(run_ev.get("seq", -1)))
        for command in activation.commands:
            said = words.issued(command, wid)
            if said is not None:
                step.decided.append(said)
        if activation.failure:
            step.decided.append(f"the workflow task failed: {activation.failure}")
        steps.append(step)

    # (untimed: the queries after each workflow task count as its time, oma.cli.debug.state)
    result = await replay(debugged, ReplayProbe(on_activation=observe), debug_mode=True)
    if result.replay_failure is not None:
        raise ReplayMismatchError(
            f"{debugged.source} no longer replays against the current workflow code after "
            f"{len(steps)} workflow task(s): {result.replay_failure} "
            "(`oma replay` without --trace says why)"
        )
    return steps


def print_trace(debugged: Debugged, as_json: bool) -> None:
    """``--trace``: the steps, for a person (or as JSON: a list of steps)."""
    steps = run_async(trace(debugged))
    if as_json:
        print(json.dumps([asdict(s) for s in steps], indent=2))
        return
    console.print(
        run_text(
            f"{debugged.workflow_type} {debugged.workflow_id}: {len(steps)} workflow tasks, "
            f"{len(debugged.history.events)} events"
        )
    )
    for step in steps:
        console.print(
            Text.assemble((f"event {step.workflow_task}", "bold"), " ", run_text(step.time, "dim"))
        )
        for said in step.arrived:
            console.print(Text.assemble("  ", ("<", "cyan"), " ", run_text(said)))
        for said in step.decided:
            console.print(Text.assemble("  ", (">", "green"), " ", run_text(said)))
