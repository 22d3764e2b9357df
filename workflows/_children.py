"""What a failed ``AgentRun`` child says, as the parent reads it."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from oma.core.errors import AgentRunFailedError, RunCancelledError
    from oma.core.results import AgentRunResult


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
