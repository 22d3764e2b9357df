"""``TeamRunState``: all a ``TeamRun`` knows besides its input, as one model.

The queries read it (``state`` its ``result``, ``events`` its events,
``pending_approvals`` its open requests); continue-as-new carries it (the next
run's input ``resume``); a resumed run starts from it. The task graph, the
approval gate and the event log (``oma.core.rules.task_graph``,
``oma.core.rules.approval_gate``, ``oma.core.schema.run_events``) work on its lists in place,
so there is nothing to copy in or out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from oma.core.rules.payload_fit import fit
from oma.core.rules.task_graph import SPEC_FIELDS
from oma.core.schema.approvals import ApprovalRequest
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
from oma.core.schema.plan import COORDINATOR
from oma.core.schema.results import AgentRunResult, TeamRunResult, TeamRunStatus
from oma.core.schema.run_events import EVENTS_CARRIED, RunEvent
from oma.core.schema.task import TERMINAL_STATUSES, TaskSpec, TaskState
from oma.core.schema.usage import TokenUsage

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
        reason = self.reason or "cancelled with the run"
        return result.model_copy(update={"error": reason, "error_code": error.code})

    def outcome(self) -> tuple[TeamRunStatus, str] | None:
        """The status and error code the run ends with, if it stopped."""
        if self.kind is None:
            return None
        status, error = STOPS[self.kind]
        return status, error.code


class TeamRunState(BaseModel):
    """A team run so far. Set by ``TeamRun`` itself (as ``resume``) when it
    continues as new; not for users to write."""

    result: TeamRunResult = Field(description="The result so far; the state query shows it.")
    requests: list[ApprovalRequest] = Field(
        default_factory=list, description="The open approval requests, oldest first."
    )
    events: list[RunEvent] = Field(
        default_factory=list, description="The latest events, oldest first."
    )
    started_at: datetime
    rounds: int = Field(default=0, description="Round approvals requested so far.")
    last_round: list[str] = Field(
        default_factory=list, description="The tasks of the latest approved round."
    )
    round_robin: int = Field(
        default=0, description="Where the next round-robin assignment starts in the roster."
    )
    coordinator_turns: int = Field(
        default=0, description="Model turns the coordinator took (its script goes on from there)."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_checkpoint(cls, data: Any) -> Any:
        # Runs that continued as new before the state was one model carried
        # their tasks as `progress` and the event count as `next_seq` (the
        # last event's seq + 1, which the events themselves say).
        if isinstance(data, dict) and "progress" in data:
            legacy = {k: v for k, v in data.items() if k not in ("progress", "next_seq")}
            legacy["result"] = {**data["result"], "tasks": data["progress"]}
            return legacy
        return data

    def tokens_used(self, in_flight: TokenUsage | None = None) -> int:
        """Every token (``TokenUsage.total_tokens``) of every agent so far, the
        coordinator's included, and ``in_flight``: what the tasks running
        reported so far (``oma.core.contracts.budget.UsageReport``)."""
        extra = in_flight.total_tokens if in_flight is not None else 0
        return self.result.total_token_usage.total_tokens + extra

    def cost_used(self, in_flight: TokenUsage | None = None) -> float:
        """The known cost so far, in US dollars, ``in_flight`` included."""
        extra = in_flight.cost_usd if in_flight is not None else 0.0
        return self.result.total_cost_usd + extra

    def tokens_left(self, budget: int | None, in_flight: TokenUsage | None = None) -> int | None:
        """What ``budget`` leaves (``None``: no budget)."""
        return None if budget is None else max(budget - self.tokens_used(in_flight), 0)

    def over_budget(self, budget: int | None, in_flight: TokenUsage | None = None) -> bool:
        """Whether the run's tokens reached ``budget`` (``None``: no budget)."""
        return budget is not None and self.tokens_used(in_flight) >= budget

    def cost_left(
        self, budget_usd: float | None, in_flight: TokenUsage | None = None
    ) -> float | None:
        """What ``budget_usd`` leaves, in US dollars (``None``: no budget)."""
        return None if budget_usd is None else max(budget_usd - self.cost_used(in_flight), 0.0)

    def over_cost_budget(
        self, budget_usd: float | None, in_flight: TokenUsage | None = None
    ) -> bool:
        """Whether the run's known cost reached ``budget_usd`` (``None``: no budget)."""
        return budget_usd is not None and self.cost_used(in_flight) >= budget_usd

    def add_usage(self, usage: TokenUsage) -> None:
        """Count ``usage`` in the run's totals (tokens, cost, what is unpriced)."""
        total = self.result.total_token_usage + usage
        self.result.total_token_usage = total
        self.result.total_cost_usd = total.cost_usd
        self.result.cost_unknown = list(total.unpriced)

    def add_coordinator_run(self, run: AgentRunResult) -> None:
        """Count a coordinator step (planning, correction, synthesis): its
        turns, and its usage in the run's; ``result.agent_results["coordinator"]``
        sums the steps (messages left out)."""
        self.coordinator_turns += run.turns
        self.add_usage(run.token_usage)
        earlier = self.result.agent_results.get(COORDINATOR)
        summary = run.model_copy(update={"messages": []})
        if earlier is not None:
            summary.turns += earlier.turns
            summary.token_usage = earlier.token_usage + run.token_usage
        self.result.agent_results[COORDINATOR] = summary

    def carried(
        self, run_id: str = "", budget: int | None = None, read_next: Collection[str] = ()
    ) -> dict[str, Any]:
        """The state as the next run's ``resume``: JSON without defaults, the
        tasks without what their specs say, the latest ``EVENTS_CARRIED``
        events (the others stay in this run's history), their details cut to
        ``MAX_EVENT_DETAIL_CHARS``.

        With a ``budget`` (bytes: what the run's budget leaves besides its
        input), fitted into it (``oma.core.rules.payload_fit``): the outputs of
        ``read_next`` (the tasks whose outputs waiting tasks read) stay in
        first, the others may be kept by reference to the ``AgentRun`` of
        the ``TeamRun`` ``run_id``. Raises ``RunStateTooLargeError`` when it
        does not fit even so.
        """
        compact = self.model_copy(update={"events": self.events[-EVENTS_CARRIED:]})
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
            data, data["result"], run_id, budget, first=read_next, events=events
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
