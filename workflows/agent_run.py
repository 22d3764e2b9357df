"""``AgentRun``: one agent run, as a workflow.

An LLM agent runs its model loop (each turn an ``llm_turn`` activity); a
``process`` agent is one ``process_run`` activity. A failed run fails this
workflow with an ``ApplicationError`` typed with the error's code, its details
holding the partial ``AgentRunResult`` (turns and token usage so far).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from oma.agent_config import AgentConfig
    from oma.errors import (
        InvalidMessageError,
        MaxTurnsExceededError,
        OMAError,
        UnknownToolError,
        application_error,
    )
    from oma.llm import LlmTurnInput, LlmTurnOutput
    from oma.messages import LLMMessage, ToolUseBlock, text_of, user_text
    from oma.process import ProcessRunInput, ProcessRunOutput
    from oma.results import AgentRunResult
    from oma.run_input import AgentRunInput, parse_agent_run_input
    from oma.usage import TokenUsage
    from workflows import _options


@workflow.defn(name="AgentRun")
class AgentRun:
    """Runs one agent on one input and returns an ``AgentRunResult``.

    Input: an ``AgentRunInput`` as JSON (``{"agent": {...}, "input": "text" |
    [messages]}``). It is decoded as plain JSON and validated here, so a
    malformed input started from the stock CLI fails the workflow with
    ``INVALID_RUN_INPUT`` naming the field, instead of retrying a workflow
    task that cannot decode its argument forever.
    """

    def __init__(self) -> None:
        self._result: AgentRunResult | None = None

    @workflow.run
    async def run(self, raw_input: Any) -> AgentRunResult:
        inp = _validated(raw_input)
        self._result = AgentRunResult(agent=inp.agent.name, status="completed")
        try:
            if inp.agent.backend is None:
                await self._run_model_loop(inp.agent, inp.input)
            else:
                await self._run_process(inp.agent, inp.input)
        except OMAError as err:
            raise self._failure(err.code, err.message) from err
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError):
                raise self._failure(cause.type or "ACTIVITY_FAILED", cause.message) from err
            raise self._failure("ACTIVITY_FAILED", str(cause or err)) from err
        return self._result

    @workflow.query(name="state")
    def state(self) -> AgentRunResult | None:
        """The run so far (``None`` before the input is validated)."""
        return self._result

    async def _run_model_loop(self, agent: AgentConfig, prompt: str | list[LLMMessage]) -> None:
        # The loop the tool loop extends: a turn that asks for tools gets their
        # results as the next user message; an answer without tool use ends it.
        assert self._result is not None
        messages = [user_text(prompt)] if isinstance(prompt, str) else list(prompt)
        for turn in range(agent.max_turns):
            out: LlmTurnOutput = await workflow.execute_activity(
                "llm_turn",
                LlmTurnInput(agent=agent, messages=messages, turn=turn),
                result_type=LlmTurnOutput,
                **_options.LLM_TURN,
            )
            self._result.turns = turn + 1
            self._result.token_usage += out.usage
            messages.append(LLMMessage(role="assistant", content=out.content))
            self._result.messages = messages
            tool_uses = [b for b in out.content if isinstance(b, ToolUseBlock)]
            if out.stop_reason != "tool_use" or not tool_uses:
                self._result.output = text_of(out.content)
                return
            raise UnknownToolError(
                f"the model asked for tool {tool_uses[0].name!r}, but agent "
                f"{agent.name!r} declares no tools"
            )
        raise MaxTurnsExceededError(
            f"agent {agent.name!r} reached max_turns={agent.max_turns} without a final answer"
        )

    async def _run_process(self, agent: AgentConfig, prompt: str | list[LLMMessage]) -> None:
        assert self._result is not None and agent.backend is not None
        if not isinstance(prompt, str):
            # shared/reference/structured-input.md: external backends are text only
            raise InvalidMessageError(
                f"agent {agent.name!r} runs a {agent.backend.kind!r} backend, which takes a "
                "text prompt only; pass a string instead of a message list"
            )
        out: ProcessRunOutput = await workflow.execute_activity(
            "process_run",
            ProcessRunInput(
                agent=agent.name,
                backend=agent.backend,
                system_prompt=agent.system_prompt,
                prompt=prompt,
            ),
            result_type=ProcessRunOutput,
            **_options.PROCESS_RUN,
        )
        self._result.turns = 1
        self._result.output = out.stdout
        self._result.token_usage = TokenUsage()

    def _failure(self, code: str, message: str) -> ApplicationError:
        assert self._result is not None
        self._result.status = "failed"
        self._result.error = message
        self._result.error_code = code
        return ApplicationError(
            message, self._result.model_dump(mode="json"), type=code, non_retryable=True
        )


def _validated(raw_input: Any) -> AgentRunInput:
    try:
        return parse_agent_run_input(raw_input)
    except OMAError as err:
        raise application_error(err) from None
