"""What an agent run may still spend of its team run's budgets.

A ``TeamRun`` passes each task's ``AgentRun`` what is left of
``options.max_token_budget`` and ``options.max_cost_usd``; the agent's model
loop checks both after every model turn that asks for more tool calls, so
that a budget holds within a long tool loop too, not only between tasks.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.errors import BudgetExceededError, CostBudgetExceededError, RunStoppedError
from oma.core.usage import TokenUsage


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
                f"agent {agent!r} spent ${usage.cost_usd:.4f}, the ${self.cost_usd:.4f} left "
                "of the run's cost budget (options.max_cost_usd), and asked for more tool calls"
            )
        return None
