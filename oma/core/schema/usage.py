"""Token usage and cost, named as in the Anthropic Messages API ``usage`` object.

Every provider's counts are mapped onto these names with the Anthropic
meaning: ``input_tokens`` are the input tokens read *without* the prompt cache,
``cache_creation_input_tokens`` those written to it and
``cache_read_input_tokens`` those read from it, so the three add up to the
whole prompt (the OpenAI API's ``prompt_tokens`` includes its
``cached_tokens``; its adapter subtracts them).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

MAX_TURN_TOKENS = 10**9
"""The most tokens of one kind one model turn may report (a billion, far past
any model's context): a count past it is a provider error, not a cost."""

MAX_TURN_COST_USD = 1_000_000.0
"""The most US dollars one ACP ``usage_update.cost`` may say; an amount past
it (or not a finite number) is ignored as unreadable. With both bounds, no sum
of costs a run adds up can pass what a float holds (an infinite cost is
``null`` in JSON, which no workflow can read back)."""


def usd(amount: float, scale: float | None = None) -> str:
    """``amount`` US dollars as ``$1.23``, with the decimals its size needs,
    and at least those ``scale`` needs (the budget it is measured against,
    another amount of the same message or table): two at least, more for an
    amount under a dollar, up to its second significant digit, fewer where
    the amount ends sooner. A $5 budget reads ``$5.00``, a $0.0005 one
    ``$0.0005``, $0.000123 ``$0.00012``. Every place that prints money
    goes through here, so a small budget never reads ``$0.0000``."""
    decimals = max(_decimals(amount), _decimals(scale) if scale is not None else 0)
    return f"${amount:.{decimals}f}"


MAX_DECIMALS = 8
"""Below a hundred-millionth of a dollar, ``usd`` shows zeros."""


def _decimals(amount: float) -> int:
    if not math.isfinite(amount) or amount <= 0:
        return 2
    first = -math.floor(math.log10(amount))  # the decimal of the first significant digit
    decimals = max(2, min(first, MAX_DECIMALS))
    if decimals < min(first + 1, MAX_DECIMALS) and not math.isclose(
        round(amount, decimals), amount, rel_tol=1e-9
    ):
        decimals += 1  # the second significant digit, where there is one
    return decimals


class TokenUsage(BaseModel):
    """Tokens consumed by a model turn, an agent run or a whole team run, and
    what they cost.

    ``cost_usd`` is the cost known so far, in US dollars; ``unpriced`` names
    what was used at a cost nobody knows (a model missing from the pricing
    table, an ACP agent that reports no ``usage_update.cost``), so that a
    total with unknown parts says so rather than counting them as free.
    """

    input_tokens: int = Field(default=0, ge=0, description="Input tokens not read from a cache.")
    output_tokens: int = Field(default=0, ge=0, description="Output (completion) tokens.")
    cache_creation_input_tokens: int = Field(
        default=0, ge=0, description="Input tokens written to the prompt cache."
    )
    cache_read_input_tokens: int = Field(
        default=0, ge=0, description="Input tokens read from the prompt cache."
    )
    cost_usd: float = Field(default=0.0, ge=0, description="The known cost, in US dollars.")
    unpriced: list[str] = Field(
        default_factory=list,
        description="What was used at an unknown cost (e.g. \"model 'llama3'\"), each once; "
        "empty when cost_usd is the whole cost.",
    )

    @property
    def total_tokens(self) -> int:
        """Every token the model read or wrote: input (cached or not) + output.
        Token budgets (``options.max_token_budget``) count these."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )

    @property
    def cost_known(self) -> bool:
        """Whether ``cost_usd`` is the whole cost (nothing ``unpriced``)."""
        return not self.unpriced

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced=self.unpriced + [u for u in other.unpriced if u not in self.unpriced],
        )
