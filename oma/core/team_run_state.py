"""``TeamRunState``: all a ``TeamRun`` knows besides its input, as one model.

The queries read it (``state`` its ``result``, ``events`` its events,
``pending_approvals`` its open requests); continue-as-new carries it (the next
run's input ``resume``); a resumed run starts from it. The task graph, the
approval gate and the event log (``oma.core.task_graph``,
``oma.core.approval_gate``, ``oma.core.events``) work on its lists in place,
so there is nothing to copy in or out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from oma.core.approvals import ApprovalRequest
from oma.core.errors import (
    AbortedError,
    ApprovalRejectedError,
    BudgetExceededError,
    RunStoppedError,
    RunTimeoutError,
)
from oma.core.events import EVENTS_CARRIED, RunEvent
from oma.core.plan import COORDINATOR
from oma.core.results import AgentRunResult, TeamRunResult, TeamRunStatus
from oma.core.task_graph import SPEC_FIELDS
from oma.core.usage import TokenUsage

StopKind = Literal["aborted", "rejected", "budget", "timeout"]
"""Why a run stopped early (a Temporal cancellation aside)."""

STOPS: dict[StopKind, tuple[TeamRunStatus, type[RunStoppedError]]] = {
    "aborted": ("cancelled", AbortedError),
    "rejected": ("rejected", ApprovalRejectedError),
    "budget": ("failed", BudgetExceededError),
    "timeout": ("failed", RunTimeoutError),
}
"""How a run that stopped early ends: its status and the error of its ``error_code``."""


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

    def over_budget(self, budget: int | None) -> bool:
        """Whether the run's tokens (input + output) reached ``budget``."""
        used = self.result.total_token_usage
        return budget is not None and used.input_tokens + used.output_tokens >= budget

    def add_usage(self, usage: TokenUsage) -> None:
        self.result.total_token_usage += usage

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

    def carried(self) -> dict[str, Any]:
        """The state as the next run's ``resume``: JSON without defaults, the
        tasks without what their specs say, the latest ``EVENTS_CARRIED``
        events (the others stay in this run's history)."""
        compact = self.model_copy(update={"events": self.events[-EVENTS_CARRIED:]})
        return compact.model_dump(
            mode="json",
            exclude_defaults=True,
            exclude={"result": {"tasks": {"__all__": set(SPEC_FIELDS)}}},
        )
