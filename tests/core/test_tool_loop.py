"""The LLM tool loop (oma.core.rules.agent_loop) driven by fake model and tool
ports: one result per call, in order, concurrently; errors the model reads;
truncated calls; the loop detector. No Temporal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from oma.activities.tools import BUILTIN_TOOLS
from oma.core.contracts.budget import RunBudget
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.rules.agent_loop import MAX_TRUNCATED_TOOL_TURNS, run_model_loop
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import (
    BudgetExceededError,
    CostBudgetExceededError,
    ToolCallTruncatedError,
    ToolLoopError,
    UnknownToolError,
)
from oma.core.schema.messages import TextBlock, ToolResultBlock, ToolUseBlock, user_text
from oma.core.schema.pricing import ModelPrice
from oma.core.schema.results import AgentRunResult
from oma.core.schema.tools import BUILTIN_TOOL_NAMES, PRESETS
from oma.core.schema.usage import TokenUsage


def use(tool_id: str, name: str, **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=tool_id, name=name, input=args)


def asks(*uses: ToolUseBlock, stop_reason: str = "tool_use") -> LlmTurnOutput:
    return LlmTurnOutput(
        content=list(uses),
        stop_reason=stop_reason,
        usage=TokenUsage(input_tokens=3, output_tokens=2),
    )


def says(text: str) -> LlmTurnOutput:
    return LlmTurnOutput(
        content=[TextBlock(text=text)], stop_reason="end_turn", usage=TokenUsage(input_tokens=5)
    )


class Model:
    def __init__(self, *answers: LlmTurnOutput) -> None:
        self.answers = list(answers)
        self.seen: list[LlmTurnInput] = []

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        self.seen.append(inp.model_copy(deep=True))
        return self.answers.pop(0)


class Tools:
    """Answers each call from ``outputs`` (by tool name); ``gate`` holds every
    call until as many calls as it expects have started (they run at once)."""

    def __init__(self, outputs: dict[str, ToolCallOutput], concurrent: int = 1) -> None:
        self.outputs = outputs
        self.calls: list[ToolCallInput] = []
        self._concurrent = concurrent

    async def call(self, call: ToolCallInput) -> ToolCallOutput:
        self.calls.append(call)
        while len(self.calls) < self._concurrent:
            await asyncio.sleep(0)
        return self.outputs[call.tool.name]


def agent(**config: Any) -> AgentConfig:
    return AgentConfig.model_validate(
        {"name": "a", "tools": ["readonly", "tests.support.tools:add"], **config}
    )


async def run(model: Model, tools: Tools, **config: Any) -> AgentRunResult:
    result = AgentRunResult(agent="a", status="completed")
    await run_model_loop(agent(**config), [user_text("go")], model, tools, result)
    return result


async def test_each_tool_use_gets_one_result_with_its_id_in_order_and_they_run_at_once() -> None:
    model = Model(asks(use("u1", "grep", pattern="x"), use("u2", "add", a=1)), says("done"))
    tools = Tools(
        {"grep": ToolCallOutput(content="a.py:1:x"), "add": ToolCallOutput(content="2")},
        concurrent=2,
    )
    result = await asyncio.wait_for(run(model, tools), 5)

    assert result.output == "done"
    assert [(c.tool.name, c.tool.source, c.input) for c in tools.calls] == [
        ("grep", "builtin", {"pattern": "x"}),
        ("add", "tests.support.tools:add", {"a": 1}),
    ]
    results = model.seen[1].messages[-1]
    assert results.role == "user"
    assert results.content == [
        ToolResultBlock(tool_use_id="u1", content="a.py:1:x"),
        ToolResultBlock(tool_use_id="u2", content="2"),
    ]
    assert [(c.id, c.status) for c in result.tool_calls] == [
        ("u1", "completed"),
        ("u2", "completed"),
    ]
    assert (result.turns, result.token_usage.input_tokens) == (2, 8)


async def test_a_failed_tool_is_an_error_result_never_empty_and_the_loop_goes_on() -> None:
    model = Model(asks(use("u1", "add", a=1)), says("sorry"))
    tools = Tools({"add": ToolCallOutput(content=" ", is_error=True)})
    result = await run(model, tools)
    [block] = model.seen[1].messages[-1].content
    assert isinstance(block, ToolResultBlock) and block.is_error
    assert block.content == "tool 'add' failed"
    assert result.tool_calls[0].status == "failed"


async def test_a_tool_the_agent_does_not_declare_is_an_error_result_naming_its_tools() -> None:
    model = Model(asks(use("u1", "bash", command="ls")), says("ok"))
    result = await run(model, Tools({}))
    [block] = model.seen[1].messages[-1].content
    assert isinstance(block, ToolResultBlock) and block.is_error
    assert block.content == "there is no tool 'bash'; the tools are: file_read, glob, grep, add"
    assert result.output == "ok"


async def test_calls_cut_off_by_max_tokens_never_run_and_fail_the_run_after_a_bound() -> None:
    cut = asks(use("u1", "add", a=1), stop_reason="max_tokens")
    model = Model(*[cut] * (MAX_TRUNCATED_TOOL_TURNS + 1))
    tools = Tools({})
    with pytest.raises(ToolCallTruncatedError, match="cut off by max_tokens in 3 turns"):
        await run(model, tools)
    assert tools.calls == []
    [block] = model.seen[1].messages[-1].content
    assert isinstance(block, ToolResultBlock) and block.is_error
    assert block.content.startswith("not run: this call of 'add' was cut off by max_tokens")


async def test_the_same_call_repeated_stops_the_run() -> None:
    model = Model(*[asks(use(f"u{i}", "add", a=1)) for i in range(3)])
    tools = Tools({"add": ToolCallOutput(content="2")})
    with pytest.raises(ToolLoopError, match="called 'add' with the same input 3 times"):
        await run(model, tools, max_repeated_tool_calls=3)
    assert len(tools.calls) == 2


async def test_a_tool_call_from_an_agent_without_tools_fails_the_run() -> None:
    model = Model(asks(use("u1", "bash", command="ls")))
    result = AgentRunResult(agent="a", status="completed")
    bare = AgentConfig(name="a")
    with pytest.raises(UnknownToolError, match="declares no tools"):
        await run_model_loop(bare, [user_text("go")], model, Tools({}), result)


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        (["bahs"], "unknown tool 'bahs'"),
        (
            ["tests.support.tools:add", "other.module:add"],
            "has the name of tool 'tests.support.tools:add'",
        ),
    ],
)
def test_unknown_or_clashing_tools_are_an_input_error(tools: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        AgentConfig.model_validate({"name": "a", "tools": tools})


def test_allowed_and_disallowed_narrow_the_declared_tools() -> None:
    config = agent(allowed_tools=["grep", "add", "file_read"], disallowed_tools=["file_read"])
    assert [t.name for t in config.resolved_tools()] == ["grep", "add"]
    with pytest.raises(ValueError, match="disallowed_tools names 'bash'"):
        agent(disallowed_tools=["bash"])


def test_the_core_names_exactly_the_built_in_tools() -> None:
    assert set(BUILTIN_TOOLS) == set(BUILTIN_TOOL_NAMES)
    assert all(set(names) <= set(BUILTIN_TOOLS) for names in PRESETS.values())


async def test_the_token_budget_stops_the_loop_before_more_tool_calls_not_a_final_answer() -> None:
    model = Model(*[asks(use(f"u{i}", "add", a=i)) for i in range(5)])
    tools = Tools({"add": ToolCallOutput(content="ok")})
    result = AgentRunResult(agent="a", status="completed")
    with pytest.raises(BudgetExceededError, match="used 10 tokens, the 9 left"):
        budget = RunBudget(tokens=9)
        await run_model_loop(agent(), [user_text("go")], model, tools, result, budget)
    assert (result.turns, len(tools.calls), result.budget_exceeded) == (2, 1, True)
    answered = AgentRunResult(agent="a", status="completed")
    await run_model_loop(
        agent(), [user_text("go")], Model(says("enough")), tools, answered, RunBudget(tokens=1)
    )
    assert (answered.output, answered.budget_exceeded) == ("enough", False)


def costs(usd: float, *uses: ToolUseBlock) -> LlmTurnOutput:
    return asks(*uses).model_copy(update={"usage": TokenUsage(input_tokens=3, cost_usd=usd)})


async def test_the_cost_budget_stops_the_loop_before_more_tool_calls_not_a_final_answer() -> None:
    model = Model(*[costs(0.25, use(f"u{i}", "add", a=i)) for i in range(5)])
    tools = Tools({"add": ToolCallOutput(content="ok")})
    result = AgentRunResult(agent="a", status="completed")
    with pytest.raises(CostBudgetExceededError, match=r"spent \$0.50 of the \$0.40 left to it"):
        await run_model_loop(
            agent(), [user_text("go")], model, tools, result, RunBudget(cost_usd=0.4)
        )
    assert (result.turns, len(tools.calls), result.budget_exceeded) == (2, 1, True)
    assert result.token_usage.cost_usd == 0.5


async def test_each_turn_carries_the_runs_price_overrides_to_the_model() -> None:
    model = Model(says("hi"))
    prices = {"llama3": ModelPrice(input=1, output=2)}
    result = AgentRunResult(agent="a", status="completed")

    await run_model_loop(agent(), [user_text("go")], model, Tools({}), result, None, prices)

    assert model.seen[0].pricing == prices
