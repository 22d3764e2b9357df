"""What model turns cost: a price table per model, overridable per run.

A price is US dollars per million tokens for each kind of token the usage
names (``oma.core.schema.usage.TokenUsage``): input, output, prompt-cache writes and
prompt-cache reads. ``PRICES`` holds the providers' list prices of the
current Anthropic and OpenAI models as this table was written
(``PRICES_AS_OF``); a run's
``options.pricing`` adds models or replaces prices (a local model, a
negotiated rate, a price that changed). A model that neither knows is
*unpriced*: its turns count no dollars and say so (``TokenUsage.unpriced``),
never silently free.

The ``llm_turn`` activity prices each turn (``price_turn``), so the cost is
recorded in the workflow history with the turn: replaying a run never
re-prices it with a newer table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from oma.core.schema.limits import MAX_PRICE_USD
from oma.core.schema.usage import TokenUsage

MILLION = 1_000_000


class ModelPrice(BaseModel):
    """A model's price, in US dollars per million tokens (``options.pricing``'s values)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(
        ge=0,
        le=MAX_PRICE_USD,
        allow_inf_nan=False,
        description="USD per million input tokens (not from a cache).",
    )
    output: float = Field(
        ge=0, le=MAX_PRICE_USD, allow_inf_nan=False, description="USD per million output tokens."
    )
    cache_write: float | None = Field(
        default=None,
        ge=0,
        le=MAX_PRICE_USD,
        allow_inf_nan=False,
        description="USD per million tokens written to the prompt cache; default 1.25 x input "
        "(Anthropic's 5-minute cache).",
    )
    cache_read: float | None = Field(
        default=None,
        ge=0,
        le=MAX_PRICE_USD,
        allow_inf_nan=False,
        description="USD per million tokens read from the prompt cache; default 0.1 x input.",
    )

    def cost_usd(self, usage: TokenUsage) -> float:
        """What ``usage`` costs at this price, in US dollars."""
        cache_write = self.input * 1.25 if self.cache_write is None else self.cache_write
        cache_read = self.input * 0.1 if self.cache_read is None else self.cache_read
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * cache_write
            + usage.cache_read_input_tokens * cache_read
        ) / MILLION


def _price(input: float, output: float, cache_write: float, cache_read: float) -> ModelPrice:
    return ModelPrice(input=input, output=output, cache_write=cache_write, cache_read=cache_read)


PRICES_AS_OF = "2026-11"
"""When ``PRICES`` was written, from the providers' published list prices
(not fetched at run time: there may be newer ones; ``options.pricing``
replaces any of them)."""

PRICES: Mapping[str, ModelPrice] = {
    # https://docs.anthropic.com/en/docs/about-claude/pricing (cache write: 5-minute cache)
    "claude-opus-4-6": _price(5, 25, 6.25, 0.50),
    "claude-opus-4-5": _price(5, 25, 6.25, 0.50),
    "claude-opus-4-1": _price(15, 75, 18.75, 1.50),
    "claude-opus-4": _price(15, 75, 18.75, 1.50),
    "claude-sonnet-4-6": _price(3, 15, 3.75, 0.30),
    "claude-sonnet-4-5": _price(3, 15, 3.75, 0.30),
    "claude-sonnet-4": _price(3, 15, 3.75, 0.30),
    "claude-3-7-sonnet": _price(3, 15, 3.75, 0.30),
    "claude-haiku-4-5": _price(1, 5, 1.25, 0.10),
    "claude-3-5-haiku": _price(0.80, 4, 1.00, 0.08),
    "claude-3-haiku": _price(0.25, 1.25, 0.30, 0.03),
    # https://openai.com/api/pricing (no cache writes: cached input is read at its price)
    "gpt-5": _price(1.25, 10, 1.25, 0.125),
    "gpt-5-mini": _price(0.25, 2, 0.25, 0.025),
    "gpt-5-nano": _price(0.05, 0.40, 0.05, 0.005),
    "gpt-4.1": _price(2, 8, 2, 0.50),
    "gpt-4.1-mini": _price(0.40, 1.60, 0.40, 0.10),
    "gpt-4.1-nano": _price(0.10, 0.40, 0.10, 0.025),
    "gpt-4o": _price(2.50, 10, 2.50, 1.25),
    "gpt-4o-mini": _price(0.15, 0.60, 0.15, 0.075),
    "o3": _price(2, 8, 2, 0.50),
    "o4-mini": _price(1.10, 4.40, 1.10, 0.275),
    # the no-key demo's replayed answers cost nothing
    "scripted": _price(0, 0, 0, 0),
}
"""List prices by model name. A name also prices its dated snapshots and
``-latest`` alias (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``)."""

_SNAPSHOT = re.compile(r"-(\d{4}-?\d{2}-?\d{2}|latest)$")


def price_of(
    models: list[str], pricing: Mapping[str, ModelPrice] | None = None
) -> ModelPrice | None:
    """The price of the model named by ``models`` (e.g. the model that
    answered, then the one asked for): ``pricing`` (a run's
    ``options.pricing``) first, then ``PRICES``; each by a name, then by the
    name without a snapshot date or ``-latest``. ``None`` when nothing knows
    the model."""
    names = [n for model in models for n in dict.fromkeys([model, _SNAPSHOT.sub("", model)])]
    for table in (pricing or {}, PRICES):
        for name in names:
            if name in table:
                return table[name]
    return None


def priced(
    usage: TokenUsage, models: list[str], pricing: Mapping[str, ModelPrice] | None = None
) -> TokenUsage:
    """``usage`` of one model turn with its cost at ``price_of(models)``
    (empty names skipped); without a price, unpriced, naming the first model."""
    names = [model for model in models if model]
    price = price_of(names, pricing)
    if price is not None:
        return usage.model_copy(update={"cost_usd": price.cost_usd(usage), "unpriced": []})
    what = f"model {names[0]!r}" if names else "a model that gave no name"
    return usage.model_copy(update={"cost_usd": 0.0, "unpriced": [what]})
