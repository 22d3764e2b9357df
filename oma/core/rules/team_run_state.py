"""What a ``TeamRun`` does with its state (``oma.core.schema.run_state``):
why it stopped early (``RunStop``), what it carries when it continues as new
(``carried``) and which outputs its waiting tasks read (``read_next``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Literal

from oma.core.rules.payload_fit import fit
from oma.core.rules.task_graph import SPEC_FIELDS
from oma.core.schema.errors import (
    AbortedError,
    ApprovalRejectedError,
    BudgetExceededError,
    CostBudgetExceededError,
    RunCancelledError,
    RunStateTooLargeError,
    RunStoppedError,
    RunTimeoutError,
)
from oma.core.schema.limits import MAX_EVENT_DETAIL_CHARS, cut_text, json_size
from oma.core.schema.results import AgentRunResult, TeamRunStatus
from oma.core.schema.run_events import EVENTS_CARRIED
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import TERMINAL_STATUSES, TaskSpec, TaskState

CANCELLED_REASON = "the run was cancelled"
"""Why a run cancelled through Temporal (``temporal workflow cancel``) stopped:
after ``skipped: ``, the error of the tasks it never started. The run returns
no result: ``oma show`` reads its tasks' reasons back from its history."""

CANCELLED_WITH_RUN = "cancelled with the run"
"""The error (``CANCELLED``) of a task whose ``AgentRun`` the run's
cancellation cancelled (or cut short without a reason of its own)."""

StopKind = Literal["aborted", "rejected", "budget", "cost_budget", "timeout", "too_large"]
"""Why a run stopped early (a Temporal cancellation aside)."""

STOPS: dict[StopKind, tuple[TeamRunStatus, type[RunStoppedError]]] = {
    "aborted": ("cancelled", AbortedError),
    "rejected": ("rejected", ApprovalRejectedError),
    "budget": ("failed", BudgetExceededError),
    "cost_budget": ("failed", CostBudgetExceededError),
    "timeout": ("failed", RunTimeoutError),
    "too_large": ("failed", RunStateTooLargeError),
}
"""How a run that stopped early ends: its status and the error of its ``error_code``."""


class RunStop:
    """Why a run stopped early, if it did; the first stop wins. (Not carried:
    a run that stops does not continue as new.)"""

    def __init__(self) -> None:
        self.kind: StopKind | None = None
        self.reason = ""

    @property
    def stopped(self) -> bool:
        return self.kind is not None

    def stop(self, kind: StopKind, reason: str) -> bool:
        """Stop for ``kind``; whether this call stopped the run (not an earlier one)."""
        if self.kind is not None:
            return False
        self.kind, self.reason = kind, reason
        return True

    def cut_short(self, result: AgentRunResult) -> AgentRunResult:
        """``result`` of a task the stop cancelled: ``RUN_TIMEOUT`` after
        ``options.timeout_s``, else ``CANCELLED`` (Temporal cancellation)."""
        error = RunTimeoutError if self.kind == "timeout" else RunCancelledError
        reason = self.reason or CANCELLED_WITH_RUN
        return result.model_copy(update={"error": reason, "error_code": error.code})

    def outcome(self) -> tuple[TeamRunStatus, str] | None:
        """The status and error code the run ends with, if it stopped."""
        if self.kind is None:
            return None
        status, error = STOPS[self.kind]
        return status, error.code


def carried(
    state: TeamRunState,
    run_id: str = "",
    budget: int | None = None,
    first: Collection[str] = (),
) -> dict[str, Any]:
    """``state`` as the next run's ``resume``: JSON without defaults, the
    tasks without what their specs say, the latest ``EVENTS_CARRIED``
    events (the others stay in this run's history), their details cut to
    ``MAX_EVENT_DETAIL_CHARS``.

    With a ``budget`` (bytes: what the run's budget leaves besides its
    input), fitted into it (``oma.core.rules.payload_fit``): the outputs of
    ``first`` (the tasks whose outputs waiting tasks read, ``read_next``)
    stay in first, the others may be kept by reference to the ``AgentRun``
    of the ``TeamRun`` ``run_id``. Raises ``RunStateTooLargeError`` when it
    does not fit even so.
    """
    compact = state.model_copy(update={"events": state.events[-EVENTS_CARRIED:]})
    data = compact.model_dump(
        mode="json",
        exclude_defaults=True,
        exclude={"result": {"tasks": {"__all__": set(SPEC_FIELDS)}}},
    )
    events: list[dict[str, Any]] = data.get("events", [])
    for event in events:
        if event.get("detail"):
            event["detail"] = cut_text(event["detail"], MAX_EVENT_DETAIL_CHARS)
    if budget is not None and not fit(
        data, data["result"], run_id, budget, first=first, events=events
    ):
        raise RunStateTooLargeError(
            f"the state the run would carry when it continues as new is "
            f"{json_size(data)} bytes of JSON with every output it may keep by reference "
            f"and its texts cut, over the {budget} bytes its budget leaves besides its "
            "input: split the work into runs of fewer tasks"
        )
    return data


def read_next(
    specs: Iterable[TaskSpec], states: Iterable[TaskState], *, everything: bool = False
) -> set[str]:
    """The ids of the tasks whose outputs a task still to run reads: the
    dependencies of every task that has not settled; every task when one of
    those reads the whole shared memory (``memory_scope`` ``all``) or with
    ``everything`` (a goal run's synthesis reads every output)."""
    status = {s.id: s.status for s in states}
    waiting = [t for t in specs if status.get(t.id) not in TERMINAL_STATUSES]
    if everything or any(t.memory_scope == "all" for t in waiting):
        return set(status)
    return {d for t in waiting for d in t.depends_on}
