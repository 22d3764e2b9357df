"""A team run's progress events: the append-only log behind the ``events`` query."""

from __future__ import annotations

import bisect
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

RunEventType = Literal[
    "run_start",
    "plan_ready",
    "task_start",
    "task_complete",
    "task_failed",
    "task_skipped",
    "task_retry",
    "shard_start",
    "shard_end",
    "budget_exceeded",
    "approval_request",
    "approval_decision",
    "approval_refused",
    "abort",
    "warning",
    "run_end",
]


class RunEvent(BaseModel):
    """One event of a ``TeamRun``. ``seq`` counts from 0 over the whole run
    (across continue-as-new); ``at`` is the workflow's time (UTC)."""

    seq: int
    type: RunEventType
    at: datetime
    task_id: str | None = None
    detail: str | None = Field(
        default=None,
        description="What happened, for a person: the error of task_failed, the "
        "attempt and delay of task_retry, the request id of approval events, the "
        "status of run_end.",
    )


EVENTS_KEPT = 2000
"""The ``events`` query returns at most this many of the latest events."""

EVENTS_CARRIED = 500
"""How many of the latest events a run carries when it continues as new (the
others stay in the earlier runs' histories)."""


class EventLog:
    """The append-only log of a run's events over the run state's own list.

    ``seq`` goes on from the last event of ``events`` (so it counts across
    continue-as-new); the list is trimmed to the latest ``EVENTS_KEPT`` as it
    grows (in steps, so appending stays cheap).
    """

    def __init__(self, events: list[RunEvent]) -> None:
        self.events = events

    @property
    def next_seq(self) -> int:
        return self.events[-1].seq + 1 if self.events else 0

    def add(
        self,
        kind: RunEventType,
        at: datetime,
        task_id: str | None = None,
        detail: str | None = None,
    ) -> RunEvent:
        event = RunEvent(seq=self.next_seq, type=kind, at=at, task_id=task_id, detail=detail)
        self.events.append(event)
        if len(self.events) >= EVENTS_KEPT + EVENTS_CARRIED:
            del self.events[:-EVENTS_KEPT]
        return event

    def after(self, seq: int) -> list[RunEvent]:
        """The events with ``seq`` above ``seq``, oldest first (at most ``EVENTS_KEPT``)."""
        latest = self.events[-EVENTS_KEPT:]
        first = bisect.bisect_right(latest, seq, key=lambda e: e.seq)
        return latest[first:]
