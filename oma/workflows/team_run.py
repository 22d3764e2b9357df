"""``TeamRun``: a team executes a task graph, as a workflow.

The life of a run, top to bottom in ``run``: validate the input; with a goal,
the coordinator plans the tasks (one correction turn when the plan is
invalid); approve the plan if asked; dispatch every task whose dependencies
completed (each an ``AgentRun`` child workflow), retrying retryable failures
and cascading the others to the dependents; with a goal, the coordinator
synthesizes the final answer; report. Approvals, ``abort``, budgets and
timeouts stop the dispatch and drain the run. A long run continues as new
before its history grows large, carrying its state; a fork reads its source
first and goes on as that run resumed (``_fork``).

The rules live in the core (``TeamRunState``, ``TaskGraph`` and its
``TaskTally``, ``ApprovalGate``, ``EventLog``, ``Scheduler``, ``Dispatcher``,
``TeamBudget``, ``settle_outcome``); this module is the Temporal glue:
waiting, timers, children, over typed collaborators (``RunEvents``,
``Wakeup``, the approval waits, ``RunSpending``, the coordinator, the
handlers ``TeamRunHandlers``). A task's settle costs what it touches (its
dependents, the tasks in flight, the open requests), never a pass over
every task of the run.
"""

from __future__ import annotations

import asyncio
from collections import deque
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import WorkflowName
    from oma.core.contracts.visibility import team_run_details, team_run_failure
    from oma.core.contracts.workflow_ids import task_workflow_id
    from oma.core.rules import shards as shard_rules
    from oma.core.rules.approval_gate import dispatch_request_id, round_content
    from oma.core.rules.dispatch import Dispatcher
    from oma.core.rules.payload_fit import sent_result
    from oma.core.rules.run_outcome import settle_outcome
    from oma.core.rules.scheduling import Scheduler
    from oma.core.rules.shards import ShardInputs
    from oma.core.rules.task_graph import TaskGraph, skip_reason
    from oma.core.rules.team_run_state import CANCELLED_REASON, RunStop, StopKind
    from oma.core.schema import limits
    from oma.core.schema.agent_config import AgentConfig
    from oma.core.schema.approvals import Boundary
    from oma.core.schema.errors import OMAError, RunCancelledError, TaskFailedError
    from oma.core.schema.plan import plan_artifact
    from oma.core.schema.results import AgentRunResult, TeamRunResult, TeamRunStatus
    from oma.core.schema.run_events import EventLog
    from oma.core.schema.run_input import (
        AgentRunInput,
        RunOptions,
        TeamRunInput,
        parse_team_run_input,
    )
    from oma.core.schema.run_state import TeamRunState
    from oma.core.schema.task import TaskSpec, TaskState, TaskStatus
    from oma.core.schema.validation import single_input
    from oma.runtime.collection import collection_held
    from oma.workflows import (
        _continue,
        _fork,
        _input_checks,
        _patches,
        _payload_store,
        _shards,
    )
    from oma.workflows._acp import RunSessions
    from oma.workflows._approval_waits import ApprovalWaits
    from oma.workflows._budget import RunSpending
    from oma.workflows._children import attempt_task, lost_outcome
    from oma.workflows._coordinator import Coordinator
    from oma.workflows._events import RunEvents
    from oma.workflows._failures import as_failure
    from oma.workflows._outputs import read_back
    from oma.workflows._shards import ShardedRun
    from oma.workflows._team_run_handlers import TeamRunHandlers
    from oma.workflows._tool_gate import AdoptedToolRequests
    from oma.workflows._visibility import Visibility
    from oma.workflows._waiting import Wakeup, at_deadline, delay_unless_stopped, unless_stopped


@workflow.defn(name=WorkflowName.TEAM_RUN)
class TeamRun(TeamRunHandlers):
    """Runs a team over a goal, a task list or a frozen plan; returns a ``TeamRunResult``
    as JSON (``sent_result``).

    Input: a ``TeamRunInput`` as JSON, decoded as plain JSON and validated
    here, so bad input fails the workflow at once, before any task runs, with
    ``INVALID_RUN_INPUT`` (a field, named by path), ``INVALID_TASK_GRAPH``,
    ``NO_ELIGIBLE_AGENT`` or ``ASSIGNEE_REQUIREMENTS_MISMATCH``; an invalid
    coordinator plan fails it with ``INVALID_PLAN``.

    Queries ``state``, ``events``, ``shared_memory``, ``pending_approvals``;
    signals ``decide`` and ``abort``; update ``decide``; from its tasks'
    runs, ``tool_approval_request``, ``tool_approval_closed`` and
    ``task_usage`` (``oma.workflows._team_run_handlers``).
    """

    @workflow.init
    def __init__(self, *args: Any) -> None:
        with collection_held():  # a large input's models: oma.runtime.collection
            self._make(args)

    def _make(self, args: tuple[Any, ...]) -> None:
        # Everything is made here, before any signal, update or query is
        # handled, so a decision sent as the run starts sees the whole state.
        self._invalid: OMAError | None = None  # raised as the run's failure as it runs
        self._stored = _payload_store.stored()  # its budget: limits.state_budget
        try:
            raw = single_input(args, WorkflowName.TEAM_RUN)
            self._fork = _fork.fork_input(raw)  # a fork's first run: read its source first
            # a run of more than MAX_RUN_TASKS tasks: checked and split as it runs
            self._unplanned = raw if not self._fork and shard_rules.reads_first(raw) else None
            inp = None if self._fork or self._unplanned else parse_team_run_input(raw)
        except OMAError as err:
            self._invalid = err
            inp = self._fork = self._unplanned = None
        # what the run holds whatever state it starts from (an abort may come
        # while a fork reads: its stop holds)
        self._stop = RunStop()
        self._visibility = Visibility()
        self._wakeup = Wakeup()  # the dispatch loop waits on it
        self._sessions = RunSessions()
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._starting: set[str] = set()  # in flight, their children not started yet
        self._continuing = False
        self._waiting: asyncio.Task[None] | None = None  # Visibility.show_waiting
        self._deadline: asyncio.Task[None] | None = None
        # what works over the state it starts from (its ``resume``, else a new
        # one), made once: a fork or a reuse that reads its start state hands
        # them the state it read (``_start_from``)
        self._input = inp
        self.state = (inp and inp.resume) or TeamRunState.new(workflow.now())
        self._events = RunEvents(EventLog(self.state.events))
        approvals = inp.options.approvals if inp else None
        self._approvals = ApprovalWaits.of_run(self.state, approvals, self._events, self._wakeup)
        self._tool_requests = AdoptedToolRequests(self._approvals, self._events)
        self._spending = RunSpending(self.state, self._options)
        self._graph = TaskGraph([])  # until _begin, which makes the rest:
        self._dispatcher: Dispatcher  # set by _load, once the input is valid
        self._sharded: ShardedRun | None = None  # a run of more than MAX_RUN_TASKS tasks
        if _fork.reads_first(self._fork, inp):
            self._check(inp)  # what works over the input is made of the input read
        else:
            self._begin(inp)

    def _start_from(self, inp: TeamRunInput) -> None:
        """Go on as ``inp``, the input a fork's source, or the run whose work
        this one reuses, was read as (``_fork.reading``). Its ``resume`` state
        (a new one when the read keeps nothing) replaces the one the run held
        while it read, in the events, approval waits and books made over it
        as the run started, and what works over the input is made of it
        (``_begin``, once). No task ran, no request was waited on and no
        usage was reported while the run read: the state replaced holds only
        what the handlers recorded (an ``abort``'s event, which the read
        records again)."""
        self.state = inp.resume or TeamRunState.new(workflow.now())
        self._events.log = EventLog(self.state.events)
        self._go_on_with(inp)

    def _go_on_with(self, inp: TeamRunInput, shards: ShardInputs | None = None) -> None:
        """Go on, over the state the run holds, as ``inp``: what was made
        over the state as the run started takes its options, and what works
        over the input is made of it (``_begin``, with ``shards``)."""
        self._input = inp
        self._approvals.start_from(self.state, inp.options.approvals)
        self._spending.start_from(self.state, inp.options)
        self._begin(inp, shards)

    async def _plan_shards(self, raw: dict[str, Any]) -> None:
        """Check and split ``raw``, the input of a new run of more than
        ``MAX_RUN_TASKS`` tasks, then go on as it (``_go_on_with``): in the
        ``plan_shards`` activity, or, in a run recorded before
        ``_patches.SHARDS_PLANNED_APART``, here as any run's input. An error
        fails the run as it runs (``_invalid``)."""
        try:
            if not _patches.patched(_patches.SHARDS_PLANNED_APART):
                self._go_on_with(parse_team_run_input(raw))
                return
            planned = await _shards.planned(raw, stored=self._stored)
            inp = shard_rules.parent_input(raw)
        except OMAError as err:
            self._invalid = err
            return
        self._go_on_with(inp, ShardInputs.of_input(inp, raw, planned))

    def _begin(self, inp: TeamRunInput | None, shards: ShardInputs | None = None) -> None:
        """Make what works over ``inp`` (``None``: invalid, or a fork's, not
        read yet: nothing) and the state: the coordinator, and the task graph
        and its dispatcher, or the shards (``shards``: as ``plan_shards``
        checked and split them; else ``inp`` checked first). An error fails
        the run as it runs (``_invalid``). A run that reads its start state
        first makes them once, of the input read (``_start_from``)."""
        if inp is None:
            return
        self._coordinator = Coordinator(
            inp, self.state, self, self._visibility, stored=self._stored
        )
        if inp.resume is None:
            self.state.result.goal = inp.goal
            self._events.emit("run_start", detail=f"goal: {inp.goal}" if inp.goal else None)
        if shards is None:
            plan = self.state.result.plan
            tasks = plan.tasks if plan is not None else inp.given_tasks()  # a goal run's: later
            split = self._check(inp, tasks) if inp.resume is None else None
            shards = ShardInputs.of_tasks(inp, tasks, split) if split else None
        if self._invalid is not None:
            return
        try:
            if shards:  # its shards' runs build their tasks' states
                self._sharded = ShardedRun(
                    inp,
                    shards,
                    self.state,
                    self._events,
                    self._stop,
                    self._spending,
                    self._visibility,
                    self._stop_if_over_budget,
                    self.stop_with,
                )
            else:
                self._load(inp, tasks)
        except OMAError as err:
            self._invalid = err

    def _check(
        self, inp: TeamRunInput | None, tasks: list[TaskSpec] | None = None
    ) -> list[list[int]] | None:
        """Check a new run's input before anything runs, as the client does
        (for a run the stock CLI started): ``tasks`` (its given tasks by
        default); its shards (``_input_checks.check_start``). An error fails
        the run as it runs (``_invalid``): a run with ``options.reuse``
        checks its input as given before it reads, and that error holds."""
        if inp is None:
            return None
        try:
            given = inp.given_tasks() if tasks is None else tasks
            return _input_checks.check_start(inp, given, stored=self._stored)
        except OMAError as err:
            self._invalid = err
            return None

    @property
    def _options(self) -> RunOptions:
        return self._input.options if self._input else RunOptions()

    @property
    def _team_name(self) -> str:
        return self._input.team.name if self._input else "?"

    @workflow.run
    async def run(self, *args: Any) -> dict[str, Any]:
        _patches.at_start()
        if self._unplanned is not None:
            await self._plan_shards(self._unplanned)
            self._unplanned = None  # (12 MB at 100,000 tasks)
        await self._visibility.learn()
        if (
            reading := _fork.reading(
                self._fork, self._input, self._stop, self._visibility, stored=self._stored
            )
        ) is not None:
            self._start_from(await reading)  # a fork, or a run that reuses another's work
        if self._invalid is not None:
            self._visibility.ended("failed", self._invalid.code)
            with as_failure():
                raise self._invalid
        inp = self._input
        assert inp is not None
        options = inp.options
        self._visibility.identify(team=inp.team.name)
        self._show_details()
        # OmaStatus and the details follow the open requests (awaiting_approval)
        self._waiting = asyncio.create_task(
            self._visibility.show_waiting(self._approvals.gate, self._show_details)
        )
        deadline = None
        if (timeout_s := options.timeout_s) is not None:
            reason = f"the run passed options.timeout_s ({timeout_s:g} s)"
            deadline = self.state.started_at + timedelta(seconds=timeout_s)
            self._deadline = at_deadline(deadline, lambda: self.stop_with("timeout", reason))
        try:
            if inp.goal is not None and inp.resume is None:
                await unless_stopped(self._plan(inp, inp.goal), lambda: self._stop.stopped)
                if not self._stop.stopped and options.plan_only:
                    return self._end(self._finish("planned"))
                plan = self.state.result.plan
                if not self._stop.stopped and plan and options.approvals and options.approvals.plan:
                    reason = "options.approvals.plan: review the coordinator's plan before it runs"
                    await self._ask_approval("plan", "plan", plan.model_dump(mode="json"), reason)
            if self._sharded is not None:
                await self._sharded.run(deadline)
            elif not self._stop.stopped:
                if inp.resume is not None:
                    await read_back(self._graph, self.state.result)  # what waiting tasks read
                await self._execute(inp)
            if self._continuing and not self._stop.stopped:
                await self._continue_as_new(inp)
            self._skip_rest()
            # the synthesis starts only within budget (its own usage may pass it)
            if inp.goal is not None and not self._stop.stopped:
                if self._spending.over_budget() is not None:
                    self._stop_if_over_budget()
                else:
                    await unless_stopped(
                        self._coordinator.synthesize(inp.goal), lambda: self._stop.stopped
                    )
        except asyncio.CancelledError:
            await self._drain_after_cancel()
            raise
        finally:
            await self._sessions.close()
        await self._tool_requests.flush()
        await self._spending.tasks.signals.flush()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._end(self._finish())

    # -- approvals ---------------------------------------------------------

    async def _ask_approval(
        self, request_id: str, boundary: Boundary, content: Any, reason: str
    ) -> bool:
        """Request an approval and wait for its decision (or for the run to stop)."""
        self._approvals.request(request_id, boundary, content, reason)
        await self._approvals.decided(request_id, lambda: self._stop.stopped)
        return self._approved(request_id)

    def _approved(self, request_id: str) -> bool:
        """Whether ``request_id`` was approved; a rejection stops the run."""
        decision = self._approvals.gate.decision(request_id)
        if decision is not None and decision.decision == "reject":
            self.stop_with("rejected", decision.rejection())
        return decision is not None and decision.decision == "approve"

    # -- planning and synthesis (goal runs) --------------------------------

    async def _plan(self, inp: TeamRunInput, goal: str) -> None:
        tasks = await self._coordinator.plan(goal)
        self._load(inp, tasks)
        self.state.result.plan = plan_artifact(goal, tasks)
        self._events.emit("plan_ready", detail=f"{len(tasks)} task(s)")

    # -- dispatching the task graph ----------------------------------------

    def _load(self, inp: TeamRunInput, tasks: list[TaskSpec]) -> None:
        """Build the graph and the dispatcher over ``tasks`` (a resumed run's
        from the carried task states) and queue what is ready."""
        self._graph = TaskGraph(tasks, self.state.result.tasks, plan_only=inp.options.plan_only)
        self.state.result.tasks = list(self._graph)
        scheduler = Scheduler(
            inp.options.scheduling, inp.team, tasks, self._graph.dependents, self.state.round_robin
        )
        self._dispatcher = Dispatcher(
            self._graph, scheduler, self._approvals.gate, inp.team, self._approvals.request
        )
        if inp.resume is not None:
            self._dispatcher.resume()
        elif inp.goal is None or not inp.options.plan_only:
            self._dispatcher.start()

    async def _execute(self, inp: TeamRunInput) -> None:
        """Dispatch until every task settled or the run stops, then let the
        tasks in flight settle. Event-driven: whenever a task settles or a
        decision arrives, everything it unblocked is dispatched at once."""
        dispatcher = self._dispatcher
        rounds = bool(inp.options.approvals and inp.options.approvals.round)
        batch: deque[str] = deque()
        starts = self._starts_per_workflow_task(inp.options.max_concurrency)
        while True:
            dispatcher.release(self._approved)
            if rounds and self._dispatching and not batch and not self._in_flight:
                batch = await self._next_round(dispatcher.next_round())
            while (
                self._dispatching
                and len(self._in_flight) < inp.options.max_concurrency
                and len(self._starting) < starts
            ):
                if self._spending.over_budget() is not None:
                    self._stop_if_over_budget()
                    break
                nxt = dispatcher.next(batch if rounds else None)
                if nxt is None:
                    break
                task_id, agent = nxt
                dispatcher.started(task_id, agent)
                self._events.emit("task_start", task_id, f"agent {agent}")
                self._in_flight[task_id] = asyncio.create_task(self._run_task(inp, task_id))
                if starts < inp.options.max_concurrency:
                    self._starting.add(task_id)
            self._approvals.start_waiters()
            queued = batch if rounds else len(dispatcher)
            if not self._in_flight and (
                not self._dispatching or not (self.state.requests or queued)
            ):
                return
            await self._wakeup.wait()

    @staticmethod
    def _starts_per_workflow_task(max_concurrency: int) -> int:
        """How many tasks may be starting at once: ``STARTS_PER_WORKFLOW_TASK``
        when ``max_concurrency`` passes it (a task counts from its dispatch
        until its child started, an event of the next workflow task at the
        soonest), so one activation starts no more; else no bound. Runs
        recorded before ``_patches.PACED_STARTS`` start all they may."""
        paced = limits.STARTS_PER_WORKFLOW_TASK
        if max_concurrency > paced and _patches.patched(_patches.PACED_STARTS):
            return paced
        return max_concurrency

    def _started(self, task_id: str) -> None:
        """``task_id``'s child started: the dispatch loop may start another
        (a task that ends with no child started leaves the count as it
        settles, in ``_run_task``'s ``finally``)."""
        if task_id in self._starting:
            self._starting.discard(task_id)
            self._wakeup.set()

    @property
    def _dispatching(self) -> bool:
        """Whether new tasks may start: the run neither stopped nor is about
        to continue as new."""
        return not self._stop.stopped and not self._continuing

    async def _next_round(self, batch: deque[str]) -> deque[str]:
        """A round barrier: every ready task forms the next round, approved
        together with a look at the round that just completed."""
        if not batch:
            return batch
        self.state.rounds += 1
        rounds = self.state.rounds
        content = round_content(rounds, self._graph, self.state.last_round, batch)
        self.state.last_round = list(batch)
        approved = await self._ask_approval(
            f"round-{rounds}",
            "round",
            content,
            f"options.approvals.round: review round {rounds} before it starts",
        )
        return batch if approved else deque()

    # -- one task ----------------------------------------------------------

    async def _run_task(self, inp: TeamRunInput, task_id: str) -> None:
        spec, state = self._graph.specs[task_id], self._graph[task_id]
        agent = inp.team.agent(state.assignee or "")
        assert agent is not None
        # read before the finally: a run its stopped worker lets go of is
        # collected without a workflow event loop, and cleanup runs anyway
        child = task_workflow_id(workflow.info().workflow_id, task_id)
        try:
            while True:
                state.attempts += 1
                result = self._spending.tasks.merged(task_id, await self._attempt(inp, spec, agent))
                self._tool_requests.attempt_ended(child)
                if result.status == "cancelled" and self._stop.kind == "timeout":
                    result = self._stop.cut_short(result)
                self._sessions.record(agent.name, result.acp_session)
                if result.status == "completed":
                    self._complete(task_id, result)
                    return
                retry = state.attempts <= spec.max_retries and result.retryable
                if not retry or self._stop.stopped:
                    self._fail(task_id, result, retry_stopped=retry)
                    return
                delay = spec.retry_delay(state.attempts)
                self._events.emit(
                    "task_retry",
                    task_id,
                    f"attempt {state.attempts + 1} in {delay:g} s after "
                    f"{result.error_code}: {result.error}",
                )
                self._count_attempt(state, result)
                await delay_unless_stopped(
                    delay,
                    lambda: self._stop.stopped,
                    f"retry task {task_id}: attempt {state.attempts + 1}",
                )
                if self._stop.stopped:
                    # stopped during the delay: no new attempt
                    self._fail(task_id, result, counted=True, retry_stopped=True)
                    return
        except asyncio.CancelledError:
            # the run timed out, or was cancelled: this task ends with it
            cancelled = AgentRunResult(agent=agent.name, status="cancelled")
            merged = self._spending.tasks.merged(task_id, cancelled)
            self._fail(task_id, self._stop.cut_short(merged))
        except Exception as err:
            # a fault in reading the task's outcome must not leave it in
            # progress while the run goes on without it
            if isinstance(err, workflow.NondeterminismError) or not _patches.patched(
                _patches.EVERY_TASK_SETTLES
            ):
                raise
            workflow.logger.exception("task %s: its outcome could not be read", task_id)
            if self._graph[task_id].status == TaskStatus.IN_PROGRESS:
                self._fail(task_id, lost_outcome(agent.name, err), counted=True)
        finally:
            self._dispatcher.settled(agent.name)
            self._tool_requests.settled(child)
            self._in_flight.pop(task_id, None)
            self._starting.discard(task_id)
            self._wakeup.set()

    async def _attempt(
        self, inp: TeamRunInput, spec: TaskSpec, agent: AgentConfig
    ) -> AgentRunResult:
        """One attempt of a task: its prompt, then its ``AgentRun`` child."""
        try:
            prompt = self._graph.prompt(spec.id)
        except OMAError as err:
            return AgentRunResult(
                agent=agent.name, status="failed", error=err.message, error_code=err.code
            )
        left = self._spending.grant(0)
        run_input = AgentRunInput(
            agent=agent,
            input=prompt,
            task_id=spec.id,
            attempt=self._graph[spec.id].attempts,
            run_key=self._sessions.run_key if agent.kind == "acp" else None,
            acp_session=self._sessions.get(agent.name),
            token_budget=left.tokens_left,
            cost_budget_usd=left.cost_usd_left,
            pricing=self._options.pricing,
            approvals=self._options.approvals,
            models=self._options.recorded(),
            patched=_patches.FOR_TASKS,
        )
        return await attempt_task(
            spec,
            run_input,
            inp.team.name,
            self._graph[spec.id],
            self._visibility,
            searchable=self._options.task_search_attributes,
            started=lambda: self._started(spec.id),
        )

    def _complete(self, task_id: str, result: AgentRunResult) -> None:
        unblocked = self._graph.complete(task_id, result.output)
        self._events.emit("task_complete", task_id)
        self._count_attempt(self._graph[task_id], result)
        self._show_details()
        for dependent in unblocked:
            if self._dispatching:
                self._dispatcher.ready(dependent)
            else:
                self._graph[dependent].status = TaskStatus.PENDING
        self._check_continue_as_new()

    def _fail(
        self,
        task_id: str,
        result: AgentRunResult,
        counted: bool = False,
        retry_stopped: bool = False,
    ) -> None:
        error = result.error or f"the agent's turn ended {result.status}"
        dependents = self._graph.fail(task_id, error, result.error_code)
        self._events.emit("task_failed", task_id, f"{result.error_code}: {error}")
        if not counted:
            self._count_attempt(self._graph[task_id], result)
        reason = skip_reason(self._graph[task_id], self._stop.reason, retry_stopped=retry_stopped)
        for dependent in dependents:
            self._skip(dependent, reason)
        self._show_details()
        self._check_continue_as_new()

    def _skip(self, task_id: str, reason: str) -> None:
        gated = self._graph[task_id].status == TaskStatus.AWAITING_APPROVAL
        if self._graph.skip(task_id, reason):
            self._events.emit("task_skipped", task_id, reason)
            if gated:
                self._approvals.close(dispatch_request_id(task_id))

    def _skip_rest(self) -> None:
        """Skip every task that never started (the run stopped early)."""
        reason = f"skipped: {self._stop.reason or 'the run stopped'}"
        for task_id in self._graph.unsettled():
            self._skip(task_id, reason)
        self._approvals.close_all()

    # -- budgets --------------------------------------------------------------

    def _count_attempt(self, task: TaskState, result: AgentRunResult) -> None:
        """One attempt of ``task`` ended with ``result``: counted; a budget
        it used up stops the run."""
        self._spending.count_attempt(task, result)
        self._stop_if_over_budget()

    def count_step(self, result: AgentRunResult, step: str) -> None:
        """``StepCounter``: a coordinator step ended (``plan``,
        ``plan-correction``, ``synthesis``): counted; a budget it used up
        stops the run, but after the synthesis (the last step: a budget it
        spent stops nothing)."""
        self._spending.count_step(result)
        if step != "synthesis":
            self._stop_if_over_budget()

    def _stop_if_over_budget(self) -> None:
        """Stop the run if the token or the cost budget is used up
        (``RunSpending.over_budget``, the tasks in flight counted), the first
        time it is found so: its result says ``budget_exceeded``, a
        ``budget_exceeded`` event, and every task in flight that reported is
        told. Called after each task's attempt, coordinator step (but the
        synthesis), shard and usage report is counted, and where the run
        finds a budget used up before a dispatch or the synthesis (which
        then do not start)."""
        spent = self._spending.over_budget()
        if spent is not None and spent.first:
            self.state.result.budget_exceeded = True
            self._events.emit("budget_exceeded", detail=spent.detail)
            self.stop_with(spent.stop, spent.reason)
            self._spending.stopped()

    # -- stops, timeouts, continue-as-new -----------------------------------

    def stop_with(self, stop: StopKind, reason: str) -> None:
        """``RunStopper``: stop the run early (the first stop wins): no more
        dispatch, every request closed; a timeout cancels the tasks in flight."""
        if not self._stop.stop(stop, reason):
            return
        if self._sharded is not None and stop == "aborted":
            self._sharded.abort(reason)  # (a timeout: the shards have the same deadline)
        self._tool_requests.close_all(reason)
        self._approvals.close_all()
        if stop == "timeout":
            for in_flight in self._in_flight.values():
                in_flight.cancel()
        self._show_details()
        self._wakeup.set()

    def _check_continue_as_new(self) -> None:
        limit = self._options.history_event_limit
        if self._dispatching and _continue.due(limit, stored=self._stored):
            self._continuing = True
            self._wakeup.set()

    async def _continue_as_new(self, inp: TeamRunInput) -> None:
        await self._sessions.close()  # the next run opens its own
        self.state.round_robin = self._dispatcher.scheduler.round_robin
        try:
            with collection_held():  # the whole state, as JSON
                _continue.continue_as_new(
                    inp, self.state, self._graph, self._visibility, stored=self._stored
                )
        except OMAError as err:  # a state that cannot fit stops the run
            self.stop_with("too_large", err.message)

    async def _drain_after_cancel(self) -> None:
        # Temporal cancellation: cancel the children in flight (their
        # activities are cancelled in turn), wait for them to settle, and skip
        # everything that never started.
        self._stop.reason = CANCELLED_REASON
        for in_flight in self._in_flight.values():
            in_flight.cancel()
        if self._in_flight:
            await workflow.wait(list(self._in_flight.values()))
        self._skip_rest()
        self.state.result.status = "cancelled"
        self._events.emit("run_end", detail="cancelled")
        self._visibility.ended("cancelled", RunCancelledError.code)
        self._show_details()

    # -- the result ---------------------------------------------------------

    def _finish(self, status: TeamRunStatus | None = None) -> TeamRunResult:
        failed = self._graph.any_failed() or bool(self._sharded and self._sharded.any_failed())
        ended = settle_outcome(self.state.result, self._stop, failed, status)
        self._events.emit("run_end", detail=ended)
        return self.state.result

    def _end(self, result: TeamRunResult) -> dict[str, Any]:
        """Show how the run ended (search attributes, details); a run that did
        not succeed ends Failed (from ``_patches.FAILED_STATE`` on), its result in
        the failure's details, so no failed run looks successful in the Web UI.
        The result is fitted into the run's budget first
        (``sent_result``: defaults left out, outputs kept by reference);
        one that cannot fit fails the run ``RUN_STATE_TOO_LARGE`` without it,
        rather than fail its workflow task for good."""
        with as_failure():
            try:
                with collection_held():  # the whole result, as JSON and back
                    sent = sent_result(result, workflow.info().workflow_id, stored=self._stored)
                    result = self.state.result = TeamRunResult.model_validate(sent)
            except OMAError as err:
                self._visibility.ended("failed", err.code)
                self._show_details()
                raise
        self._visibility.ended(
            result.status, None if result.success else result.error_code or TaskFailedError.code
        )
        self._show_details()
        if not result.success and _patches.patched(_patches.FAILED_STATE):
            raise team_run_failure(self._team_name, result, sent)
        return sent

    def _show_details(self) -> None:
        # the Web UI's detail page and `temporal workflow describe` show it;
        # metadata, not a command: no patch needed; the tally, not a recount
        # of every task, says how many settled (O(1) per settle)
        settled = self._sharded.settled if self._sharded else self._graph.tally.ended
        awaiting = self._approvals.gate.open
        stopping = self._stop.reason if self._stop.stopped else None
        details = team_run_details(self._team_name, self.state.result, settled, awaiting, stopping)
        workflow.set_current_details(details)
