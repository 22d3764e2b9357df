"""The history ``oma replay`` debugs, and the points of it a person names.

A history comes from a file (``temporal workflow show --output json``) or from
the server, by workflow id (its latest run, or ``--run-id``'s). A point of it
is an event id or a name a person knows (``task_start:t3``,
``task_complete:t3``, ``approval:<request id>``, ``plan``, ``synthesis``);
either way the state there is the state after the workflow task that
produced the event (a command the workflow issued: a child started, an
activity scheduled) or that handled it (a result, a signal, an update that
arrived): the history is cut right after that task's ``WorkflowTaskStarted``
event and replayed, and the SDK's replayer ends such a history as a run
still open.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from oma.core.contracts.names import SignalName, UpdateName
from oma.core.contracts.workflow_ids import (
    coordinator_workflow_id,
    task_workflow_id,
)
from oma.core.schema.errors import ReplayTargetError
from oma.records.history_files import read_history_file, started

NAMED_TARGETS = (
    "task_start:TASK",
    "task_complete:TASK",
    "approval:REQUEST_ID",
    "plan",
    "synthesis",
)
"""The names ``--at`` and ``--break-at`` take besides an event id."""


@dataclass(frozen=True)
class Debugged:
    """A history to debug: ``source`` says where it came from (a file, or
    ``workflow ID``)."""

    history: WorkflowHistory
    source: str

    @property
    def workflow_id(self) -> str:
        return self.history.workflow_id

    @property
    def workflow_type(self) -> str:
        return str(started(self.history).workflow_type.name)

    @property
    def last_event_id(self) -> int:
        return int(self.history.events[-1].event_id)


@dataclass(frozen=True)
class Target:
    """A point of a history: the event named (``event_id``) and the
    ``WorkflowTaskStarted`` event of the workflow task that produced or
    handled it (``workflow_task``), where the history is cut."""

    event_id: int
    workflow_task: int
    named: str


def read_file(path: Path, workflow_id: str | None) -> Debugged:
    """An exported history (``oma.records.history_files.read_history_file``:
    its workflow id ``workflow_id``, else the one it records, else the
    file's stem). Raises ``HistoryReadError``."""
    return Debugged(read_history_file(path, workflow_id), str(path))


def cut(history: WorkflowHistory, workflow_task: int) -> WorkflowHistory:
    """The history up to and with event ``workflow_task`` (a
    ``WorkflowTaskStarted``): replayed, the run is still open there."""
    return WorkflowHistory(history.workflow_id, list(history.events[:workflow_task]))


def _event(history: WorkflowHistory, event_id: int) -> HistoryEvent:
    return history.events[event_id - 1]


def workflow_task_of(history: WorkflowHistory, event_id: int) -> int:
    """The ``WorkflowTaskStarted`` event of the workflow task that produced
    event ``event_id`` (its attributes name the ``WorkflowTaskCompleted`` it
    came with: a command's event) or, else, that handled it (the first
    workflow task started at or after it). The last workflow task when none
    starts after it (a history that ends with the run's close)."""
    event = _event(history, event_id)
    completed = _completed_by(event)
    if completed:
        attrs = _event(history, completed).workflow_task_completed_event_attributes
        return int(attrs.started_event_id)
    tasks = [
        int(e.event_id)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    ]
    later = [t for t in tasks if t >= event_id]
    return later[0] if later else tasks[-1]


def _completed_by(event: HistoryEvent) -> int:
    """The ``workflowTaskCompletedEventId`` of a command's event, else 0."""
    which = event.WhichOneof("attributes")
    if which is None:
        return 0
    attrs = getattr(event, which)
    return int(getattr(attrs, "workflow_task_completed_event_id", 0) or 0)


def resolve(debugged: Debugged, at: str) -> Target:
    """The point ``at`` names: an event id, or one of ``NAMED_TARGETS``.
    Raises ``ReplayTargetError`` when the history has no such event."""
    history = debugged.history
    last = debugged.last_event_id
    if at.strip().isdigit():
        event_id = int(at)
        if not 1 <= event_id <= last:
            raise ReplayTargetError(
                f"event {event_id} is not in the history of {debugged.workflow_id} "
                f"(events 1 to {last})"
            )
        return Target(event_id, workflow_task_of(history, event_id), f"event {event_id}")
    kind, _, name = at.partition(":")
    event_id = _named_event(debugged, kind.strip(), name.strip(), at)
    return Target(event_id, workflow_task_of(history, event_id), at)


def _named_event(debugged: Debugged, kind: str, name: str, at: str) -> int:
    wid = debugged.workflow_id
    if kind in ("task_start", "task_complete") and name:
        child = task_workflow_id(wid, name)
        found = _child_events(debugged.history, child, kind == "task_start")
        if not found:
            what = "started" if kind == "task_start" else "completed"
            raise ReplayTargetError(
                f"no AgentRun of task {name!r} {what} in the history of {wid} "
                f"(tasks seen: {', '.join(_tasks_seen(debugged)) or 'none'})"
            )
        return found[0] if kind == "task_start" else found[-1]
    if kind in ("plan", "synthesis") and not name:
        steps = ("plan", "plan-correction") if kind == "plan" else ("synthesis",)
        found = [
            e
            for step in steps
            for e in _child_events(debugged.history, coordinator_workflow_id(wid, step), False)
        ]
        if not found:
            raise ReplayTargetError(
                f"the coordinator's {kind} step did not complete in the history of {wid} "
                "(a run given tasks, or one that stopped before it)"
            )
        return max(found)
    if kind == "approval" and name:
        decided = _decisions(debugged.history)
        if name not in decided:
            seen = ", ".join(sorted(decided)) or "none"
            raise ReplayTargetError(
                f"no decision on approval request {name!r} in the history of {wid} "
                f"(decided requests: {seen})"
            )
        return decided[name]
    raise ReplayTargetError(
        f"--at {at!r} is neither an event id nor one of {', '.join(NAMED_TARGETS)}"
    )


def _child_events(history: WorkflowHistory, child_id: str, start: bool) -> list[int]:
    """The events of the child ``child_id``: its starts (``start``), else its
    successful closes."""
    initiated: set[int] = set()
    found: list[int] = []
    for event in history.events:
        if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
            attrs = event.start_child_workflow_execution_initiated_event_attributes
            if attrs.workflow_id == child_id:
                initiated.add(int(event.event_id))
                if start:
                    found.append(int(event.event_id))
        elif not start and event.HasField("child_workflow_execution_completed_event_attributes"):
            attrs_done = event.child_workflow_execution_completed_event_attributes
            if attrs_done.initiated_event_id in initiated:
                found.append(int(event.event_id))
    return found


def _tasks_seen(debugged: Debugged) -> list[str]:
    prefix = f"{debugged.workflow_id}/"
    seen = []
    for event in debugged.history.events:
        if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
            wid = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            task = wid.removeprefix(prefix)
            if wid.startswith(prefix) and "/" not in task and task not in seen:
                seen.append(task)
    return seen


def _decisions(history: WorkflowHistory) -> dict[str, int]:
    """The request ids decided by a ``decide`` signal or update (the first
    decision of each), with its event id."""
    from oma.runtime.converter import DATA_CONVERTER

    found: dict[str, int] = {}
    for event in history.events:
        payloads: Any = None
        if event.HasField("workflow_execution_signaled_event_attributes"):
            signal = event.workflow_execution_signaled_event_attributes
            if signal.signal_name in (SignalName.DECIDE, SignalName.FORWARDED_DECISION):
                payloads = signal.input.payloads
        elif event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == UpdateName.DECIDE:
                payloads = request.input.args.payloads
        if not payloads:
            continue
        try:
            decision = DATA_CONVERTER.payload_converter.from_payloads([payloads[0]])[0]
        except Exception:  # an encrypted payload: its request id cannot be read here
            continue
        if isinstance(decision, dict) and isinstance(decision.get("request_id"), str):
            found.setdefault(decision["request_id"], int(event.event_id))
    return found
