"""``AgentRun``: one agent run, as a workflow.

An LLM agent runs its model loop (each turn an ``llm_turn`` activity); a
``process`` agent is one ``process_run`` activity; an ``acp`` agent is one
``acp_prompt`` turn on the worker that holds its session. A ``before_run``
hook and an online evaluator run as activities around it. A failed run fails this
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
    from oma.core.acp import AcpPromptInput, AcpPromptOutput, record_acp_turn
    from oma.core.agent_config import AgentConfig
    from oma.core.agent_loop import run_model_loop
    from oma.core.backends import AcpBackendConfig, ProcessBackendConfig
    from oma.core.errors import ActivityFailedError, OMAError, application_error
    from oma.core.evaluation import EvaluationRecord, is_sampled, not_sampled
    from oma.core.llm import LlmTurnInput, LlmTurnOutput
    from oma.core.message_guard import latest_user_prompt
    from oma.core.messages import LLMMessage, user_text
    from oma.core.process import ProcessRunInput, ProcessRunOutput
    from oma.core.results import AcpSessionInfo, AgentRunResult
    from oma.core.run_hooks import BeforeRunInput, BeforeRunOutput, EvaluateInput
    from oma.core.run_input import AgentRunInput, parse_agent_run_input
    from oma.core.stream import AgentStart, agent_start
    from oma.core.usage import TokenUsage
    from oma.core.validation import single_input
    from oma.workflows import _options
    from oma.workflows._acp import close_acp_sessions


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
        self._events: list[AgentStart] = []

    @workflow.run
    async def run(self, *args: Any) -> AgentRunResult:
        inp = _validated(args)
        agent = inp.agent
        self._result = AgentRunResult(agent=agent.name, status="completed")
        structured = not isinstance(inp.input, str)
        messages = inp.input if isinstance(inp.input, list) else [user_text(inp.input)]
        try:
            if structured:
                agent.check_accepts_messages()
            messages = await self._before_run(agent, messages)
            prompt = latest_user_prompt(messages)
            start = agent_start(agent.name, prompt, messages if structured else None)
            self._events.append(start)
            if agent.backend is None:
                await run_model_loop(agent, messages, _llm_turn_activity, self._result)
            elif agent.backend.kind == "process":
                await self._run_process(agent, prompt)
            else:
                await self._run_acp(inp, prompt)
            await self._evaluate(agent, start.payload)
        except OMAError as err:
            raise self._failure(err.code, err.message, err.retryable) from err
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, CancelledError):
                # the run was cancelled: end Canceled, not Failed
                raise asyncio.CancelledError() from err
            if isinstance(cause, ApplicationError):
                code = cause.type or ActivityFailedError.code
                raise self._failure(code, cause.message, not cause.non_retryable) from err
            # an activity timeout (a lost worker, a hung call) is transient
            retryable = isinstance(cause, TimeoutError)
            raise self._failure(ActivityFailedError.code, str(cause or err), retryable) from err
        return self._result

    @workflow.query(name="state")
    def state(self) -> AgentRunResult | None:
        """The run so far (``None`` before the input is validated)."""
        return self._result

    @workflow.query(name="events")
    def events(self) -> list[AgentStart]:
        """The run's progress events so far (``agent_start``)."""
        return self._events

    async def _before_run(self, agent: AgentConfig, messages: list[LLMMessage]) -> list[LLMMessage]:
        if agent.before_run is None:
            return messages
        out: BeforeRunOutput = await workflow.execute_activity(
            "before_run",
            BeforeRunInput(
                agent=agent.name,
                hook=agent.before_run,
                messages=messages,
                external=agent.backend is not None,
            ),
            result_type=BeforeRunOutput,
            **_options.USER_CODE,
        )
        return out.messages

    async def _evaluate(self, agent: AgentConfig, run_input: dict[str, Any]) -> None:
        # sampled with the workflow's deterministic random, so replay agrees
        config = agent.evaluation
        if config is None or self._result is None or self._result.status != "completed":
            return
        if not is_sampled(config.sample_rate, workflow.random().random()):
            self._result.evaluation = not_sampled(config)
            return
        self._result.evaluation = await workflow.execute_activity(
            "evaluate",
            EvaluateInput(config=config, input=run_input, output=self._result.output),
            result_type=EvaluationRecord,
            **_options.USER_CODE,
        )

    async def _run_process(self, agent: AgentConfig, prompt: str) -> None:
        assert self._result is not None and isinstance(agent.backend, ProcessBackendConfig)
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

    async def _run_acp(self, inp: AgentRunInput, prompt_text: str) -> None:
        assert self._result is not None and isinstance(inp.agent.backend, AcpBackendConfig)
        info = workflow.info()
        prompt = AcpPromptInput(
            run_key=inp.run_key or f"{info.workflow_id}/{info.run_id}",
            agent=inp.agent.name,
            backend=inp.agent.backend,
            system_prompt=inp.agent.system_prompt,
            prompt=prompt_text,
        )
        try:
            out = await self._acp_prompt(prompt, inp.acp_session)
        finally:
            if inp.run_key is None:
                # a standalone run owns its sessions: nothing outlives it
                await close_acp_sessions(prompt.run_key, self._acp_queues)
        record_acp_turn(self._result, out)

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

    def _failure(self, code: str, message: str, retryable: bool) -> ApplicationError:
        assert self._result is not None
        self._result.status = "failed"
        self._result.error = message
        self._result.error_code = code
        self._result.retryable = retryable
        return ApplicationError(
            message, self._result.model_dump(mode="json"), type=code, non_retryable=True
        )


async def _llm_turn_activity(turn: LlmTurnInput) -> LlmTurnOutput:
    if turn.agent.resolved_provider == "scripted":
        # instant and deterministic: a local activity (a marker in the
        # history, no task queue round trip) is all it needs
        scripted: LlmTurnOutput = await workflow.execute_local_activity(
            "llm_turn", turn, result_type=LlmTurnOutput, **_options.LLM_TURN_LOCAL
        )
        return scripted
    out: LlmTurnOutput = await workflow.execute_activity(
        "llm_turn", turn, result_type=LlmTurnOutput, **_options.LLM_TURN
    )
    return out


def _never_started(err: ActivityError) -> bool:
    """Whether the activity timed out waiting for a worker to pick it up."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


def _validated(args: tuple[Any, ...]) -> AgentRunInput:
    # *args: a start with no input, or two, fails the run (INVALID_RUN_INPUT)
    # instead of failing its workflow task forever
    try:
        return parse_agent_run_input(single_input(args, "AgentRun"))
    except OMAError as err:
        raise application_error(err) from None
