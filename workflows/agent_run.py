"""``AgentRun``: one agent run, as a workflow.

An LLM agent runs its model loop (each turn an ``llm_turn`` activity); a
``process`` agent is one ``process_run`` activity. A failed run fails this
workflow with an ``ApplicationError`` typed with the error's code, its details
holding the partial ``AgentRunResult`` (turns and token usage so far).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from oma.acp import AcpPromptInput, AcpPromptOutput
    from oma.agent_config import AgentConfig
    from oma.backends import AcpBackendConfig, ProcessBackendConfig
    from oma.errors import (
        AgentRefusalError,
        InvalidMessageError,
        MaxTurnsExceededError,
        OMAError,
        UnknownStopReasonError,
        UnknownToolError,
        application_error,
    )
    from oma.llm import LlmTurnInput, LlmTurnOutput
    from oma.messages import LLMMessage, ToolUseBlock, text_of, user_text
    from oma.process import ProcessRunInput, ProcessRunOutput
    from oma.results import AcpSessionInfo, AgentRunResult
    from oma.run_input import AgentRunInput, parse_agent_run_input
    from oma.usage import TokenUsage
    from workflows import _options
    from workflows._acp import close_acp_sessions


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
        self._acp_queues: set[str] = set()

    @workflow.run
    async def run(self, raw_input: Any) -> AgentRunResult:
        inp = _validated(raw_input)
        self._result = AgentRunResult(agent=inp.agent.name, status="completed")
        try:
            if inp.agent.backend is None:
                await self._run_model_loop(inp.agent, inp.input)
            elif inp.agent.backend.kind == "process":
                await self._run_process(inp.agent, inp.input)
            else:
                await self._run_acp(inp)
        except OMAError as err:
            raise self._failure(err.code, err.message) from err
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, CancelledError):
                # the run was cancelled: end Canceled, not Failed
                raise asyncio.CancelledError() from err
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
        assert self._result is not None and isinstance(agent.backend, ProcessBackendConfig)
        prompt = _text_only(agent, prompt)
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

    async def _run_acp(self, inp: AgentRunInput) -> None:
        assert self._result is not None and isinstance(inp.agent.backend, AcpBackendConfig)
        info = workflow.info()
        prompt = AcpPromptInput(
            run_key=inp.run_key or f"{info.workflow_id}/{info.run_id}",
            agent=inp.agent.name,
            backend=inp.agent.backend,
            system_prompt=inp.agent.system_prompt,
            prompt=_text_only(inp.agent, inp.input),
        )
        try:
            out = await self._acp_prompt(prompt, inp.acp_session)
        finally:
            if inp.run_key is None:
                # a standalone run owns its sessions: nothing outlives it
                await close_acp_sessions(prompt.run_key, self._acp_queues)
        self._record_acp_turn(out)

    async def _acp_prompt(
        self, prompt: AcpPromptInput, session: AcpSessionInfo | None
    ) -> AcpPromptOutput:
        # Later turns go to the worker that holds the session (its own task
        # queue). If nothing picks the turn up there in time, that worker is
        # gone: open a new session on any worker, loading the old one when the
        # agent supports session/load.
        if session is not None:
            self._acp_queues.add(session.worker_task_queue)
            try:
                return await self._execute_acp_prompt(prompt, session.worker_task_queue)
            except ActivityError as err:
                if not _never_started(err):
                    raise
                workflow.logger.warning(
                    "ACP session worker %s is gone; opening a new session",
                    session.worker_task_queue,
                )
            prompt = prompt.model_copy(update={"resume_session_id": session.session_id})
        return await self._execute_acp_prompt(prompt, None)

    async def _execute_acp_prompt(
        self, prompt: AcpPromptInput, queue: str | None
    ) -> AcpPromptOutput:
        out: AcpPromptOutput = await workflow.execute_activity(
            "acp_prompt",
            prompt,
            result_type=AcpPromptOutput,
            task_queue=queue or workflow.info().task_queue,
            **(_options.ACP_PROMPT_ROUTED if queue else _options.ACP_PROMPT),
        )
        self._acp_queues.add(out.worker_task_queue)
        return out

    def _record_acp_turn(self, out: AcpPromptOutput) -> None:
        # shared/reference/external-agents.md, "ACP update / stop" mapping
        assert self._result is not None
        r = self._result
        r.turns = 1
        r.output = out.output
        r.stop_reason = out.stop_reason
        r.tool_calls = out.tool_calls
        r.permission_requests = out.permission_requests
        r.token_usage = out.token_usage
        r.acp_session = AcpSessionInfo(
            session_id=out.session_id,
            worker_task_queue=out.worker_task_queue,
            new_session=out.new_session,
            loaded_session=out.loaded_session,
        )
        if out.stop_reason in ("max_tokens", "max_turn_requests"):
            r.budget_exceeded = True
        elif out.stop_reason == "cancelled":
            r.status = "cancelled"
        elif out.stop_reason == "refusal":
            raise AgentRefusalError(f"agent {r.agent!r} refused the prompt (stopReason refusal)")
        elif out.stop_reason != "end_turn":
            raise UnknownStopReasonError(
                f"agent {r.agent!r} ended its turn with unknown stopReason {out.stop_reason!r}"
            )

    def _failure(self, code: str, message: str) -> ApplicationError:
        assert self._result is not None
        self._result.status = "failed"
        self._result.error = message
        self._result.error_code = code
        return ApplicationError(
            message, self._result.model_dump(mode="json"), type=code, non_retryable=True
        )


def _text_only(agent: AgentConfig, prompt: str | list[LLMMessage]) -> str:
    if isinstance(prompt, str):
        return prompt
    assert agent.backend is not None
    # shared/reference/structured-input.md: external backends are text only, so a
    # message list fails before any process is spawned or session opened
    raise InvalidMessageError(
        f"agent {agent.name!r} runs a {agent.backend.kind!r} backend, which takes a "
        "text prompt only; pass a string instead of a message list"
    )


def _never_started(err: ActivityError) -> bool:
    """Whether the activity timed out waiting for a worker to pick it up."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


def _validated(raw_input: Any) -> AgentRunInput:
    try:
        return parse_agent_run_input(raw_input)
    except OMAError as err:
        raise application_error(err) from None
