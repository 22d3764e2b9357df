"""``AgentRun`` children as ``TeamRun`` runs them: one attempt of a task,
bounded by its ``timeout_s``, and what a failed child says."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from oma.core.contracts.names import WorkflowName
    from oma.core.contracts.visibility import task_summary
    from oma.core.contracts.workflow_ids import task_workflow_id
    from oma.core.rules.payload_fit import SHORT_OUTPUT_BYTES
    from oma.core.rules.team_run_state import CANCELLED_WITH_RUN
    from oma.core.schema.errors import AgentRunFailedError, RunCancelledError, TaskTimeoutError
    from oma.core.schema.results import AgentRunResult
    from oma.core.schema.run_input import AgentRunInput
    from oma.core.schema.task import TaskSpec, TaskState
    from oma.workflows import _patches
    from oma.workflows._visibility import Visibility


async def attempt_task(
    spec: TaskSpec,
    run_input: AgentRunInput,
    team: str,
    state: TaskState,
    visibility: Visibility,
    *,
    searchable: bool = True,
    started: Callable[[], None] | None = None,
) -> AgentRunResult:
    """One attempt of task ``spec`` of a run of ``team``: an ``AgentRun`` child
    ``<run id>/<task id>`` of ``run_input`` (summary ``agent: task title``, and
    the search attributes ``OmaTeam``, ``OmaAgent``, ``OmaTask``, as the
    run's ``visibility`` gives them, or none when not ``searchable``), cancelled
    after ``spec.timeout_s`` seconds (then the result is a retryable
    ``TASK_TIMEOUT`` failure); ``started()`` is called once the child started.
    A failed child gives its
    partial result (``failed_result``); never raises for the child's failure.
    A completed attempt's execution is noted in the task's ``state``
    (``output_run_id``)."""
    agent = run_input.agent.name
    attributes, memo = visibility.for_task(
        team=team, agent=agent, task=spec.id, searchable=searchable
    )
    handle = await workflow.start_child_workflow(
        WorkflowName.AGENT_RUN,
        run_input.wire(),
        id=task_workflow_id(workflow.info().workflow_id, spec.id),
        # decoded here (``_decoded``), not by the SDK: a result of another
        # shape fails this task, not every workflow task of the run
        result_type=RawValue,
        static_summary=task_summary(agent, spec.id, spec.title),
        search_attributes=attributes,
        memo=memo,
    )
    if started is not None:
        started()
    try:
        if spec.timeout_s is None:
            return _noted(state, handle, _decoded(await handle))
        done, _ = await workflow.wait([handle], timeout=spec.timeout_s)
        if done:
            return _noted(state, handle, _decoded(handle.result()))
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


def _noted(
    state: TaskState, handle: workflow.ChildWorkflowHandle[Any, Any], result: AgentRunResult
) -> AgentRunResult:
    """``result``; when it completed, its execution is the one whose result
    holds the task's output: a reference to it names that run id, since a
    later run under the same workflow id may start a child of the same id
    (an output a fit keeps inline, ``SHORT_OUTPUT_BYTES``, needs none).
    (State, not a command: replays the same.)"""
    if result.status == "completed" and len(result.output.encode()) > SHORT_OUTPUT_BYTES:
        state.output_run_id = handle.first_execution_run_id
    return result


def _decoded(raw: RawValue) -> AgentRunResult:
    result: AgentRunResult = workflow.payload_converter().from_payload(raw.payload, AgentRunResult)
    return result


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
            error=CANCELLED_WITH_RUN,
            error_code=RunCancelledError.code,
        )
    if isinstance(cause, ApplicationError):
        partial = _partial_result(cause.details)
        if partial is not None:
            return partial
        return AgentRunResult(
            agent=agent,
            status="failed",
            error=cause.message,
            error_code=cause.type or AgentRunFailedError.code,
        )
    return AgentRunResult(
        agent=agent,
        status="failed",
        error=str(cause or err),
        error_code=AgentRunFailedError.code,
    )


def _partial_result(details: Sequence[Any]) -> AgentRunResult | None:
    """The partial ``AgentRunResult`` a failed ``AgentRun`` sent as its
    failure's first detail; ``None`` when the failure carries none (a child
    that failed before it could say, or from before it said it)."""
    first = details[0] if details else None
    if not isinstance(first, dict):
        return None
    try:
        return AgentRunResult.model_validate(first)
    except ValidationError:
        if not _patches.patched(_patches.EVERY_TASK_SETTLES):
            raise
        return None


def lost_outcome(agent: str, err: Exception) -> AgentRunResult:
    """The result of a task whose outcome ``TeamRun`` could not read
    (``err``): failed, ``AGENT_RUN_FAILED``, not retried."""
    return AgentRunResult(
        agent=agent,
        status="failed",
        error=f"the team run could not read the task's outcome: {type(err).__name__}: {err}",
        error_code=AgentRunFailedError.code,
    )
