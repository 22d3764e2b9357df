"""``AgentRun`` children as ``TeamRun`` runs them: one attempt of a task,
bounded by its ``timeout_s``, and what a failed child says."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from oma.core.errors import AgentRunFailedError, RunCancelledError, TaskTimeoutError
    from oma.core.results import AgentRunResult
    from oma.core.run_input import AgentRunInput
    from oma.core.task import TaskSpec
    from oma.core.visibility import task_summary
    from oma.core.workflow_ids import task_workflow_id
    from oma.workflows import _visibility


async def attempt_task(spec: TaskSpec, run_input: AgentRunInput, team: str) -> AgentRunResult:
    """One attempt of task ``spec`` of a run of ``team``: an ``AgentRun`` child
    ``<run id>/<task id>`` of ``run_input`` (summary ``agent: task title``, and
    the search attributes ``OmaTeam``, ``OmaAgent``, ``OmaTask``), cancelled
    after ``spec.timeout_s`` seconds (then the result is a retryable
    ``TASK_TIMEOUT`` failure). A failed child gives its
    partial result (``failed_result``); never raises for the child's failure."""
    agent = run_input.agent.name
    handle = await workflow.start_child_workflow(
        "AgentRun",
        run_input,
        id=task_workflow_id(workflow.info().workflow_id, spec.id),
        result_type=AgentRunResult,
        static_summary=task_summary(agent, spec.id, spec.title),
        search_attributes=_visibility.for_child(team=team, agent=agent, task=spec.id),
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
        return failed_result(agent, err)
    handle.cancel()
    with contextlib.suppress(ChildWorkflowError, asyncio.CancelledError):
        await handle
    return AgentRunResult(
        agent=agent,
        status="failed",
        error=f"task {spec.id!r} ran longer than its timeout_s ({spec.timeout_s:g} s)",
        error_code=TaskTimeoutError.code,
        retryable=True,
    )


def failed_result(agent: str, err: ChildWorkflowError) -> AgentRunResult:
    """The ``AgentRunResult`` of a failed child: its own partial result when it
    sent one in the failure details, else one built from the failure
    (``CANCELLED`` when it was cancelled, ``AGENT_RUN_FAILED`` when the
    failure carries no code)."""
    cause = err.cause
    if isinstance(cause, CancelledError):
        return AgentRunResult(
            agent=agent,
            status="cancelled",
            error="cancelled with the run",
            error_code=RunCancelledError.code,
        )
    if isinstance(cause, ApplicationError):
        if cause.details and isinstance(cause.details[0], dict):
            return AgentRunResult.model_validate(cause.details[0])
        return AgentRunResult(
            agent=agent, status="failed", error=cause.message, error_code=cause.type
        )
    return AgentRunResult(
        agent=agent,
        status="failed",
        error=str(cause or err),
        error_code=AgentRunFailedError.code,
    )
