"""The LLM agent's loop, written once: model turns and tool calls.

Inside a workflow each model turn is the ``llm_turn`` activity and each tool
call a ``tool_call`` activity; outside one (``Agent.run``) they are direct
calls of the provider adapter and the tool. The loop does not know which: it
is handed a ``ModelPort`` and a ``ToolsetPort`` (the way Pydantic AI's
Temporal integration wraps a model and its toolsets). It is deterministic, so
it may run in workflow code.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from oma.core.contracts.budget import RunBudget
from oma.core.contracts.llm import LlmTurnInput
from oma.core.contracts.ports import ModelPort, ToolsetPort
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.approvals import canonical_json
from oma.core.schema.errors import (
    MaxTurnsExceededError,
    ToolCallTruncatedError,
    ToolLoopError,
    UnknownToolError,
)
from oma.core.schema.mcp import McpCall
from oma.core.schema.messages import LLMMessage, ToolResultBlock, ToolUseBlock, text_of
from oma.core.schema.pricing import ModelPrice
from oma.core.schema.results import AgentRunResult, ToolCallRecord
from oma.core.schema.tools import ToolRef, ToolTraits

MAX_TRUNCATED_TOOL_TURNS = 2
"""Model turns cut off by ``max_tokens`` in their tool calls that a run
tolerates (each time the model is told and asked again) before it fails."""


async def run_model_loop(
    agent: AgentConfig,
    messages: list[LLMMessage],
    model: ModelPort,
    tools: ToolsetPort,
    result: AgentRunResult,
    budget: RunBudget | None = None,
    pricing: dict[str, ModelPrice] | None = None,
) -> None:
    """Run ``agent`` on ``messages`` until it answers without asking for a tool.

    An agent with ``mcp_servers`` first lists their tools through ``tools``
    (once per run; the model sees them as ``<server>__<tool>``). Each turn's
    ``tool_use`` blocks run through ``tools``, concurrently; the
    next user message holds exactly one ``tool_result`` per ``tool_use``,
    same id, same order. A tool the agent does not declare, or one that
    failed, is an ``is_error`` result the model can act on; a ``tool_use``
    cut off by ``max_tokens`` never runs (the model is told).

    Updates ``result`` as it goes (``turns``, ``token_usage``, ``messages``
    with every turn appended, ``tool_calls``, and ``output``: the final
    answer's text), so a failure leaves the partial result behind.
    ``messages`` is not mutated.

    ``budget``: the tokens (``TokenUsage.total_tokens``) and dollars the run
    may use; a turn that used them up and asks for tools stops the loop
    (``BudgetExceededError``, ``CostBudgetExceededError``; a final answer is
    kept), so a team run's ``options.max_token_budget`` and
    ``options.max_cost_usd`` hold within a tool loop too. ``pricing``: the
    run's price overrides (``options.pricing``), sent with every turn to the
    model port, which prices the turn's usage (``oma.core.schema.pricing``).

    Raises ``UnknownToolError`` when the model asks for a tool and the agent
    declares none, ``ToolCallTruncatedError`` after more than
    ``MAX_TRUNCATED_TOOL_TURNS`` cut-off turns, ``ToolLoopError`` when the
    same call repeats ``agent.max_repeated_tool_calls`` times,
    ``MaxTurnsExceededError`` after ``agent.max_turns`` turns without an
    answer, and whatever ``model`` raises.
    """
    run_key = ""
    if agent.mcp_servers:
        # listed once per agent run, by an activity: the history holds the list
        custom = {
            ref.name: ref.source
            for ref in agent.resolved_tools()
            if ref.source != "builtin" and not ref.source.startswith("mcp:")
        }
        listing = await tools.list_mcp_tools(agent.name, agent.mcp_servers, custom)
        agent = agent.model_copy(update={"mcp_tools": listing.tools})
        run_key = listing.run_key
    declared = {ref.name: ref for ref in agent.resolved_tools()}
    conversation = list(messages)
    truncated_turns = 0
    repeats: Counter[str] = Counter()
    for turn in range(agent.max_turns):
        # other tasks in flight may have spent the run's budget meanwhile
        if (
            turn
            and budget is not None
            and (stop := budget.exceeded(agent.name, result.token_usage))
        ):
            result.budget_exceeded = True
            raise stop
        out = await model.turn(
            LlmTurnInput(agent=agent, messages=conversation, turn=turn, pricing=pricing)
        )
        result.turns = turn + 1
        result.token_usage += out.usage
        if out.recorded_from is not None:
            result.recorded_turns += 1
        conversation.append(LLMMessage(role="assistant", content=out.content))
        result.messages = conversation
        tool_uses = [b for b in out.content if isinstance(b, ToolUseBlock)]
        if not tool_uses or out.stop_reason not in ("tool_use", "max_tokens"):
            result.output = text_of(out.content)
            return
        if budget is not None and (stop := budget.exceeded(agent.name, result.token_usage)):
            result.budget_exceeded = True
            raise stop
        if not declared:
            raise UnknownToolError(
                f"the model asked for tool {tool_uses[0].name!r}, but agent "
                f"{agent.name!r} declares no tools"
            )
        if out.stop_reason == "max_tokens":
            truncated_turns += 1
            if truncated_turns > MAX_TRUNCATED_TOOL_TURNS:
                raise ToolCallTruncatedError(
                    f"agent {agent.name!r}: the model's tool calls were cut off by max_tokens "
                    f"in {truncated_turns} turns; raise max_tokens or ask for smaller steps"
                )
            outputs = [_cut_off(use) for use in tool_uses]
        else:
            _count_repeats(agent, tool_uses, repeats)
            traits = out.tool_traits
            outputs = await asyncio.gather(
                *(
                    _call(agent, declared.get(use.name), use, tools, traits, run_key)
                    for use in tool_uses
                )
            )
        result.tool_calls += [
            ToolCallRecord(
                id=use.id,
                name=use.name,
                input=use.input,
                status="failed" if output.is_error else "completed",
            )
            for use, output in zip(tool_uses, outputs, strict=True)
        ]
        conversation.append(
            LLMMessage(
                role="user",
                content=[
                    ToolResultBlock(
                        tool_use_id=use.id, content=output.content, is_error=output.is_error
                    )
                    for use, output in zip(tool_uses, outputs, strict=True)
                ],
            )
        )
    raise MaxTurnsExceededError(
        f"agent {agent.name!r} reached max_turns={agent.max_turns} without a final answer"
    )


async def _call(
    agent: AgentConfig,
    ref: ToolRef | None,
    use: ToolUseBlock,
    tools: ToolsetPort,
    traits: dict[str, ToolTraits],
    run_key: str,
) -> ToolCallOutput:
    if ref is None:
        return ToolCallOutput(
            is_error=True,
            content=f"there is no tool {use.name!r}; the tools are: "
            + ", ".join(r.name for r in agent.resolved_tools()),
        )
    output = await tools.call(
        ToolCallInput(
            agent=agent.name,
            tool=ref,
            tool_use_id=use.id,
            input=use.input,
            cwd=agent.cwd,
            max_output_chars=agent.max_tool_output_chars,
            traits=traits.get(ref.name, ToolTraits()),
            mcp=_mcp_call(agent, ref, run_key),
        )
    )
    if output.is_error and not output.content.strip():
        # an empty error tells the model nothing (and the API refuses it)
        return output.model_copy(update={"content": f"tool {use.name!r} failed"})
    return output


def _mcp_call(agent: AgentConfig, ref: ToolRef, run_key: str) -> McpCall | None:
    if not ref.source.startswith("mcp:"):
        return None
    tool = next(t for t in agent.mcp_tools or [] if t.name == ref.name)
    server = next(s for s in agent.mcp_servers or [] if s.name == tool.server)
    return McpCall(run_key=run_key, server=server, tool=tool.tool)


def _cut_off(use: ToolUseBlock) -> ToolCallOutput:
    return ToolCallOutput(
        is_error=True,
        content=f"not run: this call of {use.name!r} was cut off by max_tokens, so its input "
        "may be incomplete; make the call again, with less in one answer",
    )


def _count_repeats(agent: AgentConfig, uses: list[ToolUseBlock], repeats: Counter[str]) -> None:
    for use in uses:
        key = f"{use.name} {canonical_json(use.input)}"
        repeats[key] += 1
        if repeats[key] >= agent.max_repeated_tool_calls:
            raise ToolLoopError(
                f"agent {agent.name!r} called {use.name!r} with the same input "
                f"{repeats[key]} times (max_repeated_tool_calls={agent.max_repeated_tool_calls})"
            )
