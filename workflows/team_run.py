"""``TeamRun``: a team executes a task graph, as a workflow.

The life of a run, top to bottom in ``run``: validate the input and the graph,
dispatch every task whose dependencies completed (each an ``AgentRun`` child
workflow), cascade a failure to the dependents, and report.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from oma.dag import dependents_map, transitive_dependents, validate_task_graph
    from oma.errors import OMAError, application_error
    from oma.prompt import task_prompt
    from oma.results import AcpSessionInfo, AgentRunResult, TeamRunResult
    from oma.run_input import AgentRunInput, TeamRunInput, parse_team_run_input
    from oma.task import TaskSpec, TaskState, TaskStatus
    from workflows._acp import close_acp_sessions


def task_result_key(task_id: str) -> str:
    """The shared-memory key under which a completed task's output is stored."""
    return f"task:{task_id}:result"


@workflow.defn(name="TeamRun")
class TeamRun:
    """Runs a team over a task graph and returns a ``TeamRunResult``.

    Input: a ``TeamRunInput`` as JSON. It is decoded as plain JSON and
    validated here, so bad input fails the workflow at once, before any task
    runs, with ``INVALID_RUN_INPUT`` (a field, named by path) or
    ``INVALID_TASK_GRAPH`` (unknown assignee or dependency, duplicate id, cycle).
    """

    def __init__(self) -> None:
        # One structure holds the run's state: the result being built.
        self._result = TeamRunResult(success=False, status="running", tasks=[])
        self._specs: dict[str, TaskSpec] = {}
        self._states: dict[str, TaskState] = {}
        self._dependents: dict[str, list[str]] = {}
        self._waiting_on: dict[str, int] = {}
        self._ready: deque[str] = deque()
        self._in_flight: set[asyncio.Task[None]] = set()
        # ACP agents hold one conversation: one task at a time, in one session
        self._acp_busy: set[str] = set()
        self._acp_sessions: dict[str, AcpSessionInfo] = {}

    @workflow.run
    async def run(self, raw_input: Any) -> TeamRunResult:
        inp = self._validate(raw_input)
        self._load(inp)
        try:
            await self._dispatch_until_settled(inp)
        except asyncio.CancelledError:
            await self._drain_after_cancel()
            raise
        finally:
            await self._close_acp_sessions()
        return self._finish()

    @workflow.query(name="state")
    def state(self) -> TeamRunResult:
        """The run so far: every task's status, results and shared memory."""
        return self._result

    @workflow.query(name="shared_memory")
    def shared_memory(self) -> dict[str, str]:
        """The run's shared memory: ``task:<id>:result`` -> output, so far."""
        return self._result.shared_memory

    def _validate(self, raw_input: Any) -> TeamRunInput:
        try:
            inp = parse_team_run_input(raw_input)
            validate_task_graph(inp.tasks, (a.name for a in inp.team.agents))
        except OMAError as err:
            raise application_error(err) from None
        return inp

    def _load(self, inp: TeamRunInput) -> None:
        self._specs = {t.id: t for t in inp.tasks}
        self._dependents = dependents_map(inp.tasks)
        self._waiting_on = {t.id: len(t.depends_on) for t in inp.tasks}
        for t in inp.tasks:
            status = TaskStatus.BLOCKED if t.depends_on else TaskStatus.PENDING
            self._states[t.id] = TaskState(**t.model_dump(), status=status)
            if not t.depends_on:
                self._ready.append(t.id)
        self._result.tasks = list(self._states.values())

    async def _dispatch_until_settled(self, inp: TeamRunInput) -> None:
        # Event-driven, not in rounds: whenever a task settles, every task it
        # unblocked is dispatched at once, up to max_concurrency in flight.
        while self._ready or self._in_flight:
            while len(self._in_flight) < inp.options.max_concurrency:
                task_id = self._next_ready(inp)
                if task_id is None:
                    break
                spec = self._specs[task_id]
                self._in_flight.add(asyncio.create_task(self._run_task(inp, spec)))
            _, pending = await workflow.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
            self._in_flight = set(pending)

    def _next_ready(self, inp: TeamRunInput) -> str | None:
        """The first ready task whose assignee can take it now (an ACP agent
        that is busy with another task cannot)."""
        for i, task_id in enumerate(self._ready):
            if self._specs[task_id].assignee not in self._acp_busy:
                del self._ready[i]
                return task_id
        return None

    async def _drain_after_cancel(self) -> None:
        # Temporal cancellation: cancel the children in flight (their
        # activities are cancelled in turn), wait for them to settle, and skip
        # everything that never started.
        for in_flight in self._in_flight:
            in_flight.cancel()
        if self._in_flight:
            await workflow.wait(self._in_flight)
        for state in self._states.values():
            if state.status in (TaskStatus.BLOCKED, TaskStatus.PENDING):
                state.status = TaskStatus.SKIPPED
                state.error = "skipped: the run was cancelled"
        self._result.status = "cancelled"

    async def _close_acp_sessions(self) -> None:
        queues = sorted({s.worker_task_queue for s in self._acp_sessions.values()})
        if queues:
            await close_acp_sessions(self._run_key(), set(queues))

    def _run_key(self) -> str:
        info = workflow.info()
        return f"{info.workflow_id}/{info.run_id}"

    async def _run_task(self, inp: TeamRunInput, spec: TaskSpec) -> None:
        state = self._states[spec.id]
        agent = inp.team.agent(spec.assignee)
        assert agent is not None  # validated
        state.status = TaskStatus.IN_PROGRESS
        prompt = task_prompt(
            spec, [(self._specs[d].title, self._states[d].output or "") for d in spec.depends_on]
        )
        is_acp = agent.backend is not None and agent.backend.kind == "acp"
        if is_acp:
            self._acp_busy.add(agent.name)
        try:
            result: AgentRunResult = await workflow.execute_child_workflow(
                "AgentRun",
                AgentRunInput(
                    agent=agent,
                    input=prompt,
                    task_id=spec.id,
                    run_key=self._run_key() if is_acp else None,
                    acp_session=self._acp_sessions.get(agent.name),
                ),
                id=f"{workflow.info().workflow_id}/{spec.id}",
                result_type=AgentRunResult,
            )
        except ChildWorkflowError as err:
            result = _failed_result(agent.name, err)
        finally:
            self._acp_busy.discard(agent.name)
        if result.acp_session is not None:
            self._acp_sessions[agent.name] = result.acp_session
        if result.status == "completed":
            self._complete(spec.id, result)
        else:
            self._fail(spec.id, result)

    def _complete(self, task_id: str, result: AgentRunResult) -> None:
        state = self._states[task_id]
        state.status = TaskStatus.COMPLETED
        state.output = result.output
        self._record(task_id, result)
        self._result.shared_memory[task_result_key(task_id)] = result.output
        for dependent in self._dependents[task_id]:
            self._waiting_on[dependent] -= 1
            if self._waiting_on[dependent] == 0:
                self._states[dependent].status = TaskStatus.PENDING
                self._ready.append(dependent)

    def _fail(self, task_id: str, result: AgentRunResult) -> None:
        state = self._states[task_id]
        state.status = TaskStatus.FAILED
        state.error = result.error or f"the agent's turn ended {result.status}"
        self._record(task_id, result)
        reason = f"skipped: dependency {task_id!r} ({state.title}) failed"
        for dependent in transitive_dependents(task_id, self._dependents):
            skipped = self._states[dependent]
            if skipped.status in (TaskStatus.BLOCKED, TaskStatus.PENDING):
                skipped.status = TaskStatus.SKIPPED
                skipped.error = reason

    def _record(self, task_id: str, result: AgentRunResult) -> None:
        self._result.task_results[task_id] = result
        self._result.total_token_usage += result.token_usage

    def _finish(self) -> TeamRunResult:
        failed = any(s.status == TaskStatus.FAILED for s in self._states.values())
        self._result.status = "failed" if failed else "completed"
        self._result.success = not failed
        return self._result


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
