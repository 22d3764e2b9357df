"""``AgentRun``: one agent run, as a workflow.

The run itself is ``oma.core.rules.agent_run.run_agent``, written once for this
workflow and the in-process ``Agent``; here its ports are activities
(``oma.workflows._agent_ports``): an LLM agent's model loop is ``llm_turn``
activities, a ``process`` agent one ``process_run``, an ``acp`` agent one
``acp_prompt`` turn on the worker that holds its session, and a ``before_run``
hook and an online evaluator run as activities around it. A failed run fails
this workflow with an ``ApplicationError`` typed with the error's code, its
details holding the partial ``AgentRunResult`` (turns and token usage so far).
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
)

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.budget import RunBudget, run_budget
    from oma.core.contracts.llm import ConversationSlice, RecordedTurns
    from oma.core.contracts.names import QueryName, SignalName, WorkflowName
    from oma.core.contracts.ports import AgentPorts
    from oma.core.contracts.visibility import awaiting_requests
    from oma.core.rules.agent_run import run_agent
    from oma.core.rules.approval_gate import ApprovalGate
    from oma.core.schema.agent_config import AgentConfig
    from oma.core.schema.agent_events import AgentStart
    from oma.core.schema.approvals import ApprovalDecision
    from oma.core.schema.errors import ERRORS, ActivityFailedError, OMAError
    from oma.core.schema.limits import MAX_RESULT_MESSAGES_BYTES
    from oma.core.schema.messages import LLMMessage, user_text
    from oma.core.schema.providers import PROVIDERS
    from oma.core.schema.results import AgentRunResult, keep_latest_messages
    from oma.core.schema.run_input import AgentRunInput, parse_agent_run_input
    from oma.core.schema.validation import single_input
    from oma.workflows import _patches
    from oma.workflows._agent_ports import (
        ActivityBackend,
        ActivityModel,
        ActivityRunHooks,
        ActivityTools,
        failed_backend_attempts,
    )
    from oma.workflows._approval_waits import ApprovalHandlers, ApprovalWaits
    from oma.workflows._budget import (
        BudgetedModel,
        SharedBudget,
        report_cancelled,
        shared_budget,
    )
    from oma.workflows._failures import as_failure
    from oma.workflows._tool_gate import ToolGate
    from oma.workflows._visibility import Visibility


@workflow.defn(name=WorkflowName.AGENT_RUN)
class AgentRun(ApprovalHandlers):
    """Runs one agent on one input and returns an ``AgentRunResult``.

    Input: an ``AgentRunInput`` as JSON (``{"agent": {...}, "input": "text" |
    [messages]}``). It is decoded as plain JSON and validated here, so a
    malformed input started from the stock CLI fails the workflow with
    ``INVALID_RUN_INPUT`` naming the field, instead of retrying a workflow
    task that cannot decode its argument forever.

    Gated tool calls (``approvals.tools``) wait for a decision here: the
    ``pending_approvals`` query, the ``decide`` signal and update, as a
    ``TeamRun``'s (which also lists and forwards them), and the
    ``close_approvals`` signal of the team run that stopped, and its
    ``forwarded_decision`` (a decision taken at the team run).
    """

    def __init__(self) -> None:
        self._result: AgentRunResult | None = None
        self._events: list[AgentStart] = []
        self._model = ActivityModel()
        self._decisions: list[ApprovalDecision] = []
        gate = ApprovalGate(workflow.info().workflow_id, None, [], self._decisions)
        # an agent run keeps no run events (its team run does), and its tool
        # calls wait on conditions, not on a wake-up
        self._approvals = ApprovalWaits(gate)
        self._tool_gate = ToolGate(self._approvals)  # told of every decision
        self._tools = ActivityTools(self._tool_gate.ask)
        self._budget: SharedBudget | None = None
        self._map_local_failures = False
        self._visibility = Visibility()
        self._waiting: asyncio.Task[None] | None = None  # Visibility.show_waiting

    @workflow.run
    async def run(self, *args: Any) -> AgentRunResult:
        _patches.at_start(_patched_by_parent(args))
        await self._visibility.learn()
        inp = _validated(args, self._visibility)
        agent = inp.agent
        self._visibility.identify(agent=agent.name, task=inp.task_id)
        # OmaStatus and the details follow its open tool requests (awaiting_approval)
        self._waiting = asyncio.create_task(
            self._visibility.show_waiting(self._approvals.gate, self._show_details)
        )
        self._result = AgentRunResult(agent=agent.name, status="completed")
        self._result.approval_decisions = self._decisions
        self._approvals.gate.options = inp.approvals
        self._tool_gate.task_id = inp.task_id
        self._tool_gate.attempt = inp.attempt
        budget = run_budget(inp)
        self._budget = shared_budget(budget, inp.task_id)
        # asked before any local activity (a scripted turn), not after one
        # fails: a local activity's outcome can reach a replay a workflow task
        # earlier than it reached the run, and a patch asked then would not
        # match the history
        self._map_local_failures = not PROVIDERS[
            agent.resolved_provider
        ].needs_io and _patches.patched(_patches.LOCAL_ACTIVITY_FAILURE)
        try:
            await self._run(inp, budget)
        except asyncio.CancelledError:
            self._visibility.cancelled()  # in whatever it waited on
            # a cancelled workflow sends no result: the team run learns what
            # this attempt used (its tokens, its backend's runs) from a report
            await report_cancelled(inp.task_id, self._result, self._budget)
            raise
        self._settle_conversation()
        await self._tool_gate.flush()
        self._visibility.ended(self._result.status)
        return self._result

    async def _run(self, inp: AgentRunInput, budget: RunBudget | None) -> None:
        """The run itself, its failures mapped: an ``OMAError`` or a failed
        activity fails the workflow with its code and the partial result."""
        assert self._result is not None
        agent = inp.agent
        structured = not isinstance(inp.input, str)
        messages = inp.input if isinstance(inp.input, list) else [user_text(inp.input)]
        try:
            if structured:
                agent.check_accepts_messages()
            try:
                await run_agent(
                    agent,
                    messages,
                    structured=structured,
                    run_key=_run_key(inp),
                    ports=self._ports(inp),
                    result=self._result,
                    budget=budget,
                    pricing=inp.pricing,
                )
            finally:
                await self._tools.close()  # the run's MCP servers, however it ended
        except OMAError as err:
            raise self._failure(err.code, err.message, err.retryable) from err
        except ActivityError as err:
            self._result.backend_attempts = (
                failed_backend_attempts(err) or self._result.backend_attempts
            )
            raise self._activity_failure(err.cause or err) from err
        except (ApplicationError, CancelledError, TimeoutError) as err:
            # a local activity's failure (a scripted turn) comes without the
            # ActivityError around it; runs from before the patch failed with it
            if not self._map_local_failures:
                raise
            raise self._activity_failure(err) from err

    @workflow.signal(name=SignalName.CLOSE_APPROVALS)
    def close_approvals(self, *args: Any) -> None:
        """``{reason}``: the team run stopped; open tool requests close, and
        gated calls no longer run (the model reads why)."""
        raw = args[0] if args else None
        reason = raw.get("reason") if isinstance(raw, dict) else None
        self._tool_gate.close(str(reason or "the team run stopped"))

    @workflow.signal(name=SignalName.BUDGET)
    def budget(self, *args: Any) -> None:
        """From the team run: what the run may still spend (``BudgetGrant``),
        the answer to this run's latest ``task_usage`` report."""
        if self._budget is not None and args:
            self._budget.granted(args[0])

    @workflow.signal(name=SignalName.FORWARDED_DECISION)
    def forwarded_decision(self, *args: Any) -> None:
        """From the team run: a decision a reviewer took there on a tool
        request of this run, which decides it (``ForwardedDecision``)."""
        self._tool_gate.take_forwarded(args)

    def _closed_because(self) -> str:
        return self._tool_gate.closed_because or ""

    @workflow.query(name=QueryName.STATE)
    def state(self) -> AgentRunResult | None:
        """The run so far (``None`` before the input is validated)."""
        return self._result

    @workflow.query(name=QueryName.EVENTS)
    def events(self) -> list[AgentStart]:
        """The run's progress events so far (``agent_start``)."""
        return self._events

    @workflow.query(name=QueryName.CONVERSATION)
    def conversation(self, part: ConversationSlice | None = None) -> list[LLMMessage]:
        """An LLM agent's conversation: as the latest model turn was asked it
        while the run goes (the ``llm_turn`` activity reads it here), all of
        it once the run ended. ``part`` says which messages: from ``start``
        to ``end``, as many as fit ``max_bytes`` of JSON (at least one);
        without it (``temporal workflow query --type conversation``), from
        the first, up to 1 MiB. The conversation only grows: a message once
        answered is the same at every later query of this run, so a worker
        keeps what it read (``oma.activities._conversations``)."""
        part = part or ConversationSlice()
        messages = self._model.conversation[part.start : part.end]
        size = 0
        for count, message in enumerate(messages):
            size += len(message.model_dump_json())
            if count and size > part.max_bytes:
                return messages[:count]
        return messages

    @workflow.query(name=QueryName.AGENT)
    def agent(self, sha256: str | None = None) -> AgentConfig | None:
        """The agent config an LLM agent's model turns are given, its MCP
        servers' listed tools included (``None`` before its first turn); with
        ``sha256``, only if that is its digest (``oma.core.contracts.llm.agent_digest``),
        else ``None``. The ``llm_turn`` activity reads it here
        (``oma.core.contracts.llm.AgentRef``)."""
        model = self._model
        if sha256 is not None and sha256 != model.agent_sha256:
            return None
        return model.agent

    def _ports(self, inp: AgentRunInput) -> AgentPorts:
        if inp.models is not None and inp.models.from_:  # the turns a fork replays
            self._model.recorded = RecordedTurns(
                run_id=inp.models.from_,
                temporal_run_id=inp.models.temporal_run_id,
                on_miss=inp.models.on_miss,
            )
        return AgentPorts(
            model=BudgetedModel(self._model, self._budget) if self._budget else self._model,
            tools=self._tools,
            backend=ActivityBackend(inp.acp_session, owns_sessions=inp.run_key is None),
            hooks=ActivityRunHooks(),
            on_event=self._events.append,
        )

    def _show_details(self) -> None:
        # the Web UI's detail page: the tool requests that wait, if any
        # (metadata, not a command)
        workflow.set_current_details(awaiting_requests(self._approvals.gate.open))

    def _settle_conversation(self) -> None:
        # the query keeps the whole conversation; the result, its latest part
        if self._result is not None and self._result.messages:
            self._model.conversation = list(self._result.messages)
            keep_latest_messages(self._result, MAX_RESULT_MESSAGES_BYTES)

    def _activity_failure(self, cause: BaseException) -> BaseException:
        """What an activity that failed with ``cause`` makes of the run:
        ``asyncio.CancelledError`` when it was cancelled (the run ends
        Canceled, not Failed), else the run's failure with the activity's
        code (``ACTIVITY_FAILED`` when it has none; a timeout, a lost worker
        or a hung call, is retryable)."""
        if isinstance(cause, CancelledError):
            self._visibility.ended("cancelled")
            return asyncio.CancelledError()
        if isinstance(cause, ApplicationError):
            code, message = cause.type or ActivityFailedError.code, cause.message
            if code not in ERRORS and _patches.patched(_patches.UNKNOWN_ERROR_TYPE):
                # an exception no activity maps (its class name is the type):
                # the catalogue's code, the class named in the message
                code, message = ActivityFailedError.code, f"{cause.type}: {cause.message}"
            return self._failure(code, message, not cause.non_retryable)
        retryable = isinstance(cause, TimeoutError)
        return self._failure(ActivityFailedError.code, str(cause), retryable)

    def _failure(self, code: str, message: str, retryable: bool) -> ApplicationError:
        assert self._result is not None
        self._settle_conversation()
        self._result.status = "failed"
        self._result.error = message
        self._result.error_code = code
        self._result.retryable = retryable
        self._visibility.ended("failed", code)
        return ApplicationError(
            message, self._result.model_dump(mode="json"), type=code, non_retryable=True
        )


def _run_key(inp: AgentRunInput) -> str:
    """The run that owns the agent's ACP sessions: the ``TeamRun``'s, or this run's own."""
    info = workflow.info()
    return inp.run_key or f"{info.workflow_id}/{info.run_id}"


def _patched_by_parent(args: tuple[Any, ...]) -> list[str]:
    """The input's ``patched`` as it came, before the input is validated (a
    run asks its patches before anything else; a malformed value is then
    the validation's to refuse)."""
    patched = args[0].get("patched") if len(args) == 1 and isinstance(args[0], dict) else None
    return patched if isinstance(patched, list) else []


def _validated(args: tuple[Any, ...], visibility: Visibility) -> AgentRunInput:
    # *args: a start with no input, or two, fails the run (INVALID_RUN_INPUT)
    # instead of failing its workflow task forever
    with as_failure():
        try:
            return parse_agent_run_input(single_input(args, WorkflowName.AGENT_RUN))
        except OMAError as err:
            visibility.ended("failed", err.code)
            raise
