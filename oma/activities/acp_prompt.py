"""The ACP activities: ``acp_prompt`` (one prompt turn of an ``acp`` agent) and
``acp_close_run`` (end every session a run opened on this worker).

docs/external-agents.md, "Sessions on Temporal": the session outlives the
activity in the worker's ``SessionPool``; every output names this worker's own
task queue so that the workflow routes the agent's later turns back here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity

from oma.activities._attempt import (
    attempt_number,
    attempt_superseded,
    await_server,
    with_attempt,
)
from oma.activities._heartbeat import TextProgress, heartbeating
from oma.activities.acp import SessionPool
from oma.core.contracts.acp import (
    AcpCloseRunInput,
    AcpCloseRunOutput,
    AcpPromptInput,
    AcpPromptOutput,
)
from oma.core.contracts.names import ActivityName
from oma.core.schema.errors import OMAError
from oma.core.schema.limits import check_output_size

if TYPE_CHECKING:
    from oma.activities.acp import AcpSession, TurnResult

HEARTBEAT_INTERVAL_S = 0.5
"""Most seconds between two heartbeats while a turn runs (new text sends one
sooner). Temporal delivers activity cancellation in the answer to a
heartbeat, so this bounds how late a cancel reaches the agent."""


class AcpActivities:
    """The ACP activities of one worker, sharing its ``SessionPool``.

    ``worker_task_queue`` is the task queue only this worker polls; it is
    returned in every ``AcpPromptOutput``.
    """

    def __init__(self, pool: SessionPool, worker_task_queue: str) -> None:
        self.pool = pool
        self.worker_task_queue = worker_task_queue

    @activity.defn(name=ActivityName.ACP_PROMPT)
    async def acp_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        """Send ``inp.prompt`` to the agent's session, opening the session first
        when this worker holds none for (``run_key``, ``agent``).

        Heartbeats at least every ``HEARTBEAT_INTERVAL_S`` seconds, and
        within ``PROGRESS_HEARTBEAT_GAP_S`` of new text, with
        ``{"output_chars": int, "last_text": str}``: the length of the agent's
        text so far and its last 200 characters (redacted), the progress text
        ``oma run`` shows; from the second attempt on, also ``"attempt": int``.

        On cancellation the turn is cancelled (``AcpSession.cancel``): if the
        agent ends it within the grace period, the partial result is returned
        (stop reason as the agent sent it, normally ``cancelled``); otherwise
        its process tree is killed and the cancellation propagates. When
        Temporal no longer accepts this attempt (``attempt_superseded``: a
        heartbeat refused because the attempt timed out, was retried or reset)
        there is no cooperative cancel: the agent's process tree gets SIGKILL
        at once and the session is dropped, since the next attempt may
        already be prompting the agent again.

        Once the turn has ended (or failed), the outcome is held until the
        Temporal server answers (``await_server``), so that an outage does not
        lose it. ``attempt`` in the output is the activity's attempt.

        Raises (a worker records the failure of its code, details
        ``{"code", "attempt"}``): ``ACP_SPAWN_FAILED``, ``ACP_PROTOCOL_ERROR``,
        ``INVALID_RUN_INPUT`` (non-retryable); ``ACP_AGENT_EXITED`` (retryable:
        the dead session is dropped, so the next attempt opens a fresh one).
        """
        if activity.in_activity() and activity.is_cancelled():
            raise asyncio.CancelledError()
        attempt = attempt_number()
        progress = _Progress(attempt)
        with heartbeating(progress.details, HEARTBEAT_INTERVAL_S) as progress.heartbeat:
            session, new = await self.pool.get_or_open(
                inp.run_key, inp.agent, inp.backend, inp.system_prompt, inp.resume_session_id
            )
            try:
                result = await self._prompt(session, inp, progress, attempt)
            except OMAError:
                await await_server()  # a failed turn is an outcome to report too
                raise
            finally:
                if not session.alive:
                    await self.pool.discard(inp.run_key, inp.agent, session)
            await await_server()
        check_output_size(inp.agent, len(result.output.encode()))
        return AcpPromptOutput(
            output=result.output,
            stop_reason=result.stop_reason,
            tool_calls=result.tool_calls,
            permission_requests=result.permission_requests,
            token_usage=result.token_usage,
            session_id=session.session_id,
            worker_task_queue=self.worker_task_queue,
            new_session=new,
            loaded_session=session.loaded_session,
            attempt=attempt,
        )

    @activity.defn(name=ActivityName.ACP_CLOSE_RUN)
    async def acp_close_run(self, inp: AcpCloseRunInput) -> AcpCloseRunOutput:
        """Close every session of ``inp.run_key`` on this worker and kill their
        process trees."""
        return AcpCloseRunOutput(closed_sessions=await self.pool.close_run(inp.run_key))

    async def _prompt(
        self, session: AcpSession, inp: AcpPromptInput, progress: _Progress, attempt: int
    ) -> TurnResult:
        turn = await session.start_prompt(inp.prompt, progress.add)
        try:
            return await turn.result()
        except asyncio.CancelledError:
            if attempt_superseded():
                activity.logger.warning(
                    "Temporal no longer accepts attempt %d of this ACP turn: killing "
                    "agent %r (pid %d) at once",
                    attempt,
                    inp.agent,
                    session.pid,
                )
                await self.pool.discard(inp.run_key, inp.agent, session, at_once=True)
                raise
            partial = await turn.cancel()
            if partial is None:
                raise
            # Temporal records this result if the workflow still waits for it.
            return partial


class _Progress(TextProgress):
    """How much text the agent has sent in this turn, and its latest part."""

    def __init__(self, attempt: int) -> None:
        super().__init__()
        self.attempt = attempt

    def details(self) -> dict[str, object]:
        return with_attempt(super().details(), self.attempt)
