"""``TeamRunState``: all a ``TeamRun`` knows besides its input, as one model.

The queries read it (``state`` its ``result``, ``events`` its events,
``pending_approvals`` its open requests); continue-as-new carries it (the next
run's input ``resume``, made by ``oma.core.rules.team_run_state.carried``); a
resumed run starts from it. The task graph, the approval gate and the event
log (``oma.core.rules.task_graph``, ``oma.core.rules.approval_gate``,
``oma.core.schema.run_events``) work on its lists in place, so there is
nothing to copy in or out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from oma.core.schema.approvals import ApprovalRequest
from oma.core.schema.plan import COORDINATOR
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.usage import TokenUsage


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

    @classmethod
    def new(cls, started_at: datetime) -> TeamRunState:
        """The state of a run that starts at ``started_at``: running, no task yet."""
        return cls(
            result=TeamRunResult(success=False, status="running", tasks=[]), started_at=started_at
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
        self.result.recorded_turns += run.recorded_turns
        self.add_usage(run.token_usage)
        earlier = self.result.agent_results.get(COORDINATOR)
        summary = run.model_copy(update={"messages": []})
        if earlier is not None:
            summary.turns += earlier.turns
            summary.recorded_turns += earlier.recorded_turns
            summary.token_usage = earlier.token_usage + run.token_usage
        self.result.agent_results[COORDINATOR] = summary
