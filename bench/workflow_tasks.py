"""How long a run's workflow tasks took, read from its histories.

A workflow task's time is from its ``WorkflowTaskStarted`` event to its
``WorkflowTaskCompleted`` (or ``Failed``/``TimedOut``) event: the time a
worker spent on one activation, the local activities it ran included (they
run inside the task). The server must see it end within the workflow task
timeout (10 s by default), or it times the task out and hands the run to a
worker again (the SDK warns ``TMPRL1104`` past 5 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType

_ENDS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow_task_completed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED: "workflow_task_failed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: "workflow_task_timed_out_event_attributes",
}


@dataclass
class WorkflowTasks:
    """The workflow tasks of some histories, in the order they were added."""

    seconds: list[float] = field(default_factory=list)
    longest_at: str = ""
    """Where the longest is: its workflow id and started event id, ``wf#id``."""
    failed: int = 0
    """Tasks that failed or timed out."""

    @property
    def longest_s(self) -> float:
        return max(self.seconds, default=0.0)

    def add(self, workflow_id: str, history: Any) -> WorkflowTasks:
        """Add the workflow tasks of ``history`` (a ``WorkflowHistory`` or its events)."""
        started: dict[int, Any] = {}
        for event in getattr(history, "events", history):
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                started[event.event_id] = event
                continue
            attrs = _ENDS.get(event.event_type)
            if attrs is None:
                continue
            begin = started.pop(getattr(event, attrs).started_event_id, None)
            if begin is None:
                continue
            end, start = event.event_time.ToDatetime(), begin.event_time.ToDatetime()
            seconds = (end - start).total_seconds()
            if seconds > self.longest_s:
                self.longest_at = f"{workflow_id}#{begin.event_id}"
            self.seconds.append(seconds)
            self.failed += event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        return self

    def line(self) -> str:
        """How many, their total, the mean of the first and the last tenth (does
        a task's time grow as the run goes?) and the longest, for a bench's output."""
        n = len(self.seconds)
        tenth = max(1, n // 10)
        first = sum(self.seconds[:tenth]) / tenth
        last = sum(self.seconds[-tenth:]) / tenth
        failed = f", {self.failed} failed or timed out" if self.failed else ""
        return (
            f"{n} workflow tasks, {sum(self.seconds):.2f} s in all, the first tenth "
            f"{first * 1000:.0f} ms each, the last tenth {last * 1000:.0f} ms each, the longest "
            f"{self.longest_s * 1000:.0f} ms ({self.longest_at}){failed}"
        )
