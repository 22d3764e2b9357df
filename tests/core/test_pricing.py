"""The price table and the pricing of a model turn (``oma.core.schema.pricing``)."""

from __future__ import annotations

import pytest

from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput, price_turn
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.messages import TextBlock, user_text
from oma.core.schema.pricing import PRICES, ModelPrice, price_of, priced
from oma.core.schema.usage import TokenUsage, usd

USAGE = TokenUsage(
    input_tokens=1_000_000,
    output_tokens=100_000,
    cache_creation_input_tokens=200_000,
    cache_read_input_tokens=2_000_000,
)


def test_claude_sonnet_4_6_costs_3_in_15_out_3_75_cache_write_0_30_cache_read() -> None:
    # 1M in + 0.1M out + 0.2M written + 2M read
    assert priced(USAGE, ["claude-sonnet-4-6"]).cost_usd == pytest.approx(3.0 + 1.5 + 0.75 + 0.60)


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "claude-opus-4-1", "gpt-4o"],
)
def test_the_table_knows_the_current_models(model: str) -> None:
    assert price_of([model]) is PRICES[model]


def test_a_dated_snapshot_or_latest_alias_has_its_models_price() -> None:
    assert price_of(["claude-sonnet-4-5-20250929"]) is PRICES["claude-sonnet-4-5"]
    assert price_of(["gpt-4o-2024-08-06"]) is PRICES["gpt-4o"]
    assert price_of(["claude-3-5-haiku-latest"]) is PRICES["claude-3-5-haiku"]
    # a longer name is another model, never priced as its prefix
    assert price_of(["claude-opus-4-7"]) is None
    assert price_of(["gpt-4o-mini"]) is PRICES["gpt-4o-mini"]


def test_an_unknown_model_is_unpriced_not_free() -> None:
    usage = priced(USAGE, ["llama3:8b"])

    assert (usage.cost_usd, usage.unpriced, usage.cost_known) == (0.0, ["model 'llama3:8b'"], False)


def test_the_runs_prices_come_first_and_price_models_the_table_lacks() -> None:
    own = {
        "claude-sonnet-4-6": ModelPrice(input=1, output=1),
        "llama3": ModelPrice(input=0.5, output=1),
    }

    assert priced(USAGE, ["claude-sonnet-4-6"], own).cost_usd == pytest.approx(
        1.0 + 0.1 + 0.2 * 1.25 + 2.0 * 0.1
    )
    # the run's price for the model asked for wins over the table's for the one that answered
    assert price_of(["claude-sonnet-4-6-20260101", "llama3"], own) is own["claude-sonnet-4-6"]
    assert price_of(["gpt-4o", "llama3"], own) is own["llama3"]


def test_unpriced_parts_add_up_once_and_known_costs_sum() -> None:
    a = TokenUsage(cost_usd=0.5, unpriced=["model 'x'"])
    b = TokenUsage(cost_usd=0.25, unpriced=["model 'x'", "process agent 'coder'"])

    total = a + b

    assert (total.cost_usd, total.unpriced) == (0.75, ["model 'x'", "process agent 'coder'"])


def test_a_turn_is_priced_by_the_model_that_answered_a_scripted_one_costs_nothing() -> None:
    agent = AgentConfig(name="a", provider="scripted", script=["hi"], model="claude-opus-4-1")
    inp = LlmTurnInput(agent=agent, messages=[user_text("go")], turn=0)
    out = LlmTurnOutput(
        content=[TextBlock(text="hi")], stop_reason="end_turn", usage=USAGE, model="scripted"
    )

    assert price_turn(inp, out).usage.cost_usd == 0.0
    assert price_turn(inp, out).usage.cost_known
    anthropic = out.model_copy(update={"model": ""})
    assert price_turn(inp, anthropic).usage.cost_usd == pytest.approx(15 + 7.5 + 3.75 + 3.0)


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (5, "$5.00"),
        (0.2, "$0.20"),
        (12.345, "$12.35"),
        (0.0005, "$0.0005"),
        (0.015, "$0.015"),
        (0.000123, "$0.00012"),
        (0.0, "$0.00"),
    ],
)
def test_money_shows_the_decimals_its_size_needs(amount: float, shown: str) -> None:
    assert usd(amount) == shown


def test_money_measured_against_a_budget_shows_the_budgets_decimals() -> None:
    assert (usd(0.0001, 0.00003), usd(0.00003, 0.0001)) == ("$0.00010", "$0.00003")
    assert usd(3.5, 0.0005) == "$3.5000"
