"""``oma replay RUN --at EVENT``: what the workflow held at a point of its
history, as its own queries would have answered then.

The history is cut after the workflow task of the point (``history.resolve``)
and replayed; as the replay ends, the run still open there answers its
queries: a ``TeamRun`` its ``state`` (every task's status, attempts and
output so far, the plan, usage and cost, decisions), ``shared_memory`` and
``pending_approvals``; an ``AgentRun`` its ``state`` (its result so far) and
``pending_approvals``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from typing import Any

from rich.text import Text

from oma.cli.common import console, run_text
from oma.cli.debug.history import Debugged, Target
from oma.cli.debug.session import replay
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema.errors import ReplayMismatchError
from oma.worker.replay_probe import ReplayProbe

QUERIES = {
    WorkflowName.TEAM_RUN: (QueryName.STATE, QueryName.SHARED_MEMORY, QueryName.PENDING_APPROVALS),
    WorkflowName.AGENT_RUN: (QueryName.STATE, QueryName.PENDING_APPROVALS),
}

OUTPUT_CHARS = 200
"""How much of a task's output, or a shared memory value, the terminal view shows."""


@dataclass(frozen=True)
class StateAt:
    """The answers at ``target`` (``state``, and ``shared_memory``,
    ``pending_approvals``: plain JSON data, as the queries answer)."""

    debugged: Debugged
    target: Target
    at: str
    answers: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.debugged.workflow_id,
            "workflow_type": self.debugged.workflow_type,
            "at": {
                "named": self.target.named,
                "event_id": self.target.event_id,
                "workflow_task": self.target.workflow_task,
                "time": self.at,
            },
            **self.answers,
        }


async def state_at(debugged: Debugged, target: Target) -> StateAt:
    """Replay ``debugged`` up to ``target`` and ask its queries. Raises
    ``ReplayMismatchError`` when the current code does not replay that far."""
    probe = ReplayProbe(queries=QUERIES.get(debugged.workflow_type, (QueryName.STATE,)), keep=False)
    # the queries run inside the replay's last activation: on a large run they
    # outlast the SDK's 2 s deadlock timer, which would fail the eviction again
    # and again (a hang); debug mode runs each activation inline, untimed
    result = await replay(debugged, probe, target.workflow_task, debug_mode=True)
    if result.replay_failure is not None:
        raise ReplayMismatchError(
            f"{debugged.source} no longer replays up to event {target.event_id} against the "
            f"current workflow code: {result.replay_failure} (`oma replay` without --at says why)"
        )
    event = debugged.history.events[target.workflow_task - 1]
    at = event.event_time.ToDatetime(tzinfo=UTC).isoformat()
    return StateAt(debugged, target, at, dict(probe.answers))


def print_state(found: StateAt) -> None:
    """The state on the terminal, for a person."""
    target = found.target
    console.print(
        run_text(
            f"{found.debugged.workflow_type} {found.debugged.workflow_id} at {target.named} "
            f"(event {target.event_id}; its workflow task: event {target.workflow_task}, "
            f"{found.at})"
        )
    )
    state = found.answers.get(QueryName.STATE)
    if not isinstance(state, dict):
        console.print(run_text(f"state: {state}"))
        return
    if "tasks" in state:
        _team_run(state, found.answers)
    else:
        _agent_run(state)
    pending = found.answers.get(QueryName.PENDING_APPROVALS) or []
    console.print(Text("open approval requests:", style="bold"), run_text(str(len(pending))))
    for request in pending:
        console.print(
            run_text(
                f"  {request.get('request_id')} ({request.get('boundary')}): "
                f"{request.get('reason')}"
            )
        )


def _short(text: Any) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= OUTPUT_CHARS else flat[: OUTPUT_CHARS - 1] + "…"


def _team_run(state: dict[str, Any], answers: dict[str, Any]) -> None:
    usage = state.get("total_token_usage") or {}
    tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    console.print(
        run_text(
            f"status {state.get('status')} · tokens {tokens} · cost "
            f"${float(state.get('total_cost_usd') or 0):.4f}"
            + (" · over budget" if state.get("budget_exceeded") else "")
        )
    )
    plan = state.get("plan")
    if isinstance(plan, dict):
        planned = [t.get("id") for t in plan.get("tasks") or [] if isinstance(t, dict)]
        console.print(Text("plan:", style="bold"), run_text(", ".join(map(str, planned))))
    console.print(Text("tasks:", style="bold"))
    for task in state.get("tasks") or []:
        attempts = int(task.get("attempts") or 0)
        line = f"  {task.get('id')}  {task.get('status')}  {attempts} attempt(s)"
        if task.get("error"):
            line += f"  error {task.get('error_code')}: {_short(task['error'])}"
        elif task.get("output") is not None:
            line += f"  output: {_short(task['output'])}"
        console.print(run_text(line))
    memory = answers.get(QueryName.SHARED_MEMORY) or {}
    console.print(Text("shared memory:", style="bold"), run_text(f"{len(memory)} key(s)"))
    for key, value in memory.items():
        console.print(run_text(f"  {key} = {_short(value)}"))
    decisions = state.get("approval_decisions") or []
    for decision in decisions:
        console.print(run_text(f"decided: {decision.get('request_id')} {decision.get('decision')}"))


def _agent_run(state: dict[str, Any]) -> None:
    usage = state.get("token_usage") or {}
    console.print(
        run_text(
            f"agent {state.get('agent')} · status {state.get('status')} · turns "
            f"{state.get('turns', 0)} · tokens "
            f"{int(usage.get('input_tokens') or 0) + int(usage.get('output_tokens') or 0)}"
        )
    )
    if state.get("error"):
        console.print(run_text(f"error {state.get('error_code')}: {_short(state['error'])}"))
    if state.get("output") is not None:
        console.print(run_text(f"output: {_short(state['output'])}"))
