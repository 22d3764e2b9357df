"""A team run's budgets: what its tasks used, what the run may still spend,
and when a budget stops it.

``options.max_token_budget`` counts every token of the run
(``TokenUsage.total_tokens``: input, output and cache tokens, the
coordinator's included); ``options.max_cost_usd`` the known cost in US
dollars (what is unpriced counts nothing, ``TeamRunResult.cost_unknown``
names it). Both count what the tasks in flight reported so far
(``oma.core.contracts.budget.UsageReport``) as well as what settled. Pure bookkeeping
over the run's ``TeamRunState``: no I/O, no Temporal.
"""

from __future__ import annotations

from dataclasses import dataclass

from oma.core.contracts.budget import BudgetGrant
from oma.core.rules.team_run_state import StopKind
from oma.core.schema.results import AgentRunResult
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import TaskState
from oma.core.schema.usage import TokenUsage, usd


@dataclass(frozen=True)
class BudgetSpent:
    """A budget the run used up: how it stops (``budget``: tokens,
    ``cost_budget``: dollars), why (the run's ``error``), the
    ``budget_exceeded`` event's detail, and whether this is the first time
    it was found spent: the run's result does not say ``budget_exceeded``
    yet (the run stops then, once, and marks it)."""

    stop: StopKind
    reason: str
    detail: str
    first: bool


class TeamBudget:
    """The budgets of the run whose state is ``state``: ``tokens``
    (``options.max_token_budget``) and ``cost_usd`` (``options.max_cost_usd``),
    each ``None`` for no budget."""

    def __init__(self, state: TeamRunState, tokens: int | None, cost_usd: float | None) -> None:
        self._state = state
        self.tokens = tokens
        self.cost_usd = cost_usd

    @property
    def limited(self) -> bool:
        """Whether the run has a budget at all."""
        return self.tokens is not None or self.cost_usd is not None

    def spent(self, in_flight: TokenUsage) -> BudgetSpent | None:
        """The budget used up with ``in_flight`` (what the tasks running
        reported) counted, the token budget first; ``None`` while both hold.
        A question: the state is left as it is."""
        state = self._state
        if state.over_budget(self.tokens, in_flight):
            stop: StopKind = "budget"
            reason = f"the token budget of {self.tokens} is used up"
            detail = f"{state.tokens_used(in_flight)} tokens of {self.tokens}"
        elif self.cost_usd is not None and state.over_cost_budget(self.cost_usd, in_flight):
            used = state.cost_used(in_flight)
            stop, reason = "cost_budget", f"the cost budget of {usd(self.cost_usd)} is used up"
            detail = f"{usd(used, self.cost_usd)} of {usd(self.cost_usd, used)}"
        else:
            return None
        return BudgetSpent(stop, reason, detail, first=not state.result.budget_exceeded)

    def grant(self, seq: int, in_flight: TokenUsage) -> BudgetGrant:
        """What the run may still spend, ``in_flight`` counted, as the answer
        to a task's ``seq``-th report (0: a task's input)."""
        return BudgetGrant(
            seq=seq,
            tokens_left=self._state.tokens_left(self.tokens, in_flight),
            cost_usd_left=self._state.cost_left(self.cost_usd, in_flight),
        )


def count_attempt(state: TeamRunState, task: TaskState, result: AgentRunResult) -> None:
    """Count what one attempt of ``task`` used (``result``): its tokens and
    cost (``None`` once part of it is unpriced) and its runs of a process or
    ACP turn on the task, its usage in the run's totals."""
    task.token_usage += result.token_usage
    task.cost_usd = task.token_usage.cost_usd if task.token_usage.cost_known else None
    task.backend_attempts += result.backend_attempts
    task.recorded_turns += result.recorded_turns
    state.result.recorded_turns += result.recorded_turns
    state.add_usage(result.token_usage)
