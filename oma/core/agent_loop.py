"""The LLM agent's loop, written once.

Inside a workflow each model turn is the ``llm_turn`` activity; outside one
(``Agent.run``) it is a direct call of the provider adapter. The loop does not
know which: it is handed a ``ModelPort`` (the way Pydantic AI's Temporal
integration wraps a model). It is deterministic, so it may run in workflow code.
"""

from __future__ import annotations

from oma.core.agent_config import AgentConfig
from oma.core.errors import MaxTurnsExceededError, UnknownToolError
from oma.core.llm import LlmTurnInput
from oma.core.messages import LLMMessage, ToolUseBlock, text_of
from oma.core.ports import ModelPort
from oma.core.results import AgentRunResult


async def run_model_loop(
    agent: AgentConfig, messages: list[LLMMessage], model: ModelPort, result: AgentRunResult
) -> None:
    """Run ``agent`` on ``messages`` until it answers without asking for a tool.

    Updates ``result`` as it goes (``turns``, ``token_usage``, ``messages``
    with every assistant turn appended, and ``output``: the final answer's
    text), so a failure leaves the partial result behind. ``messages`` is
    not mutated.

    Raises ``UnknownToolError`` when the model asks for a tool (agents declare
    none yet), ``MaxTurnsExceededError`` after ``agent.max_turns`` turns
    without an answer, and whatever ``model`` raises.
    """
    conversation = list(messages)
    for turn in range(agent.max_turns):
        out = await model.turn(LlmTurnInput(agent=agent, messages=conversation, turn=turn))
        result.turns = turn + 1
        result.token_usage += out.usage
        conversation.append(LLMMessage(role="assistant", content=out.content))
        result.messages = conversation
        tool_uses = [b for b in out.content if isinstance(b, ToolUseBlock)]
        if out.stop_reason != "tool_use" or not tool_uses:
            result.output = text_of(out.content)
            return
        # The tool loop extends here: run the tools through a toolset port
        # (beside the model port), append their results as the next user
        # message, and take another turn.
        raise UnknownToolError(
            f"the model asked for tool {tool_uses[0].name!r}, but agent "
            f"{agent.name!r} declares no tools"
        )
    raise MaxTurnsExceededError(
        f"agent {agent.name!r} reached max_turns={agent.max_turns} without a final answer"
    )
