"""Where a run's workflow code records its events (``oma.core.schema.run_events``).

``RunEvents`` is what the approval waits, the adopted tool requests and
``TeamRun`` itself write to: the team run's ``EventLog`` on the workflow's
clock. An ``AgentRun`` keeps no run events (its team run does): its approval
waits write to ``NO_EVENTS``.
"""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.schema.run_events import EventLog, RunEventType


class EventSink(Protocol):
    """Records a run event: its type, the task it is about, a detail for a person."""

    def emit(
        self, kind: RunEventType, task_id: str | None = None, detail: str | None = None
    ) -> None: ...


class RunEvents:
    """``EventSink``: a team run's ``log``, each event stamped with ``workflow.now()``."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def emit(
        self, kind: RunEventType, task_id: str | None = None, detail: str | None = None
    ) -> None:
        self.log.add(kind, workflow.now(), task_id, detail)


class _NoEvents:
    """``EventSink`` of a run that keeps no run events."""

    def emit(
        self, kind: RunEventType, task_id: str | None = None, detail: str | None = None
    ) -> None:
        return None


NO_EVENTS: EventSink = _NoEvents()
"""The events of an ``AgentRun``'s approval waits: none (its team run keeps the run's)."""
