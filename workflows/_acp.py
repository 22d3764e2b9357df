"""Closing a run's ACP sessions, shared by TeamRun and a standalone AgentRun."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from oma.core.acp import AcpCloseRunInput, AcpCloseRunOutput
    from oma.workflows import _options


async def close_acp_sessions(run_key: str, queues: set[str]) -> None:
    """Dispose the run's ACP sessions on every worker that holds one. A worker
    that is gone took its subprocesses with it, so its timeout is not an error."""
    for queue in sorted(queues):
        try:
            await workflow.execute_activity(
                "acp_close_run",
                AcpCloseRunInput(run_key=run_key),
                result_type=AcpCloseRunOutput,
                task_queue=queue,
                **_options.ACP_CLOSE_RUN,
            )
        except ActivityError as err:
            workflow.logger.warning("could not close ACP sessions on %s: %s", queue, err)
