"""``TeamRun``: a team executes a task graph, as a workflow.

The life of a run, top to bottom in ``run``: validate the input; with a goal,
the coordinator plans the tasks (one correction turn when the plan is
invalid); approve the plan if asked; dispatch every task whose dependencies
completed (each an ``AgentRun`` child workflow), retrying retryable failures
and cascading the others to the dependents; with a goal, the coordinator
synthesizes the final answer; report. Approvals, ``abort``, budgets and
timeouts stop the dispatch and drain the run. A long run continues as new
before its history grows large, carrying its state.

The rules live in the core (``TeamRunState``, ``TaskGraph``, ``ApprovalGate``,
``EventLog``, ``Scheduler``); this module is the Temporal glue: waiting,
timers, children, handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from oma.core.approval_gate import (
        ApprovalGate,
        dispatch_request_id,
        task_of,
        task_snapshot,
    )
    from oma.core.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        Boundary,
        Decision,
        DecisionSource,
        parse_decision,
    )
    from oma.core.errors import (
        AgentRunFailedError,
        OMAError,
        PlanValidationError,
        RunCancelledError,
        RunTimeoutError,
        TaskTimeoutError,
        application_error,
    )
    from oma.core.events import EventLog, RunEvent, RunEventType
    from oma.core.messages import LLMMessage, user_text
    from oma.core.plan import (
        COORDINATOR,
        CoordinatorConfig,
        coordinator_agent,
        correction_prompt,
        plan_artifact,
        planning_prompt,
        read_plan,
        synthesis_prompt,
    )
    from oma.core.prompt import task_prompt
    from oma.core.results import AcpSessionInfo, AgentRunResult, TeamRunResult, TeamRunStatus
    from oma.core.run_input import AgentRunInput, TeamRunInput, parse_team_run_input
    from oma.core.scheduling import Scheduler
    from oma.core.shared_memory import shared_memory
    from oma.core.task import TaskSpec, TaskState, TaskStatus
    from oma.core.task_graph import SETTLED, TaskGraph
    from oma.core.team_run_state import STOPS, StopKind, TeamRunState
    from oma.core.validation import single_input
    from oma.core.workflow_ids import coordinator_workflow_id, task_workflow_id
    from oma.workflows._acp import close_acp_sessions
    from oma.workflows._children import failed_result


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
        self._invalid: ApplicationError | None = None
        try:
            inp = parse_team_run_input(single_input(args, "TeamRun"))
        except OMAError as err:
            self._invalid = application_error(err)
            inp = None
        self._input = inp
        self.state = (inp and inp.resume) or TeamRunState(
            result=TeamRunResult(success=False, status="running", tasks=[]),
            started_at=workflow.now(),
        )
        self._log = EventLog(self.state.events)
        self._gate = ApprovalGate(
            workflow.info().workflow_id,
            inp.options.approvals if inp else None,
            self.state.requests,
            self.state.result.approval_decisions,
        )
        self._graph = TaskGraph([])
        self._scheduler: Scheduler | None = None
        # what only this run holds: the Temporal side of the state
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[str, asyncio.Task[None]] = {}
        self._wake = False
        self._stop: StopKind | None = None
        self._stop_reason = ""
        self._continuing = False
        # ACP agents hold one conversation: one task at a time, in one session
        self._acp_busy: set[str] = set()
        self._acp_sessions: dict[str, AcpSessionInfo] = {}
        self._deadline: asyncio.Task[None] | None = None
        if inp is None:
            return
        if inp.resume is not None:
            plan = self.state.result.plan
            self._load(inp, plan.tasks if plan is not None else inp.given_tasks())
            return
        self.state.result.goal = inp.goal
        self._event("run_start", detail=f"goal: {inp.goal}" if inp.goal else None)
        if inp.goal is None:
            try:
                inp.check_tasks(inp.given_tasks())
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
            self._watch_deadline(options.timeout_s)
        try:
            if inp.goal is not None and inp.resume is None:
                await self._until_stopped(self._plan(inp, inp.goal))
                if self._stop is None and options.plan_only:
                    return self._finish("planned")
                if self._stop is None and options.approvals and options.approvals.plan:
                    await self._approve_plan()
            if self._stop is None:
                await self._execute(inp)
            if self._continuing and self._stop is None:
                await self._continue_as_new(inp)
            self._skip_rest()
            # the synthesis starts only within budget (its own usage may pass it)
            if inp.goal is not None and self._stop is None and not self._check_budget():
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
    def state_query(self) -> TeamRunResult:
        """The run so far: every task's status and output, usage, decisions."""
        return self.state.result

    @workflow.query(name="events")
    def events(self, after_seq: int = -1) -> list[RunEvent]:
        """The run's events with ``seq`` above ``after_seq`` (all by default),
        oldest first; the latest ``EVENTS_KEPT`` are kept."""
        return self._log.after(after_seq)

    @workflow.query(name="shared_memory")
    def shared_memory(self) -> dict[str, str]:
        """The run's shared memory: ``<agent>/task:<id>:result`` -> output, so far."""
        return shared_memory(self._graph)

    @workflow.query(name="pending_approvals")
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The open approval requests, oldest first."""
        return list(self.state.requests)

    @workflow.signal(name="abort")
    def abort(self, *args: Any) -> None:
        """``{reason}`` (optional): stop dispatching, let tasks in flight
        settle, skip the rest and the synthesis; the run completes
        ``cancelled``. Any payload aborts; a ``reason`` is recorded."""
        raw = args[0] if args else None
        reason = raw.get("reason") if isinstance(raw, dict) else None
        if self._stop is None:
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
    def validate_decision(self, *args: Any) -> None:
        try:
            self._gate.check(_decision(args), self._stop_reason)
        except OMAError as err:
            raise application_error(err) from None

    def _record_decision(self, decision: Decision, source: DecisionSource) -> ApprovalDecision:
        request = self._gate.check(decision, self._stop_reason)
        record = self._gate.decide(
            request,
            decision.decision,
            decision.reviewer,
            decision.comment,
            source,
            workflow.now(),
        )
        self._recorded(request, record)
        return record

    def _recorded(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        detail = f"{request.request_id}: {record.decision} by {record.reviewer.id}"
        self._event("approval_decision", task_of(request), detail)
        self._wake = True

    # -- approvals ---------------------------------------------------------

    def _request(self, request_id: str, boundary: Boundary, content: Any, reason: str) -> None:
        """Open a request; its expiry waiter starts in the main loop."""
        request = self._gate.request(request_id, boundary, content, reason, workflow.now())
        self._event("approval_request", task_of(request), request_id)

    def _start_waiters(self) -> None:
        for request in self.state.requests:
            if request.request_id not in self._waiters:
                waiter = asyncio.create_task(self._expire_unless_decided(request))
                self._waiters[request.request_id] = waiter

    async def _expire_unless_decided(self, request: ApprovalRequest) -> None:
        request_id = request.request_id
        timeout = None
        if request.expires_at is not None:
            timeout = max((request.expires_at - workflow.now()).total_seconds(), 0.001)
        try:
            await workflow.wait_condition(
                lambda: self._gate.decision(request_id) is not None, timeout=timeout
            )
        except TimeoutError:
            # a decision that arrived in the same workflow task wins
            if self._gate.decision(request_id) is None:
                self._recorded(request, self._gate.expire(request, workflow.now()))
        finally:
            self._gate.close(request_id)
            self._waiters.pop(request_id, None)
            self._wake = True

    def _close_request(self, request_id: str) -> None:
        self._gate.close(request_id)
        waiter = self._waiters.pop(request_id, None)
        if waiter is not None:
            waiter.cancel()

    async def _ask_approval(
        self, request_id: str, boundary: Boundary, content: Any, reason: str
    ) -> bool:
        """Request an approval and wait for its decision (or for the run to stop)."""
        self._request(request_id, boundary, content, reason)
        self._start_waiters()
        await workflow.wait_condition(
            lambda: self._gate.decision(request_id) is not None or self._stop is not None
        )
        return self._approved(request_id)

    def _approved(self, request_id: str) -> bool:
        """Whether ``request_id`` was approved; a rejection stops the run."""
        decision = self._gate.decision(request_id)
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
        assert self.state.result.plan is not None
        await self._ask_approval(
            "plan",
            "plan",
            self.state.result.plan.model_dump(mode="json"),
            "options.approvals.plan: review the coordinator's plan before it runs",
        )

    # -- planning and synthesis (goal runs) --------------------------------

    async def _plan(self, inp: TeamRunInput, goal: str) -> None:
        config = inp.coordinator or CoordinatorConfig()
        strict = inp.options.strict_assignees
        messages = [user_text(planning_prompt(inp.team, goal, config.instructions))]
        answer = await self._coordinator("plan", config, inp, messages)
        tasks, errors = read_plan(answer.output, inp.team, strict_assignees=strict)
        if errors:
            messages = [*answer.messages, user_text(correction_prompt(errors))]
            answer = await self._coordinator("plan-correction", config, inp, messages)
            tasks, errors = read_plan(answer.output, inp.team, strict_assignees=strict)
            if errors:
                raise application_error(
                    PlanValidationError(
                        "the coordinator's plan is invalid after one correction turn: "
                        + "; ".join(errors)
                    )
                )
        try:
            inp.check_tasks(tasks)
        except OMAError as err:
            raise application_error(err) from None
        self._load(inp, tasks)
        self.state.result.plan = plan_artifact(goal, tasks)
        self._event("plan_ready", detail=f"{len(tasks)} task(s)")

    async def _synthesize(self, inp: TeamRunInput, goal: str) -> None:
        config = inp.coordinator or CoordinatorConfig()
        prompt = synthesis_prompt(goal, self.state.result.tasks)
        try:
            answer = await self._coordinator("synthesis", config, inp, [user_text(prompt)])
        except ApplicationError as err:
            self.state.result.error = f"the coordinator's synthesis failed: {err.message}"
            self.state.result.error_code = err.type
            return
        self.state.result.final_output = answer.output

    async def _coordinator(
        self, step: str, config: CoordinatorConfig, inp: TeamRunInput, messages: list[LLMMessage]
    ) -> AgentRunResult:
        """One coordinator step as an ``AgentRun`` child; its usage counts for
        the run. Raises ``ApplicationError`` when the step fails."""
        try:
            agent = coordinator_agent(config, inp.team, self.state.coordinator_turns)
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
            failed = failed_result(COORDINATOR, err)
            self._add_coordinator_run(failed, step)
            raise ApplicationError(
                f"coordinator step {step!r} failed: {failed.error}",
                type=failed.error_code or AgentRunFailedError.code,
                non_retryable=True,
            ) from None
        self._add_coordinator_run(result, step)
        return result

    def _add_coordinator_run(self, result: AgentRunResult, step: str) -> None:
        self.state.add_coordinator_run(result)
        if step != "synthesis":
            self._check_budget()

    # -- dispatching the task graph ----------------------------------------

    def _load(self, inp: TeamRunInput, tasks: list[TaskSpec]) -> None:
        """Build the graph and the scheduler over ``tasks`` (a resumed run's
        from the carried task states) and queue what is ready."""
        resumed = inp.resume is not None
        self._graph = TaskGraph(tasks, self.state.result.tasks, plan_only=inp.options.plan_only)
        self.state.result.tasks = list(self._graph)
        self._scheduler = Scheduler(
            inp.options.scheduling, inp.team, tasks, self._graph.dependents, self.state.round_robin
        )
        if resumed:
            for t in tasks:
                assignee = self._graph[t.id].assignee
                if t.assignee is None and assignee is not None:
                    self._scheduler.pin(t.id, assignee)
            ready = self._graph.ready()
        elif inp.goal is None or not inp.options.plan_only:
            ready = self._graph.roots()
        else:
            ready = []
        for task_id in ready:
            self._make_ready(task_id)

    def _make_ready(self, task_id: str) -> None:
        """``task_id``'s dependencies completed: queue it, or first request the
        approval of its dispatch."""
        assert self._scheduler is not None
        state = self._graph[task_id]
        if self._gate.gates_dispatch(task_id, state.assignee):
            state.status = TaskStatus.AWAITING_APPROVAL
            self._request(
                dispatch_request_id(task_id),
                "dispatch",
                task_snapshot(state, outcome=False),
                f"options.approvals.dispatch: review task {task_id!r} before it starts",
            )
            return
        state.status = TaskStatus.PENDING
        self._scheduler.push(task_id)

    def _gate_assigned(self, task_id: str, agent: str) -> bool:
        """A task the scheduler just gave to ``agent``: if a dispatch approval
        names that agent, request it now, for that agent."""
        assert self._scheduler is not None
        if self._graph.specs[task_id].assignee is not None or not self._gate.gates_dispatch(
            task_id, agent
        ):
            return False
        self._graph[task_id].assignee = agent
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
            self._release_approved_dispatches()
            if rounds and self._dispatching and not batch and not self._in_flight:
                batch = await self._next_round()
            if self._dispatching:
                self._dispatch(inp, batch if rounds else None)
            self._start_waiters()
            if not self._in_flight and (
                not self._dispatching
                or not (self.state.requests or (batch if rounds else len(self._scheduler)))
            ):
                return
            self._wake = False
            await workflow.wait_condition(lambda: self._wake)

    @property
    def _dispatching(self) -> bool:
        """Whether new tasks may start: the run neither stopped nor is about
        to continue as new."""
        return self._stop is None and not self._continuing

    def _release_approved_dispatches(self) -> None:
        for task_id in self._graph.awaiting_approval():
            request_id = dispatch_request_id(task_id)
            if self._gate.decision(request_id) is not None and self._approved(request_id):
                self._make_ready(task_id)

    async def _next_round(self) -> deque[str]:
        """A round barrier: every ready task forms the next round, approved
        together with a look at the round that just completed."""
        assert self._scheduler is not None
        batch: deque[str] = deque()
        while (nxt := self._scheduler.next(lambda agent: True)) is not None:
            task_id, agent = nxt
            self._graph[task_id].assignee = agent
            batch.append(task_id)
        if not batch:
            return batch
        self.state.rounds += 1
        rounds = self.state.rounds
        content = {
            "round": rounds,
            "completed": [
                task_snapshot(s)
                for s in self._graph
                if s.status in SETTLED and s.id in self.state.last_round
            ],
            "next": [task_snapshot(self._graph[t]) for t in batch],
        }
        self.state.last_round = list(batch)
        approved = await self._ask_approval(
            f"round-{rounds}",
            "round",
            content,
            f"options.approvals.round: review round {rounds} before it starts",
        )
        return batch if approved else deque()

    def _dispatch(self, inp: TeamRunInput, batch: deque[str] | None) -> None:
        assert self._scheduler is not None
        while len(self._in_flight) < inp.options.max_concurrency:
            if self._check_budget():
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
        agent = self._graph[task_id].assignee
        assert agent is not None
        return agent

    def _available(self, agent: str) -> bool:
        return agent not in self._acp_busy

    def _start(self, inp: TeamRunInput, task_id: str, agent_name: str) -> None:
        assert self._scheduler is not None
        agent = inp.team.agent(agent_name)
        assert agent is not None  # validated
        state = self._graph[task_id]
        state.assignee = agent_name
        state.status = TaskStatus.IN_PROGRESS
        self._scheduler.started(agent_name)
        if agent.kind == "acp":
            self._acp_busy.add(agent_name)
        self._event("task_start", task_id, f"agent {agent_name}")
        self._in_flight[task_id] = asyncio.create_task(self._run_task(inp, task_id))

    # -- one task ----------------------------------------------------------

    async def _run_task(self, inp: TeamRunInput, task_id: str) -> None:
        spec, state = self._graph.specs[task_id], self._graph[task_id]
        agent = inp.team.agent(self._agent_of(task_id))
        assert agent is not None
        try:
            while True:
                state.attempts += 1
                result = await self._attempt(inp, spec, state, agent.kind == "acp")
                if result.status == "cancelled" and self._stop == "timeout":
                    result = self._cut_short(result)
                if result.acp_session is not None:
                    self._acp_sessions[agent.name] = result.acp_session
                if result.status == "completed":
                    self._complete(task_id, result)
                    return
                retry = state.attempts <= spec.max_retries and result.retryable
                if not retry or self._stop is not None:
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
                if self._stop is not None:
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
                "error_code": (RunTimeoutError if timeout else RunCancelledError).code,
            }
        )

    async def _attempt(
        self, inp: TeamRunInput, spec: TaskSpec, state: TaskState, is_acp: bool
    ) -> AgentRunResult:
        """One attempt of a task: its ``AgentRun`` child, bounded by ``timeout_s``."""
        agent = inp.team.agent(self._agent_of(spec.id))
        assert agent is not None
        try:
            memory = shared_memory(self._graph) if spec.memory_scope == "all" else {}
            prompt = task_prompt(spec, [self._graph[d] for d in spec.depends_on], memory)
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
            return failed_result(agent.name, err)
        handle.cancel()
        with contextlib.suppress(ChildWorkflowError, asyncio.CancelledError):
            await handle
        return AgentRunResult(
            agent=agent.name,
            status="failed",
            error=f"task {spec.id!r} ran longer than its timeout_s ({spec.timeout_s:g} s)",
            error_code=TaskTimeoutError.code,
            retryable=True,
        )

    def _complete(self, task_id: str, result: AgentRunResult) -> None:
        unblocked = self._graph.complete(task_id, result.output)
        self._event("task_complete", task_id)
        self._add_usage(self._graph[task_id], result)
        for dependent in unblocked:
            if self._dispatching:
                self._make_ready(dependent)
            else:
                self._graph[dependent].status = TaskStatus.PENDING
        self._check_continue_as_new()

    def _fail(self, task_id: str, result: AgentRunResult, usage_counted: bool = False) -> None:
        error = result.error or f"the agent's turn ended {result.status}"
        dependents = self._graph.fail(task_id, error, result.error_code)
        self._event("task_failed", task_id, f"{result.error_code}: {error}")
        if not usage_counted:
            self._add_usage(self._graph[task_id], result)
        stopped = (RunCancelledError.code, RunTimeoutError.code)
        if result.error_code in stopped and self._stop_reason:
            reason = f"skipped: {self._stop_reason}"  # the run stopped, not the task
        else:
            reason = f"skipped: dependency {task_id!r} ({self._graph[task_id].title}) failed"
        for dependent in dependents:
            self._skip(dependent, reason)
        self._check_continue_as_new()

    def _skip(self, task_id: str, reason: str) -> None:
        gated = self._graph[task_id].status == TaskStatus.AWAITING_APPROVAL
        if self._graph.skip(task_id, reason):
            self._event("task_skipped", task_id, reason)
            if gated:
                self._close_request(dispatch_request_id(task_id))

    def _skip_rest(self) -> None:
        """Skip every task that never started (the run stopped early)."""
        reason = f"skipped: {self._stop_reason or 'the run stopped'}"
        for task_id in self._graph.unsettled():
            self._skip(task_id, reason)
        for request in list(self.state.requests):
            self._close_request(request.request_id)

    # -- budgets, stops, timeouts, continue-as-new --------------------------

    def _add_usage(self, state: TaskState, result: AgentRunResult) -> None:
        state.token_usage += result.token_usage
        self.state.add_usage(result.token_usage)
        self._check_budget()

    def _check_budget(self) -> bool:
        """Whether the token budget is used up (checked before each dispatch
        and after each completion); the first time, the run stops."""
        assert self._input is not None
        budget = self._input.options.max_token_budget
        if not self.state.over_budget(budget):
            return False
        if not self.state.result.budget_exceeded:
            used = self.state.result.total_token_usage
            self.state.result.budget_exceeded = True
            detail = f"{used.input_tokens + used.output_tokens} tokens of {budget}"
            self._event("budget_exceeded", detail=detail)
            self._stop_with("budget", f"the token budget of {budget} is used up")
        return True

    def _stop_with(self, stop: StopKind, reason: str) -> None:
        if self._stop is not None:
            return
        self._stop = stop
        self._stop_reason = reason
        for request in list(self.state.requests):
            self._close_request(request.request_id)
        if stop == "timeout":
            for in_flight in self._in_flight.values():
                in_flight.cancel()
        self._wake = True

    def _check_continue_as_new(self) -> None:
        assert self._input is not None
        info = workflow.info()
        limit = self._input.options.history_event_limit
        if self._dispatching and (
            info.is_continue_as_new_suggested() or info.get_current_history_length() >= limit
        ):
            self._continuing = True
            self._wake = True

    async def _continue_as_new(self, inp: TeamRunInput) -> None:
        """Go on in a new run with the same input (as the user wrote it: the
        defaults dropped would lose the backends' ``kind`` tags) and this state."""
        await self._close_acp_sessions()  # the next run opens its own
        assert self._scheduler is not None
        self.state.round_robin = self._scheduler.round_robin
        carried = inp.model_dump(mode="json", exclude_unset=True)
        carried["resume"] = self.state.carried()
        workflow.continue_as_new(carried)

    def _watch_deadline(self, timeout_s: float) -> None:
        deadline = self.state.started_at + timedelta(seconds=timeout_s)
        remaining = (deadline - workflow.now()).total_seconds()

        async def watch() -> None:
            await workflow.sleep(max(remaining, 0.001))
            self._stop_with("timeout", f"the run passed options.timeout_s ({timeout_s:g} s)")

        self._deadline = asyncio.create_task(watch())

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
        self.state.result.status = "cancelled"
        self._event("run_end", detail="cancelled")

    async def _close_acp_sessions(self) -> None:
        queues = {s.worker_task_queue for s in self._acp_sessions.values()}
        self._acp_sessions.clear()
        if queues:
            await close_acp_sessions(self._run_key(), queues)

    def _run_key(self) -> str:
        info = workflow.info()
        return f"{info.workflow_id}/{info.run_id}"

    # -- events and the result ---------------------------------------------

    def _event(
        self, kind: RunEventType, task_id: str | None = None, detail: str | None = None
    ) -> None:
        self._log.add(kind, workflow.now(), task_id, detail)

    def _finish(self, status: TeamRunStatus | None = None) -> TeamRunResult:
        result = self.state.result
        if self._stop is not None:
            status, error = STOPS[self._stop]
            result.error_code, result.error = error.code, self._stop_reason
        elif status is None:
            # a failed synthesis leaves an error_code on an otherwise completed run
            status = "failed" if self._graph.any_failed() or result.error_code else "completed"
        result.status = status
        result.success = status in ("completed", "planned")
        self._event("run_end", detail=status)
        return result


def _decision(args: tuple[Any, ...]) -> Decision:
    return parse_decision(single_input(args, "a decision"))
