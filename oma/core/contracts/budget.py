"""What an agent run may still spend of its team run's budgets, shared by
the tasks in flight.

A ``TeamRun`` passes each task's ``AgentRun`` what is left of
``options.max_token_budget`` and ``options.max_cost_usd`` (``run_budget``
reads them back as a ``RunBudget``); the agent's model loop checks both after
every model turn that asks for more tool calls, so that a budget holds within
a long tool loop too, not only between tasks.

Tasks in parallel share the budget: after each model turn the task's run
reports what it used so far (``UsageReport``, the team run's ``task_usage``
signal) and waits for the team run's answer (``BudgetGrant``, the task run's
``budget`` signal): what the whole run may still spend, counting every task
in flight. Once the budget is spent every task in flight stops before its
next model turn, so a run passes its budget by at most the model turns in
flight when it was spent: one per task running.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.schema.errors import BudgetExceededError, CostBudgetExceededError, RunStoppedError
from oma.core.schema.run_input import AgentRunInput
from oma.core.schema.usage import TokenUsage, usd


class UsageReport(BaseModel):
    """An ``AgentRun``'s report to its team run (the ``task_usage`` signal):
    what its task's current attempt used so far, after its ``seq``-th model
    turn, or as it was cancelled (its team run builds the cancelled attempt's
    result from this: a cancelled workflow sends no result)."""

    task_id: str
    seq: int = Field(ge=0, description="The model turns reported so far by this attempt.")
    usage: TokenUsage = Field(description="The attempt's usage so far (not a delta).")
    backend_attempts: int = Field(default=0, ge=0, description="AgentRunResult.backend_attempts.")
    cancelled: bool = Field(default=False, description="The attempt was cancelled: no answer.")


class BudgetGrant(BaseModel):
    """A team run's answer to an ``AgentRun`` (the ``budget`` signal): what
    the whole run may still use, every task in flight counted (``None``: no
    such budget). ``seq`` answers that report; a grant sent because the
    budget is spent repeats the last seq the team run heard."""

    seq: int = Field(ge=0)
    tokens_left: int | None = Field(default=None, ge=0)
    cost_usd_left: float | None = Field(default=None, ge=0)


class RunBudget(BaseModel):
    """The tokens and dollars an agent run may still use (``None``: no limit)."""

    tokens: int | None = Field(default=None, ge=0, description="Tokens (total_tokens) left.")
    cost_usd: float | None = Field(default=None, ge=0, description="US dollars left.")

    def exceeded(self, agent: str, usage: TokenUsage) -> RunStoppedError | None:
        """The error for the first budget ``usage`` (the run's so far) used
        up: ``BudgetExceededError`` (tokens), ``CostBudgetExceededError``
        (dollars); ``None`` while both hold. The unpriced part of ``usage``
        counts no dollars (``TokenUsage.unpriced`` names it)."""
        if self.tokens is not None and usage.total_tokens >= self.tokens:
            return BudgetExceededError(
                f"agent {agent!r} used {usage.total_tokens} tokens, the {self.tokens} left of "
                "the run's token budget, and asked for more tool calls"
            )
        if self.cost_usd is not None and usage.cost_usd >= self.cost_usd:
            return CostBudgetExceededError(
                f"agent {agent!r} spent {usd(usage.cost_usd, self.cost_usd)} of the "
                f"{usd(self.cost_usd, usage.cost_usd)} left to it of the run's cost budget "
                "(options.max_cost_usd), and asked for more tool calls"
            )
        return None

    def granted(self, used: TokenUsage, grant: BudgetGrant) -> None:
        """Take the team run's ``grant`` to a run that used ``used`` so far:
        the run may use what it used plus what the whole team run has left."""
        if self.tokens is not None and grant.tokens_left is not None:
            self.tokens = used.total_tokens + grant.tokens_left
        if self.cost_usd is not None and grant.cost_usd_left is not None:
            self.cost_usd = used.cost_usd + grant.cost_usd_left


def run_budget(inp: AgentRunInput) -> RunBudget | None:
    """What the ``AgentRun`` of ``inp`` may spend: its ``token_budget`` and
    ``cost_budget_usd`` (``None``: no limit set)."""
    if inp.token_budget is None and inp.cost_budget_usd is None:
        return None
    return RunBudget(tokens=inp.token_budget, cost_usd=inp.cost_budget_usd)
