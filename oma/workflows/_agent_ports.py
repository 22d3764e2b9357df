"""The ports of an agent run in a workflow (``oma.core.contracts.ports``): every call is
an activity.

``AgentRun`` hands them to ``oma.core.rules.agent_run.run_agent``. Each names its
activity by its stable type name, with the options of ``oma.workflows._options``;
an activity's failure comes back as the SDK's ``ActivityError``, which passes
through the run to ``AgentRun``'s failure mapping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.acp import AcpPromptInput, AcpPromptOutput
    from oma.core.contracts.llm import (
        AgentRef,
        ConversationRef,
        LlmTurnInput,
        LlmTurnOutput,
        RecordedTurns,
        agent_digest,
        agent_named,
    )
    from oma.core.contracts.mcp import (
        McpCloseRunInput,
        McpCloseRunOutput,
        McpListToolsInput,
        McpListToolsOutput,
    )
    from oma.core.contracts.names import BACKEND_ACTIVITIES, ActivityName
    from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
    from oma.core.contracts.run_hooks import BeforeRunInput, BeforeRunOutput, EvaluateInput
    from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
    from oma.core.contracts.visibility import shorten
    from oma.core.schema.agent_config import AgentConfig
    from oma.core.schema.evaluation import EvaluationRecord
    from oma.core.schema.mcp import McpServerConfig
    from oma.core.schema.messages import LLMMessage
    from oma.core.schema.providers import PROVIDERS
    from oma.core.schema.results import AcpSessionInfo
    from oma.workflows import _options, _patches
    from oma.workflows._acp import close_acp_sessions
    from oma.workflows._pinned import close_on_workers, on_owner


class ActivityModel:
    """``ModelPort``: one ``llm_turn`` activity.

    A provider whose turn needs no I/O (``oma.core.schema.providers.PROVIDERS``: the
    ``scripted`` one) runs it as a local activity (``LLM_TURN_LOCAL``): a
    marker in the history (its result, not its input) and no task queue round
    trip is all an instant, deterministic answer needs. Any other provider
    runs it as a regular activity (``LLM_TURN``: heartbeats, retries
    honouring ``retry-after``), whose input is recorded in the history at
    every turn; so it holds what repeats by reference: the conversation,
    read through this run's ``conversation`` query, and the agent's config
    (its MCP servers' listing, tool schemas, system prompt), read through
    its ``agent`` query or found in the worker's cache by its digest. The
    history then holds each message, and the listing, once.
    """

    def __init__(self) -> None:
        self.conversation: list[LLMMessage] = []
        self.agent: AgentConfig | None = None
        self.agent_sha256 = ""
        self.recorded: RecordedTurns | None = None
        """Where its turns' answers come from, when the run replays recorded turns."""

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        out: LlmTurnOutput
        self.conversation = inp.messages
        if inp.agent is not self.agent:  # the loop hands every turn the same config
            self.agent, self.agent_sha256 = inp.agent, ""
        if PROVIDERS[inp.agent.resolved_provider].needs_io:
            info = workflow.info()
            ref = ConversationRef(
                workflow_id=info.workflow_id,
                temporal_run_id=info.run_id,
                length=len(inp.messages),
            )
            update: dict[str, Any] = {"messages": [], "conversation": ref}
            if _patches.patched(_patches.AGENT_BY_REFERENCE):
                update |= {"agent": agent_named(inp.agent), "agent_ref": self._agent_ref()}
            if self.recorded is not None:
                update["recorded"] = self.recorded
            out = await workflow.execute_activity(
                ActivityName.LLM_TURN,
                inp.model_copy(update=update),
                result_type=LlmTurnOutput,
                **(_options.LLM_TURN | {"summary": _turn_summary(inp)}),
            )
        else:
            # an instant provider reads the latest message only
            # (``ProviderTraits.needs_io``): the whole conversation would be
            # serialized, scanned and decoded by every turn's local activity,
            # inside the workflow task, whose time then grew with the run
            out = await workflow.execute_local_activity(
                ActivityName.LLM_TURN,
                inp.model_copy(update={"messages": inp.messages[-1:]}),
                result_type=LlmTurnOutput,
                **(_options.LLM_TURN_LOCAL | {"summary": _turn_summary(inp)}),
            )
        return out

    def _agent_ref(self) -> AgentRef:
        assert self.agent is not None
        if not self.agent_sha256:  # once per run
            self.agent_sha256 = agent_digest(self.agent)
        info = workflow.info()
        return AgentRef(
            workflow_id=info.workflow_id, temporal_run_id=info.run_id, sha256=self.agent_sha256
        )


class ActivityTools:
    """``ToolsetPort``: one ``tool_call`` activity per call (``TOOL_CALL``).

    An agent's MCP servers are listed by ``mcp_list_tools`` on any worker,
    which then holds them (a stdio server's process, an HTTP server's
    session); their tools' calls are routed to that worker's own task queue,
    as an ACP session's turns are, and ``close`` ends them.

    ``gate`` first (the tool gate, ``oma.workflows._tool_gate``): the error
    result it gives (a rejected call) is the call's result. A call whose
    activity failed for good (its worker lost on every attempt, a timeout)
    is an ``is_error`` result the model reads, like any tool failure; a
    cancellation ends the run.
    """

    def __init__(
        self, gate: Callable[[ToolCallInput], Awaitable[ToolCallOutput | None]] | None = None
    ) -> None:
        self._gate = gate
        # where the run's stdio MCP servers live: the task queue of their
        # worker, learned from the activities' outputs (so from the history)
        self._mcp_queue: str | None = None
        self._mcp_queues: set[str] = set()
        self._run_key = ""

    async def call(self, call: ToolCallInput) -> ToolCallOutput:
        if self._gate is not None and (refused := await self._gate(call)) is not None:
            return refused
        try:
            out = await self._routed_call(call)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            return ToolCallOutput(
                content=f"the {call.tool.name} call failed: {err.cause or err}", is_error=True
            )
        if out.worker_task_queue is not None:
            self._mcp_queue = out.worker_task_queue
            self._mcp_queues.add(out.worker_task_queue)
        return out

    async def _routed_call(self, call: ToolCallInput) -> ToolCallOutput:
        # A stdio MCP server's calls go to the worker that holds it. If that
        # worker is gone, the call runs on any worker, which starts a new
        # server (and its result says so).
        return await on_owner(
            self._mcp_queue if call.mcp is not None else None,
            lambda queue: self._tool_call(call, queue),
            lambda: self._tool_call(call, None),
            "MCP server worker %s is gone",
        )

    async def _tool_call(self, call: ToolCallInput, queue: str | None) -> ToolCallOutput:
        options = _options.tool_call(call.traits.max_attempts, call.traits.retry_interval_s)
        if queue is not None:
            options |= {
                "task_queue": queue,
                "schedule_to_start_timeout": _options.MCP_SCHEDULE_TO_START,
                "retry_policy": RetryPolicy(maximum_attempts=1),
            }
        out: ToolCallOutput = await workflow.execute_activity(
            ActivityName.TOOL_CALL,
            call,
            result_type=ToolCallOutput,
            **(options | {"summary": f"{call.agent}: {call.tool.name}"}),
        )
        return out

    async def list_mcp_tools(
        self, agent: str, servers: list[McpServerConfig], custom_tools: dict[str, str]
    ) -> McpListToolsOutput:
        # the servers belong to this agent run (not its team run): it closes them
        info = workflow.info()
        out: McpListToolsOutput = await workflow.execute_activity(
            ActivityName.MCP_LIST_TOOLS,
            McpListToolsInput(
                run_key=f"{info.workflow_id}/{info.run_id}",
                agent=agent,
                servers=servers,
                custom_tools=custom_tools,
            ),
            result_type=McpListToolsOutput,
            **(_options.MCP_LIST_TOOLS | {"summary": f"{agent}: list MCP tools"}),
        )
        self._run_key = out.run_key
        if out.worker_task_queue is not None:
            self._mcp_queue = out.worker_task_queue
            self._mcp_queues.add(out.worker_task_queue)
        return out

    async def close(self) -> None:
        """Close the run's MCP servers on every worker that held one
        (``mcp_close_run``; nothing to do, and no command, for a run without
        them). A worker that is gone took its servers with it."""
        await close_on_workers(
            self._mcp_queues,
            ActivityName.MCP_CLOSE_RUN,
            McpCloseRunInput(run_key=self._run_key),
            McpCloseRunOutput,
            _options.MCP_CLOSE_RUN,
            "MCP servers",
        )
        self._mcp_queues.clear()


class ActivityBackend:
    """``BackendPort``: the ``process_run`` activity, and ``acp_prompt`` on the
    worker that holds the agent's session (docs/external-agents.md,
    "Sessions on Temporal").

    ``session`` is where an earlier turn of this agent left its session
    (``AgentRunInput.acp_session``, set by ``TeamRun``). ``owns_sessions``: a
    standalone run, whose sessions are closed (``acp_close_run`` on every
    worker that held one) as soon as its turn ended, however it ended.
    """

    def __init__(self, session: AcpSessionInfo | None, *, owns_sessions: bool) -> None:
        self._session = session
        self._owns_sessions = owns_sessions
        self._queues: set[str] = set()

    async def process_run(self, inp: ProcessRunInput) -> ProcessRunOutput:
        summary = shorten(f"{inp.agent}: run {inp.backend.command} {' '.join(inp.backend.args)}")
        out: ProcessRunOutput = await workflow.execute_activity(
            ActivityName.PROCESS_RUN,
            inp,
            result_type=ProcessRunOutput,
            **(_options.PROCESS_RUN | {"summary": summary}),
        )
        return out

    async def acp_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        try:
            return await self._routed_prompt(inp)
        finally:
            if self._owns_sessions:
                await close_acp_sessions(inp.run_key, self._queues)

    async def _routed_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        # Later turns go to the worker that holds the session. If that worker
        # is gone, a new session opens on any worker, loading the old one when
        # the agent supports session/load.
        session = self._session
        if session is None:
            return await self._acp_prompt(inp, None)
        self._queues.add(session.worker_task_queue)
        resumed = inp.model_copy(update={"resume_session_id": session.session_id})
        return await on_owner(
            session.worker_task_queue,
            lambda queue: self._acp_prompt(inp, queue),
            lambda: self._acp_prompt(resumed, None),
            "ACP session worker %s is gone; opening a new session",
        )

    async def _acp_prompt(self, inp: AcpPromptInput, queue: str | None) -> AcpPromptOutput:
        options = _options.ACP_PROMPT_ROUTED if queue else _options.ACP_PROMPT
        out: AcpPromptOutput = await workflow.execute_activity(
            ActivityName.ACP_PROMPT,
            inp,
            result_type=AcpPromptOutput,
            **(
                options
                | {
                    "summary": shorten(f"{inp.agent}: ACP prompt turn ({inp.backend.command})"),
                    "task_queue": queue or workflow.info().task_queue,
                }
            ),
        )
        self._queues.add(out.worker_task_queue)
        return out


class ActivityRunHooks:
    """``RunHooksPort``: the ``before_run`` and ``evaluate`` activities (user
    code may do I/O, so it never runs in workflow code), and the workflow's
    deterministic random for sampling, so that a replay samples the same runs."""

    async def before_run(self, agent: AgentConfig, messages: list[LLMMessage]) -> list[LLMMessage]:
        if agent.before_run is None:
            return messages
        out: BeforeRunOutput = await workflow.execute_activity(
            ActivityName.BEFORE_RUN,
            BeforeRunInput(
                agent=agent.name,
                hook=agent.before_run,
                messages=messages,
                external=agent.backend is not None,
            ),
            result_type=BeforeRunOutput,
            **(_options.USER_CODE | {"summary": f"{agent.name}: before_run hook"}),
        )
        return out.messages

    async def evaluate(self, inp: EvaluateInput) -> EvaluationRecord:
        record: EvaluationRecord = await workflow.execute_activity(
            ActivityName.EVALUATE,
            inp,
            result_type=EvaluationRecord,
            **(_options.USER_CODE | {"summary": "evaluate the run"}),
        )
        return record

    def random(self) -> float:
        return workflow.random().random()


def _turn_summary(inp: LlmTurnInput) -> str:
    agent = inp.agent
    # a scripted turn replays its script: no model answers it
    provider = agent.resolved_provider
    model = provider if provider == "scripted" else f"{provider} {agent.resolved_model}"
    return f"{agent.name}: model turn {inp.turn + 1} ({model})"


def failed_backend_attempts(err: ActivityError) -> int | None:
    """How many times the backend activity that failed with ``err`` ran, as
    far as the failure says; ``None`` for any other activity or failure.

    A ``process_run`` or ``acp_prompt`` names its attempt in its error's
    details (``{"code", "attempt"}``) and, from the second attempt on, in its
    heartbeats, whose last details a heartbeat or start-to-close timeout
    carries (no ``attempt`` there: the first attempt). One that was
    cancelled after it started ran at least once (a cancellation says no more)."""
    if err.activity_type not in BACKEND_ACTIVITIES:
        return None
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return _attempt_in(cause.details, None)
    if isinstance(cause, CancelledError):
        return 1 if err.started_event_id else None
    if isinstance(cause, TimeoutError) and cause.type in (
        TimeoutType.HEARTBEAT,
        TimeoutType.START_TO_CLOSE,
    ):
        return _attempt_in(cause.last_heartbeat_details, 1)
    return None


def _attempt_in(details: Sequence[Any], default: int | None) -> int | None:
    first = details[0] if details else None
    attempt = first.get("attempt", default) if isinstance(first, dict) else default
    return attempt if isinstance(attempt, int) else default
