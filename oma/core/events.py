"""A team run's progress events: the append-only log behind the ``events`` query."""

from __future__ import annotations

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
    "budget_exceeded",
    "approval_request",
    "approval_decision",
    "approval_refused",
    "abort",
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
