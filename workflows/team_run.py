"""``TeamRun``: a team executes a task graph, as a workflow.

The life of a run, top to bottom in ``run``: validate the input; with a goal,
the coordinator plans the tasks (one correction turn when the plan is
invalid); approve the plan if asked; dispatch every task whose dependencies
completed (each an ``AgentRun`` child workflow), retrying retryable failures
and cascading the others to the dependents; with a goal, the coordinator
synthesizes the final answer; report. Approvals, ``abort``, budgets and
timeouts stop the dispatch and drain the run. A long run continues as new
before its history grows large, carrying its state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from oma.core.approvals import (
        DECISION_SHAPE,
        ApprovalDecision,
        ApprovalOptions,
        ApprovalRequest,
        Boundary,
        Decision,
        Reviewer,
        check_decision,
        request_hash,
    )
    from oma.core.dag import dependents_map, transitive_dependents
    from oma.core.errors import (
        ApprovalUnknownRequestError,
        InvalidRunInputError,
        OMAError,
        PlanValidationError,
        application_error,
    )
    from oma.core.events import RunEvent, RunEventType
    from oma.core.messages import LLMMessage, user_text
    from oma.core.plan import (
        COORDINATOR,
        CoordinatorConfig,
        coordinator_agent,
        correction_prompt,
        parse_plan,
        plan_artifact,
        plan_tasks,
        planning_prompt,
        synthesis_prompt,
    )
    from oma.core.prompt import task_prompt
    from oma.core.results import AcpSessionInfo, AgentRunResult, TeamRunResult, TeamRunStatus
    from oma.core.run_input import (
        AgentRunInput,
        TaskProgress,
        TeamRunCheckpoint,
        TeamRunInput,
        format_validation_error,
        parse_team_run_input,
        single_input,
    )
    from oma.core.scheduling import Scheduler
    from oma.core.shared_memory import shared_memory
    from oma.core.task import TaskSpec, TaskState, TaskStatus
    from oma.core.workflow_ids import coordinator_workflow_id, task_workflow_id
    from oma.workflows._acp import close_acp_sessions

EVENTS_KEPT = 2000
"""The ``events`` query returns at most this many of the latest events."""

EVENTS_CARRIED = 500
"""How many of the latest events a run carries when it continues as new (the
others stay in the earlier runs' histories)."""

Stop = Literal["aborted", "rejected", "budget", "timeout", "continue"]

STOPPED: dict[str, tuple[TeamRunStatus, str]] = {
    "aborted": ("cancelled", "ABORTED"),
    "rejected": ("rejected", "APPROVAL_REJECTED"),
    "budget": ("failed", "BUDGET_EXCEEDED"),
    "timeout": ("failed", "RUN_TIMEOUT"),
}
"""How a run that stopped early ends: its status and error code."""


@workflow.defn(name="TeamRun")
class TeamRun:
    """Runs a team over a goal, a task list or a frozen plan; returns a ``TeamRunResult``.

    Input: a ``TeamRunInput`` as JSON, decoded as plain JSON and validated
    here, so bad input fails the workflow at once, before any task runs, with
    ``INVALID_RUN_INPUT`` (a field, named by path), ``INVALID_TASK_GRAPH``,
    ``NO_ELIGIBLE_AGENT`` or ``ASSIGNEE_REQUIREMENTS_MISMATCH``; an invalid
    coordinator plan fails it with ``INVALID_PLAN``.

    Queries ``state``, ``events``, ``shared_memory``, ``pending_approvals``;
    signals ``decide`` and ``abort``; update ``decide``.
    """

    @workflow.init
    def __init__(self, *args: Any) -> None:
        # Everything is set up here, before any signal, update or query is
        # handled, so a decision sent as the run starts sees the whole state.
        self._result = TeamRunResult(success=False, status="running", tasks=[])
        self._specs: dict[str, TaskSpec] = {}
        self._states: dict[str, TaskState] = {}
        self._dependents: dict[str, list[str]] = {}
        self._waiting_on: dict[str, int] = {}
        self._scheduler: Scheduler | None = None
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._wake = False
        self._stop: Stop | None = None
        self._stop_reason = ""
        # ACP agents hold one conversation: one task at a time, in one session
        self._acp_busy: set[str] = set()
        self._acp_sessions: dict[str, AcpSessionInfo] = {}
        # approvals: every request made, the open ones, and the decisions
        self._requests: dict[str, ApprovalRequest] = {}
        self._open: dict[str, asyncio.Task[None] | None] = {}
        self._decisions: dict[str, ApprovalDecision] = {}
        self._gated: set[str] = set()  # tasks whose dispatch request is open
        self._events: deque[RunEvent] = deque(maxlen=EVENTS_KEPT)
        self._next_seq = 0
        self._rounds = 0
        self._last_round: set[str] = set()
        self._coordinator_turns = 0
        self._started_at = workflow.now()
        self._deadline: datetime | None = None
        self._deadline_watch: asyncio.Task[None] | None = None
        self._invalid: ApplicationError | None = None
        self._input: TeamRunInput | None = None
        try:
            self._input = parse_team_run_input(single_input(args, "TeamRun"))
        except OMAError as err:
            self._invalid = application_error(err)
            return
        inp = self._input
        if inp.resume is not None:
            self._restore(inp, inp.resume)
            return
        self._result.goal = inp.goal
        self._event("run_start", detail=f"goal: {inp.goal}" if inp.goal else None)
        if inp.goal is None:
            try:
                self._load(inp, inp.given_tasks())
            except OMAError as err:
                self._invalid = application_error(err)

    @workflow.run
    async def run(self, *args: Any) -> TeamRunResult:
        if self._invalid is not None:
            raise self._invalid
        inp = self._input
        assert inp is not None
        options = inp.options
        if options.timeout_s is not None:
            self._deadline = self._started_at + timedelta(seconds=options.timeout_s)
            self._watch_deadline()
        try:
            if inp.goal is not None and inp.resume is None:
                await self._until_stopped(self._plan(inp, inp.goal))
                if self._stop is None and options.plan_only:
                    return self._finish("planned")
                if self._stop is None and options.approvals and options.approvals.plan:
                    await self._approve_plan()
            if self._stop is None:
                await self._execute(inp)
            if self._stop == "continue":
                await self._close_acp_sessions()  # the next run opens its own
                workflow.continue_as_new(self._checkpoint(inp))
            self._skip_rest()
            # the synthesis starts only within budget (its own usage may pass it)
            if inp.goal is not None and self._stop is None and not self._over_budget(inp):
                await self._until_stopped(self._synthesize(inp, inp.goal))
        except asyncio.CancelledError:
            await self._drain_after_cancel()
            raise
        finally:
            await self._close_acp_sessions()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._finish()

    # -- queries, signals, updates -----------------------------------------

    @workflow.query(name="state")
    def state(self) -> TeamRunResult:
        """The run so far: every task's status and output, usage, decisions."""
        return self._result

    @workflow.query(name="events")
    def events(self, after_seq: int = -1) -> list[RunEvent]:
        """The run's events with ``seq`` above ``after_seq`` (all by default),
        oldest first; the latest ``EVENTS_KEPT`` are kept."""
        return [e for e in self._events if e.seq > after_seq]

    @workflow.query(name="shared_memory")
    def shared_memory(self) -> dict[str, str]:
        """The run's shared memory: ``<agent>/task:<id>:result`` -> output, so far."""
        return shared_memory(self._states.values())

    @workflow.query(name="pending_approvals")
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The open approval requests, oldest first."""
        return [self._requests[r] for r in self._open]

    @workflow.signal(name="abort")
    def abort(self, *args: Any) -> None:
        """``{reason}`` (optional): stop dispatching, let tasks in flight
        settle, skip the rest and the synthesis; the run completes
        ``cancelled``. Any payload aborts; a ``reason`` is recorded."""
        raw = args[0] if args else None
        reason = raw.get("reason") if isinstance(raw, dict) else None
        if self._stop in (None, "continue"):
            self._event("abort", detail=str(reason or "abort signal"))
            self._stop_with("aborted", f"aborted: {reason or 'abort signal'}")

    @workflow.signal(name="decide")
    def decide_signal(self, *args: Any) -> None:
        """A ``Decision`` sent as a signal: the same rules as the update; a
        refused decision is recorded as an ``approval_refused`` event. (Every
        handler takes ``*args``: a signal with a payload of the wrong arity
        must be refused, not fail the workflow task for good.)"""
        try:
            self._record_decision(_decision(args), "signal")
        except OMAError as err:
            raw = args[0] if len(args) == 1 else None
            request = raw.get("request_id") if isinstance(raw, dict) else None
            self._event("approval_refused", detail=f"{request or '(no request_id)'}: {err}")

    @workflow.update(name="decide")
    def decide_update(self, *args: Any) -> ApprovalDecision:
        """A ``Decision``; returns the recorded ``ApprovalDecision``. Refused
        (``APPROVAL_UNKNOWN_REQUEST``, ``APPROVAL_STALE_DECISION``,
        ``APPROVAL_CONFLICT``, ``INVALID_RUN_INPUT``) by the validator, without
        writing history, or by the handler when another decision won the race."""
        try:
            return self._record_decision(_decision(args), "update")
        except OMAError as err:
            raise application_error(err) from None

    @decide_update.validator
    def _validate_decide(self, *args: Any) -> None:
        try:
            self._check_decision(_decision(args))
        except OMAError as err:
            raise application_error(err) from None

    def _check_decision(self, decision: Decision) -> ApprovalRequest:
        """The request ``decision`` answers; raises an ``ApprovalError``."""
        request_id = decision.request_id
        # open requests, and decided ones (so a late decision is a conflict)
        decidable = {
            r: req for r, req in self._requests.items() if r in self._open or r in self._decisions
        }
        if request_id in self._requests and request_id not in decidable:
            raise ApprovalUnknownRequestError(
                f"request {request_id!r} was closed without a decision: "
                f"{self._stop_reason or 'the run stopped'}"
            )
        return check_decision(decidable, self._decisions, decision)

    def _record_decision(
        self, decision: Decision, source: Literal["update", "signal"]
    ) -> ApprovalDecision:
        request = self._check_decision(decision)
        return self._decide(request, decision.decision, decision.reviewer, decision.comment, source)

    def _decide(
        self,
        request: ApprovalRequest,
        value: Literal["approve", "reject"],
        reviewer: Reviewer,
        comment: str | None,
        source: Literal["update", "signal", "timeout"],
    ) -> ApprovalDecision:
        record = ApprovalDecision(
            request_id=request.request_id,
            boundary=request.boundary,
            request_hash=request.request_hash,
            decision=value,
            reviewer=reviewer,
            comment=comment,
            decided_at=workflow.now(),
            source=source,
        )
        self._decisions[request.request_id] = record
        self._result.approval_decisions.append(record)
        self._event(
            "approval_decision",
            _task_of(request),
            f"{request.request_id}: {value} by {reviewer.id}",
        )
        self._wake = True
        return record

    # -- approvals ---------------------------------------------------------

    def _request(self, request_id: str, boundary: Boundary, content: Any, reason: str) -> None:
        """Record an open request; its waiter starts in the main loop."""
        now = workflow.now()
        approvals = self._options_approvals()
        timeout = approvals.timeout_s if approvals else None
        self._requests[request_id] = ApprovalRequest(
            request_id=request_id,
            boundary=boundary,
            scope=workflow.info().workflow_id,
            content=content,
            reason=reason,
            requested_at=now,
            expires_at=now + timedelta(seconds=timeout) if timeout else None,
            request_hash=request_hash(workflow.info().workflow_id, boundary, content),
        )
        self._open[request_id] = None
        self._event("approval_request", _task_of(self._requests[request_id]), request_id)

    def _start_waiters(self) -> None:
        for request_id, waiter in self._open.items():
            if waiter is None:
                self._open[request_id] = asyncio.create_task(self._wait_for_decision(request_id))

    async def _wait_for_decision(self, request_id: str) -> None:
        request = self._requests[request_id]
        timeout = None
        if request.expires_at is not None:
            timeout = max((request.expires_at - workflow.now()).total_seconds(), 0.001)
        try:
            await workflow.wait_condition(lambda: request_id in self._decisions, timeout=timeout)
        except TimeoutError:
            approvals = self._options_approvals()
            assert approvals is not None
            if request_id in self._decisions:
                return  # a decision arrived in the same workflow task: it wins
            self._decide(
                request,
                approvals.on_timeout,
                Reviewer(id="oma:timeout", display_name="approval timeout"),
                f"no decision within {approvals.timeout_s} s",
                "timeout",
            )
        finally:
            self._open.pop(request_id, None)
            self._wake = True

    async def _approved_request(
        self, request_id: str, boundary: Boundary, content: Any, reason: str
    ) -> bool:
        """Request an approval and wait for it (or for the run to stop)."""
        self._request(request_id, boundary, content, reason)
        self._start_waiters()
        await workflow.wait_condition(lambda: request_id in self._decisions or bool(self._stop))
        return self._settle_decision(request_id)

    def _settle_decision(self, request_id: str) -> bool:
        decision = self._decisions.get(request_id)
        if decision is None:
            return False
        if decision.decision == "reject":
            self._stop_with(
                "rejected",
                f"rejected: {request_id} by {decision.reviewer.id}"
                + (f" ({decision.comment})" if decision.comment else ""),
            )
            return False
        return True

    async def _approve_plan(self) -> None:
        assert self._result.plan is not None
        await self._approved_request(
            "plan",
            "plan",
            self._result.plan.model_dump(mode="json"),
            "options.approvals.plan: review the coordinator's plan before it runs",
        )

    def _options_approvals(self) -> ApprovalOptions | None:
        return self._input.options.approvals if self._input else None

    # -- planning and synthesis (goal runs) --------------------------------

    async def _plan(self, inp: TeamRunInput, goal: str) -> None:
        config = inp.coordinator or CoordinatorConfig()
        messages = [user_text(planning_prompt(inp.team, goal, config.instructions))]
        answer = await self._coordinator("plan", config, inp, messages)
        tasks, errors = _read_plan(answer.output, inp)
        if errors:
            messages = [*answer.messages, user_text(correction_prompt(errors))]
            answer = await self._coordinator("plan-correction", config, inp, messages)
            tasks, errors = _read_plan(answer.output, inp)
            if errors:
                raise application_error(
                    PlanValidationError(
                        "the coordinator's plan is invalid after one correction turn: "
                        + "; ".join(errors)
                    )
                )
        try:
            self._load(inp, tasks)
        except OMAError as err:
            raise application_error(err) from None
        self._result.plan = plan_artifact(goal, tasks)
        self._event("plan_ready", detail=f"{len(tasks)} task(s)")

    async def _synthesize(self, inp: TeamRunInput, goal: str) -> None:
        config = inp.coordinator or CoordinatorConfig()
        prompt = synthesis_prompt(goal, self._result.tasks)
        try:
            answer = await self._coordinator("synthesis", config, inp, [user_text(prompt)])
        except ApplicationError as err:
            self._result.error = f"the coordinator's synthesis failed: {err.message}"
            self._result.error_code = err.type
            return
        self._result.final_output = answer.output

    async def _coordinator(
        self,
        step: str,
        config: CoordinatorConfig,
        inp: TeamRunInput,
        messages: list[LLMMessage],
    ) -> AgentRunResult:
        """One coordinator step as an ``AgentRun`` child; its usage counts for
        the run. Raises ``ApplicationError`` when the step fails."""
        try:
            agent = coordinator_agent(config, inp.team, self._coordinator_turns)
        except OMAError as err:
            raise application_error(err) from None
        try:
            result: AgentRunResult = await workflow.execute_child_workflow(
                "AgentRun",
                AgentRunInput(agent=agent, input=messages),
                id=coordinator_workflow_id(workflow.info().workflow_id, step),
                result_type=AgentRunResult,
            )
        except ChildWorkflowError as err:
            failed = _failed_result(COORDINATOR, err)
            self._add_coordinator_usage(failed, step)
            raise ApplicationError(
                f"coordinator step {step!r} failed: {failed.error}",
                type=failed.error_code or "AGENT_RUN_FAILED",
                non_retryable=True,
            ) from None
        self._add_coordinator_usage(result, step)
        return result

    def _add_coordinator_usage(self, result: AgentRunResult, step: str) -> None:
        self._coordinator_turns += result.turns
        self._result.total_token_usage += result.token_usage
        earlier = self._result.agent_results.get(COORDINATOR)
        summary = result.model_copy(update={"messages": []})
        if earlier is not None:
            summary.turns += earlier.turns
            summary.token_usage = earlier.token_usage + result.token_usage
        self._result.agent_results[COORDINATOR] = summary
        if self._input is not None and step != "synthesis":
            self._over_budget(self._input)

    # -- the task graph ----------------------------------------------------

    def _load(self, inp: TeamRunInput, tasks: list[TaskSpec]) -> None:
        inp.check_tasks(tasks)
        self._load_graph(tasks)
        self._scheduler = Scheduler(inp.options.scheduling, inp.team, tasks, self._dependents)
        if inp.goal is None or not inp.options.plan_only:
            for t in tasks:
                if not t.depends_on:
                    self._make_ready(t.id)

    def _load_graph(self, tasks: list[TaskSpec]) -> None:
        self._specs = {t.id: t for t in tasks}
        self._dependents = dependents_map(tasks)
        self._waiting_on = {t.id: len(t.depends_on) for t in tasks}
        plan_only = self._input is not None and self._input.options.plan_only
        for t in tasks:
            # a plan-only run reports its plan: every task pending
            blocked = t.depends_on and not plan_only
            status = TaskStatus.BLOCKED if blocked else TaskStatus.PENDING
            self._states[t.id] = TaskState(
                id=t.id,
                title=t.title,
                description=t.description,
                assignee=t.assignee,
                depends_on=t.depends_on,
                status=status,
            )
        self._result.tasks = list(self._states.values())

    def _make_ready(self, task_id: str) -> None:
        """``task_id``'s dependencies completed: queue it, or first request the
        approval of its dispatch."""
        assert self._scheduler is not None
        state = self._states[task_id]
        if self._needs_dispatch_approval(task_id, state.assignee):
            state.status = TaskStatus.AWAITING_APPROVAL
            self._gated.add(task_id)
            self._request(
                _dispatch_request(task_id),
                "dispatch",
                _snapshot(state, outcome=False),
                f"options.approvals.dispatch: review task {task_id!r} before it starts",
            )
            return
        state.status = TaskStatus.PENDING
        self._scheduler.push(task_id)

    def _needs_dispatch_approval(self, task_id: str, agent: str | None) -> bool:
        """Whether ``options.approvals.dispatch`` gates this task (run by
        ``agent``) and it has no decision yet."""
        approvals = self._options_approvals()
        return (
            approvals is not None
            and approvals.gates_dispatch(task_id, agent)
            and _dispatch_request(task_id) not in self._decisions
        )

    def _gate_assigned(self, task_id: str, agent: str) -> bool:
        """A task the scheduler just gave to ``agent``: if a dispatch approval
        names that agent, request it now, for that agent."""
        assert self._scheduler is not None
        if self._specs[task_id].assignee is not None or not self._needs_dispatch_approval(
            task_id, agent
        ):
            return False
        self._states[task_id].assignee = agent
        self._scheduler.pin(task_id, agent)
        self._make_ready(task_id)
        return True

    async def _execute(self, inp: TeamRunInput) -> None:
        """Dispatch until every task settled or the run stops, then let the
        tasks in flight settle. Event-driven: whenever a task settles or a
        decision arrives, everything it unblocked is dispatched at once."""
        assert self._scheduler is not None
        rounds = bool(inp.options.approvals and inp.options.approvals.round)
        batch: deque[str] = deque()
        while True:
            self._take_gate_decisions()
            if rounds and self._stop is None and not batch and not self._in_flight:
                batch = await self._next_round()
            if self._stop is None:
                self._dispatch(inp, batch if rounds else None)
            self._start_waiters()
            if not self._in_flight and (
                self._stop is not None
                or not (self._open or (batch if rounds else len(self._scheduler)))
            ):
                return
            self._wake = False
            await workflow.wait_condition(lambda: self._wake)

    def _take_gate_decisions(self) -> None:
        assert self._scheduler is not None
        for task_id in [t for t in self._gated if _dispatch_request(t) in self._decisions]:
            self._gated.discard(task_id)
            if self._settle_decision(_dispatch_request(task_id)):
                self._make_ready(task_id)

    async def _next_round(self) -> deque[str]:
        """A round barrier: every ready task forms the next round, approved
        together with a look at the round that just completed."""
        assert self._scheduler is not None
        batch: deque[str] = deque()
        while (nxt := self._scheduler.next(lambda agent: True)) is not None:
            task_id, agent = nxt
            self._states[task_id].assignee = agent
            batch.append(task_id)
        if not batch:
            return batch
        self._rounds += 1
        completed = [
            _snapshot(s)
            for s in self._states.values()
            if s.status in (TaskStatus.COMPLETED, TaskStatus.FAILED) and s.id in self._last_round
        ]
        content = {
            "round": self._rounds,
            "completed": completed,
            "next": [_snapshot(self._states[t]) for t in batch],
        }
        self._last_round = set(batch)
        approved = await self._approved_request(
            f"round-{self._rounds}",
            "round",
            content,
            f"options.approvals.round: review round {self._rounds} before it starts",
        )
        return batch if approved else deque()

    def _dispatch(self, inp: TeamRunInput, batch: deque[str] | None) -> None:
        assert self._scheduler is not None
        while len(self._in_flight) < inp.options.max_concurrency:
            if self._over_budget(inp):
                return
            if batch is not None:
                task_id = next((t for t in batch if self._available(self._agent_of(t))), None)
                if task_id is None:
                    return
                batch.remove(task_id)
                agent = self._agent_of(task_id)
            else:
                nxt = self._scheduler.next(self._available)
                if nxt is None:
                    return
                task_id, agent = nxt
                if self._gate_assigned(task_id, agent):
                    continue
            self._start(inp, task_id, agent)

    def _agent_of(self, task_id: str) -> str:
        agent = self._states[task_id].assignee
        assert agent is not None
        return agent

    def _available(self, agent: str) -> bool:
        return agent not in self._acp_busy

    def _start(self, inp: TeamRunInput, task_id: str, agent_name: str) -> None:
        assert self._scheduler is not None
        agent = inp.team.agent(agent_name)
        assert agent is not None  # validated
        state = self._states[task_id]
        state.assignee = agent_name
        state.status = TaskStatus.IN_PROGRESS
        self._scheduler.started(agent_name)
        if agent.kind == "acp":
            self._acp_busy.add(agent_name)
        self._event("task_start", task_id, f"agent {agent_name}")
        self._in_flight[task_id] = asyncio.create_task(self._run_task(inp, task_id))

    async def _run_task(self, inp: TeamRunInput, task_id: str) -> None:
        spec, state = self._specs[task_id], self._states[task_id]
        agent = inp.team.agent(self._agent_of(task_id))
        assert agent is not None
        is_acp = agent.kind == "acp"
        try:
            while True:
                state.attempts += 1
                result = await self._attempt(inp, spec, state, is_acp)
                if result.status == "cancelled" and self._stop == "timeout":
                    result = self._cut_short(result)
                if result.acp_session is not None:
                    self._acp_sessions[agent.name] = result.acp_session
                if result.status == "completed":
                    self._complete(task_id, result)
                    return
                retry = state.attempts <= spec.max_retries and result.retryable
                if not retry or self._stop not in (None, "continue"):
                    self._fail(task_id, result)
                    return
                delay = spec.retry_delay_s * spec.retry_backoff ** (state.attempts - 1)
                self._event(
                    "task_retry",
                    task_id,
                    f"attempt {state.attempts + 1} in {delay:g} s after "
                    f"{result.error_code}: {result.error}",
                )
                self._add_usage(state, result)
                await workflow.sleep(delay)
                if self._stop not in (None, "continue"):
                    # stopped during the delay: no new attempt
                    self._fail(task_id, result, usage_counted=True)
                    return
        except asyncio.CancelledError:
            # the run timed out, or was cancelled: this task ends with it
            self._fail(
                task_id, self._cut_short(AgentRunResult(agent=agent.name, status="cancelled"))
            )
        finally:
            self._acp_busy.discard(agent.name)
            assert self._scheduler is not None
            self._scheduler.settled(agent.name)
            self._in_flight.pop(task_id, None)
            self._wake = True

    def _cut_short(self, result: AgentRunResult) -> AgentRunResult:
        """``result`` of a task the run's stop cancelled: ``RUN_TIMEOUT`` after
        ``options.timeout_s``, else ``CANCELLED`` (Temporal cancellation)."""
        timeout = self._stop == "timeout"
        return result.model_copy(
            update={
                "error": self._stop_reason or "cancelled with the run",
                "error_code": "RUN_TIMEOUT" if timeout else "CANCELLED",
            }
        )

    async def _attempt(
        self, inp: TeamRunInput, spec: TaskSpec, state: TaskState, is_acp: bool
    ) -> AgentRunResult:
        """One attempt of a task: its ``AgentRun`` child, bounded by ``timeout_s``."""
        assert state.assignee is not None
        agent = inp.team.agent(state.assignee)
        assert agent is not None
        try:
            prompt = task_prompt(
                spec,
                [self._states[d] for d in spec.depends_on],
                shared_memory(self._states.values()) if spec.memory_scope == "all" else {},
            )
        except OMAError as err:
            return AgentRunResult(
                agent=agent.name, status="failed", error=err.message, error_code=err.code
            )
        handle = await workflow.start_child_workflow(
            "AgentRun",
            AgentRunInput(
                agent=agent,
                input=prompt,
                task_id=spec.id,
                run_key=self._run_key() if is_acp else None,
                acp_session=self._acp_sessions.get(agent.name),
            ),
            id=task_workflow_id(workflow.info().workflow_id, spec.id),
            result_type=AgentRunResult,
        )
        try:
            if spec.timeout_s is None:
                result: AgentRunResult = await handle
                return result
            done, _ = await workflow.wait([handle], timeout=spec.timeout_s)
            if done:
                result = handle.result()
                return result
        except ChildWorkflowError as err:
            return _failed_result(agent.name, err)
        handle.cancel()
        with contextlib.suppress(ChildWorkflowError, asyncio.CancelledError):
            await handle
        return AgentRunResult(
            agent=agent.name,
            status="failed",
            error=f"task {spec.id!r} ran longer than its timeout_s ({spec.timeout_s:g} s)",
            error_code="TASK_TIMEOUT",
            retryable=True,
        )

    def _complete(self, task_id: str, result: AgentRunResult) -> None:
        state = self._states[task_id]
        state.status = TaskStatus.COMPLETED
        state.output = result.output
        self._event("task_complete", task_id)
        self._add_usage(state, result)
        for dependent in self._dependents[task_id]:
            self._waiting_on[dependent] -= 1
            if self._waiting_on[dependent] == 0 and self._stop is None:
                self._make_ready(dependent)
            elif self._waiting_on[dependent] == 0:
                self._states[dependent].status = TaskStatus.PENDING
        self._check_continue_as_new()

    def _fail(self, task_id: str, result: AgentRunResult, usage_counted: bool = False) -> None:
        state = self._states[task_id]
        state.status = TaskStatus.FAILED
        state.error = result.error or f"the agent's turn ended {result.status}"
        state.error_code = result.error_code
        self._event("task_failed", task_id, f"{state.error_code}: {state.error}")
        if not usage_counted:
            self._add_usage(state, result)
        if result.error_code in ("CANCELLED", "RUN_TIMEOUT") and self._stop_reason:
            reason = f"skipped: {self._stop_reason}"  # the run stopped, not the task
        else:
            reason = f"skipped: dependency {task_id!r} ({state.title}) failed"
        for dependent in transitive_dependents(task_id, self._dependents):
            self._skip(dependent, reason)
        self._check_continue_as_new()

    def _skip(self, task_id: str, reason: str) -> None:
        state = self._states[task_id]
        if state.status in (TaskStatus.BLOCKED, TaskStatus.PENDING, TaskStatus.AWAITING_APPROVAL):
            state.status = TaskStatus.SKIPPED
            state.error = reason
            self._event("task_skipped", task_id, reason)
            if task_id in self._gated:
                self._gated.discard(task_id)
                self._close_request(_dispatch_request(task_id))

    def _skip_rest(self) -> None:
        """Skip every task that never started (the run stopped early)."""
        reason = f"skipped: {self._stop_reason or 'the run stopped'}"
        for task_id, state in self._states.items():
            if state.status not in (TaskStatus.COMPLETED, TaskStatus.FAILED):
                self._skip(task_id, reason)
        for request_id in list(self._open):
            self._close_request(request_id)

    def _close_request(self, request_id: str) -> None:
        waiter = self._open.pop(request_id, None)
        if waiter is not None:
            waiter.cancel()

    def _add_usage(self, state: TaskState, result: AgentRunResult) -> None:
        state.token_usage += result.token_usage
        self._result.total_token_usage += result.token_usage
        if self._input is not None:
            self._over_budget(self._input)

    def _over_budget(self, inp: TeamRunInput) -> bool:
        """Checked before each dispatch and after each completion."""
        budget = inp.options.max_token_budget
        if budget is None:
            return False
        used = self._result.total_token_usage
        if used.input_tokens + used.output_tokens < budget:
            return False
        if not self._result.budget_exceeded:
            self._result.budget_exceeded = True
            self._event(
                "budget_exceeded",
                detail=f"{used.input_tokens + used.output_tokens} tokens of {budget}",
            )
            self._stop_with("budget", f"the token budget of {budget} is used up")
        return True

    def _stop_with(self, stop: Stop, reason: str) -> None:
        if self._stop not in (None, "continue"):
            return
        self._stop = stop
        self._stop_reason = reason
        for request_id in list(self._open):
            self._close_request(request_id)
        if stop == "timeout":
            for in_flight in self._in_flight.values():
                in_flight.cancel()
        self._wake = True

    def _check_continue_as_new(self) -> None:
        assert self._input is not None
        info = workflow.info()
        limit = self._input.options.history_event_limit
        if self._stop is None and (
            info.is_continue_as_new_suggested() or info.get_current_history_length() >= limit
        ):
            self._stop = "continue"
            self._wake = True

    def _watch_deadline(self) -> None:
        assert self._deadline is not None and self._input is not None
        timeout = self._input.options.timeout_s or 0
        remaining = (self._deadline - workflow.now()).total_seconds()

        async def watch() -> None:
            await workflow.sleep(max(remaining, 0.001))
            self._stop_with("timeout", f"the run passed options.timeout_s ({timeout:g} s)")

        self._deadline_watch = asyncio.create_task(watch())

    async def _until_stopped(self, step: Coroutine[Any, Any, None]) -> None:
        """Run a coordinator step unless the run stops first: a timeout, an
        abort or a cancellation cancels it."""
        task = asyncio.create_task(step)
        try:
            await workflow.wait_condition(lambda: task.done() or self._stop is not None)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ApplicationError):
                    await task
        if not task.cancelled():
            await task

    async def _drain_after_cancel(self) -> None:
        # Temporal cancellation: cancel the children in flight (their
        # activities are cancelled in turn), wait for them to settle, and skip
        # everything that never started.
        self._stop_reason = "the run was cancelled"
        for in_flight in self._in_flight.values():
            in_flight.cancel()
        if self._in_flight:
            await workflow.wait(list(self._in_flight.values()))
        self._skip_rest()
        self._result.status = "cancelled"
        self._event("run_end", detail="cancelled")

    async def _close_acp_sessions(self) -> None:
        queues = {s.worker_task_queue for s in self._acp_sessions.values()}
        self._acp_sessions.clear()
        if queues:
            await close_acp_sessions(self._run_key(), queues)

    def _run_key(self) -> str:
        info = workflow.info()
        return f"{info.workflow_id}/{info.run_id}"

    # -- events, results, continue-as-new ----------------------------------

    def _event(
        self, kind: RunEventType, task_id: str | None = None, detail: str | None = None
    ) -> None:
        self._events.append(
            RunEvent(
                seq=self._next_seq, type=kind, at=workflow.now(), task_id=task_id, detail=detail
            )
        )
        self._next_seq += 1

    def _finish(self, status: TeamRunStatus | None = None) -> TeamRunResult:
        result = self._result
        if self._stop in STOPPED:
            status, result.error_code = STOPPED[self._stop]
            result.error = self._stop_reason
        elif status is None:
            failed = any(s.status == TaskStatus.FAILED for s in self._states.values())
            # a failed synthesis leaves an error_code on an otherwise completed run
            status = "failed" if failed or result.error_code else "completed"
        result.status = status
        result.success = status in ("completed", "planned")
        self._event("run_end", detail=status)
        return result

    def _checkpoint(self, inp: TeamRunInput) -> dict[str, Any]:
        """The input of the next run: the same input plus the state so far,
        dumped without defaults to stay small."""
        fields = set(TaskProgress.model_fields)
        checkpoint = TeamRunCheckpoint(
            result=self._result.model_copy(update={"tasks": []}),
            progress=[
                TaskProgress.model_validate(s.model_dump(include=fields))
                for s in self._states.values()
                if s.status not in (TaskStatus.PENDING, TaskStatus.BLOCKED) or s.assignee
            ],
            requests=[self._requests[r] for r in self._open],
            events=list(self._events)[-EVENTS_CARRIED:],
            next_seq=self._next_seq,
            started_at=self._started_at,
            rounds=self._rounds,
            round_robin=self._scheduler.round_robin if self._scheduler else 0,
            coordinator_turns=self._coordinator_turns,
        )
        # the input as the user wrote it (defaults dropped there would lose the
        # backends' 'kind' tags); the checkpoint without its defaults
        carried = inp.model_dump(mode="json", exclude_unset=True)
        carried["resume"] = checkpoint.model_dump(mode="json", exclude_defaults=True)
        return carried

    def _restore(self, inp: TeamRunInput, resume: TeamRunCheckpoint) -> None:
        result = resume.result
        tasks = result.plan.tasks if result.plan is not None else inp.given_tasks()
        self._result = result
        self._load_graph(tasks)
        for progress in resume.progress:
            spec_state = self._states[progress.id].model_dump()
            self._states[progress.id] = TaskState.model_validate(
                spec_state | progress.model_dump(exclude_unset=True)
            )
        self._result.tasks = list(self._states.values())
        self._scheduler = Scheduler(
            inp.options.scheduling, inp.team, tasks, self._dependents, resume.round_robin
        )
        for t in tasks:
            assignee = self._states[t.id].assignee
            if t.assignee is None and assignee is not None:
                self._scheduler.pin(t.id, assignee)
        self._events.extend(resume.events)
        self._next_seq = resume.next_seq
        self._started_at = resume.started_at
        self._rounds = resume.rounds
        self._coordinator_turns = resume.coordinator_turns
        self._decisions = {d.request_id: d for d in result.approval_decisions}
        for request in resume.requests:
            self._requests[request.request_id] = request
            self._open[request.request_id] = None
        done = {TaskStatus.COMPLETED}
        self._waiting_on = {
            t.id: sum(1 for d in t.depends_on if self._states[d].status not in done) for t in tasks
        }
        for t in tasks:
            status = self._states[t.id].status
            if status == TaskStatus.AWAITING_APPROVAL:
                self._gated.add(t.id)
            elif status == TaskStatus.PENDING and self._waiting_on[t.id] == 0:
                self._make_ready(t.id)


def _decision(args: tuple[Any, ...]) -> Decision:
    raw = single_input(args, "a decision")
    if not isinstance(raw, dict):
        raise InvalidRunInputError(f"a decision is {DECISION_SHAPE}; got {type(raw).__name__}")
    try:
        return Decision.model_validate(raw)
    except ValidationError as err:
        raise InvalidRunInputError(f"invalid decision: {format_validation_error(err)}") from None


def _read_plan(answer: str, inp: TeamRunInput) -> tuple[list[TaskSpec], list[str]]:
    try:
        items = parse_plan(answer)
    except ValueError as err:
        return [], [str(err)]
    return plan_tasks(items, inp.team, strict_assignees=inp.options.strict_assignees)


def _dispatch_request(task_id: str) -> str:
    """The id of the request that gates the dispatch of ``task_id``."""
    return f"dispatch-{task_id}"


def _task_of(request: ApprovalRequest) -> str | None:
    """The task a dispatch request is about (its events carry the task id)."""
    return request.content["id"] if request.boundary == "dispatch" else None


def _snapshot(state: TaskState, outcome: bool = True) -> dict[str, Any]:
    """A task as a reviewer sees it in an approval request; with ``outcome``
    (a round's tasks), its status and output too."""
    snapshot: dict[str, Any] = {
        "id": state.id,
        "title": state.title,
        "description": state.description,
        "assignee": state.assignee,
        "depends_on": state.depends_on,
    }
    if outcome:
        snapshot |= {"status": state.status.value, "output": state.output}
    return snapshot


def _failed_result(agent: str, err: ChildWorkflowError) -> AgentRunResult:
    """The ``AgentRunResult`` of a failed child: its own partial result when it
    sent one in the failure details, else one built from the failure."""
    cause = err.cause
    if isinstance(cause, CancelledError):
        return AgentRunResult(
            agent=agent, status="cancelled", error="cancelled with the run", error_code="CANCELLED"
        )
    if isinstance(cause, ApplicationError):
        if cause.details and isinstance(cause.details[0], dict):
            return AgentRunResult.model_validate(cause.details[0])
        return AgentRunResult(
            agent=agent, status="failed", error=cause.message, error_code=cause.type
        )
    return AgentRunResult(
        agent=agent, status="failed", error=str(cause or err), error_code="AGENT_RUN_FAILED"
    )
