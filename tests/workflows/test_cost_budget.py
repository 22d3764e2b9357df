"""Budgets in dollars: ``options.max_cost_usd``, ``options.pricing``, and each
task's ``cost_usd`` — real ``TeamRun``s on the dev server, model turns through
the real ``anthropic`` SDK against the local Messages API server, every
history replayed."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from tests.support.anthropic_server import AnthropicServer
from tests.support.runs import assert_replays, process, run_team, task

pytestmark = pytest.mark.usefixtures("worker")

CENT_A_TOKEN = {"input": 10_000, "output": 10_000}
"""A price of $0.01 per token (USD per million tokens), so that costs are round."""


def claude(name: str, model: str = "house-model") -> dict[str, Any]:
    return {"name": name, "provider": "anthropic", "model": model}


async def test_the_cost_budget_stops_the_run_once_a_task_reaches_it_and_skips_the_rest(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    for n in range(3):
        anthropic_server.reply_text(f"step {n}", input_tokens=10, output_tokens=5)

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [claude("writer")]},
            "tasks": [task("a", "writer"), task("b", "writer", "a"), task("c", "writer", "b")],
            "options": {"max_cost_usd": 0.2, "pricing": {"house-model": CENT_A_TOKEN}},
        },
    )

    assert (result.status, result.error_code, result.budget_exceeded) == (
        "failed",
        "COST_BUDGET_EXCEEDED",
        True,
    )
    assert result.error == "the cost budget of $0.20 is used up"
    assert [(t.id, t.status, t.cost_usd) for t in result.tasks] == [
        ("a", "completed", pytest.approx(0.15)),
        ("b", "completed", pytest.approx(0.15)),
        ("c", "skipped", 0.0),
    ]
    assert result.total_cost_usd == pytest.approx(0.30)
    assert result.cost_unknown == []
    assert len(anthropic_server.requests) == 2
    await assert_replays(client, workflow_id)


async def test_the_cost_budget_stops_a_tool_loop_in_the_middle_of_its_task(
    client: Client, workflow_id: str
) -> None:
    use = [{"type": "tool_use", "id": f"u{i}", "name": "add", "input": {"a": i}} for i in range(9)]
    agent = {
        "name": "adder",
        "provider": "scripted",
        "script": [[block] for block in use] + ["done"],
        "tools": ["tests.support.tools:add"],
        "max_turns": 10,
    }

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [agent]},
            "tasks": [task("loop", "adder")],
            # the scripted provider's answers are free unless the run prices them
            "options": {"max_cost_usd": 0.1, "pricing": {"scripted": CENT_A_TOKEN}},
        },
    )

    loop = result.task("loop")
    assert (loop.status, loop.error_code) == ("failed", "COST_BUDGET_EXCEEDED")
    assert "of the run's cost budget (options.max_cost_usd)" in (loop.error or "")
    assert (result.error_code, result.budget_exceeded) == ("COST_BUDGET_EXCEEDED", True)
    # the scripted provider counts words: 5 + 2 tokens the first turn, 2 each later
    # one, so the third turn reaches $0.10, well before the script's end
    assert result.total_cost_usd == pytest.approx(0.11)
    assert loop.attempts == 1 and len(loop.token_usage.unpriced) == 0
    assert loop.token_usage.cost_usd == result.total_cost_usd
    await assert_replays(client, workflow_id)


async def test_a_model_without_a_price_is_unknown_not_free(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("priced", input_tokens=1000, output_tokens=100)
    anthropic_server.reply_text("not priced", input_tokens=1000, output_tokens=100)

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [claude("known", "claude-sonnet-4-6"), claude("local", "mystery-7b")],
            },
            "tasks": [task("a", "known"), task("b", "local", "a")],
            "options": {"max_cost_usd": 10},
        },
    )

    assert result.success
    assert result.task("a").cost_usd == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    assert result.task("b").cost_usd is None
    assert result.task("b").token_usage.unpriced == ["model 'mystery-7b'"]
    assert result.total_cost_usd == result.task("a").cost_usd
    assert result.cost_unknown == ["model 'mystery-7b'"]
    await assert_replays(client, workflow_id)


async def test_a_failed_process_task_is_of_unknown_cost_too(
    client: Client, workflow_id: str
) -> None:
    failing = process("coder", "import sys; sys.exit(3)")
    result = await run_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [failing]}, "tasks": [task("code", "coder")]},
    )

    code = result.task("code")
    assert (code.status, code.error_code) == ("failed", "PROCESS_FAILED")
    assert code.cost_usd is None
    assert result.cost_unknown == ["process agent 'coder'"]
    await assert_replays(client, workflow_id)


async def test_parallel_tasks_share_the_cost_budget_and_stop_together(
    client: Client, workflow_id: str
) -> None:
    # three tool loops at once, each long enough to spend the whole budget alone
    use = [{"type": "tool_use", "id": f"u{i}", "name": "add", "input": {"a": i}} for i in range(40)]
    agent = {
        "name": "adder",
        "provider": "scripted",
        "script": [[block] for block in use] + ["done"],
        "tools": ["tests.support.tools:add"],
        "max_turns": 50,
    }

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [agent]},
            "tasks": [task(name, "adder") for name in ("a", "b", "c")],
            "options": {"max_cost_usd": 0.3, "pricing": {"scripted": CENT_A_TOKEN}},
        },
    )

    assert (result.error_code, result.budget_exceeded) == ("COST_BUDGET_EXCEEDED", True)
    assert [(t.status, t.error_code) for t in result.tasks] == [
        ("failed", "COST_BUDGET_EXCEEDED")
    ] * 3
    # a turn costs $0.02 (its first $0.07: the prompt's words); past the budget,
    # each task in flight finished at most the one turn it was in
    assert result.total_cost_usd <= 0.3 + 3 * 0.07
    assert result.total_cost_usd >= 0.3
    await assert_replays(client, workflow_id)


async def test_an_answer_naming_another_model_is_priced_by_the_agents_model(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    # a proxy that says "scripted" (free in the table) answers a priced model
    anthropic_server.reset()
    anthropic_server.reply_text("hi", input_tokens=10, output_tokens=5, model="scripted")

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [claude("writer", "claude-sonnet-4-6")]},
            "tasks": [task("a", "writer")],
        },
    )

    # the list price of claude-sonnet-4-6: $3 in, $15 out per million tokens
    assert result.task("a").cost_usd == pytest.approx((10 * 3 + 5 * 15) / 1e6)
    assert result.task("a").token_usage.unpriced == []
    await assert_replays(client, workflow_id)


async def test_a_turn_that_reports_more_tokens_than_a_turn_can_have_fails_its_task_once(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    # a hostile endpoint's count: two turns of 10**308 tokens at a price of
    # $1,000,000 a million cost more than a float holds, an infinite cost is
    # null in JSON, and the AgentRun could not read its own turn back
    anthropic_server.reset()
    anthropic_server.reply_text("huge", input_tokens=10**308)
    price = {"input": 1_000_000, "output": 1_000_000}

    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [claude("writer")]},
            "tasks": [task("a", "writer")],
            "options": {"pricing": {"house-model": price}},
        },
    )

    [a] = result.tasks
    assert (a.status, a.error_code) == ("failed", "PROVIDER_ERROR")
    assert f"reports input_tokens of {10**308}, over the 1000000000 a turn can" in (a.error or "")
    assert len(anthropic_server.requests) == 1, "not retried"
    await assert_replays(client, workflow_id)
