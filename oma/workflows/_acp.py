"""A run's ACP sessions, on the workers that hold them: closing them, shared by
TeamRun and a standalone AgentRun, and the sessions a TeamRun's agents use."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.acp import AcpCloseRunInput, AcpCloseRunOutput
    from oma.core.contracts.names import ActivityName
    from oma.core.schema.results import AcpSessionInfo
    from oma.workflows import _options
    from oma.workflows._pinned import close_on_workers


class RunSessions:
    """The ACP session each agent of a team run holds, one per agent for the
    whole run (a later task of the agent goes on in it), keyed by the run."""

    def __init__(self) -> None:
        self._sessions: dict[str, AcpSessionInfo] = {}

    @property
    def run_key(self) -> str:
        """``<workflow id>/<Temporal run id>``: what the workers key the sessions by."""
        info = workflow.info()
        return f"{info.workflow_id}/{info.run_id}"

    def get(self, agent: str) -> AcpSessionInfo | None:
        return self._sessions.get(agent)

    def record(self, agent: str, session: AcpSessionInfo | None) -> None:
        if session is not None:
            self._sessions[agent] = session

    async def close(self) -> None:
        """Close every session of the run (a continued run opens its own)."""
        queues = {s.worker_task_queue for s in self._sessions.values()}
        self._sessions.clear()
        if queues:
            await close_acp_sessions(self.run_key, queues)


async def close_acp_sessions(run_key: str, queues: set[str]) -> None:
    """Dispose the run's ACP sessions on every worker that holds one
    (``acp_close_run``); a worker that is gone took its subprocesses with it."""
    await close_on_workers(
        queues,
        ActivityName.ACP_CLOSE_RUN,
        AcpCloseRunInput(run_key=run_key),
        AcpCloseRunOutput,
        _options.ACP_CLOSE_RUN,
        "ACP sessions",
    )
