"""Input and output of the ACP activities: ``acp_prompt`` (one ``session/prompt``
turn) and ``acp_close_run`` (dispose every session a run opened on a worker).

Names at the boundary follow the Agent Client Protocol (``stopReason`` values
``end_turn``, ``max_tokens``, ``max_turn_requests``, ``refusal``,
``cancelled``; ``session/update`` kinds ``agent_message_chunk``,
``tool_call``, ``tool_call_update``, ``usage_update``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.schema.backends import AcpBackendConfig
from oma.core.schema.errors import AgentRefusalError, RunCancelledError, UnknownStopReasonError
from oma.core.schema.results import AcpSessionInfo, AgentRunResult, PermissionRecord, ToolCallRecord
from oma.core.schema.usage import TokenUsage


class AcpPromptInput(BaseModel):
    """One prompt turn for an ACP agent.

    ``run_key`` identifies the run that owns the session (the ``TeamRun``'s
    workflow id and Temporal run id); sessions are pooled per (``run_key``,
    ``agent``).
    ``resume_session_id`` is the session an earlier worker opened: a worker
    that has no live session for the key opens a new one and, when the agent
    advertises ``loadSession``, loads that session instead of starting blank.
    """

    run_key: str
    agent: str
    backend: AcpBackendConfig
    system_prompt: str = ""
    prompt: str
    resume_session_id: str | None = None


class AcpPromptOutput(BaseModel):
    """What one prompt turn produced."""

    output: str = Field(
        description="agent_message_chunk text: the turn's messages assembled per messageId, "
        "joined by a blank line, a message re-sent whole under a new messageId kept once; "
        "chunks without messageId joined exactly as sent (docs/external-agents.md)."
    )
    stop_reason: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    permission_requests: list[PermissionRecord] = Field(default_factory=list)
    token_usage: TokenUsage = Field(
        default_factory=TokenUsage,
        description="usage_update.used increment since the session's previous reading, "
        "as input_tokens (output_tokens 0).",
    )
    session_id: str
    worker_task_queue: str = Field(
        description="This worker's own task queue: route later turns here."
    )
    new_session: bool = Field(description="True when this turn opened the session.")
    loaded_session: bool = Field(default=False, description="True when opened with session/load.")
    attempt: int = Field(
        default=1,
        description="The activity attempt that ran the turn: more than 1 when Temporal "
        "started it again, so that the prompt may have been sent that many times.",
    )


class AcpCloseRunInput(BaseModel):
    """Close every session of ``run_key`` on this worker and end their processes."""

    run_key: str


class AcpCloseRunOutput(BaseModel):
    closed_sessions: int


def record_acp_turn(result: AgentRunResult, out: AcpPromptOutput) -> None:
    """Map one prompt turn onto ``result`` (docs/external-agents.md, the
    table of ACP updates and stop reasons under "``acp``"): ``end_turn``
    completes; ``max_tokens`` and ``max_turn_requests`` complete with
    ``budget_exceeded``; ``cancelled`` keeps the partial output with status
    ``cancelled`` and error code ``CANCELLED``.

    Raises ``AgentRefusalError`` for ``refusal`` and ``UnknownStopReasonError``
    for a stop reason the protocol does not define (the turn is recorded first).
    """
    result.turns = 1
    result.backend_attempts = out.attempt
    result.output = out.output
    result.stop_reason = out.stop_reason
    result.tool_calls = out.tool_calls
    result.permission_requests = out.permission_requests
    result.token_usage = out.token_usage
    result.acp_session = AcpSessionInfo(
        session_id=out.session_id,
        worker_task_queue=out.worker_task_queue,
        new_session=out.new_session,
        loaded_session=out.loaded_session,
    )
    if out.stop_reason in ("max_tokens", "max_turn_requests"):
        result.budget_exceeded = True
    elif out.stop_reason == "cancelled":
        # one code for one outcome: a process task cancelled is CANCELLED too
        result.status = "cancelled"
        result.error = f"agent {result.agent!r} ended its turn cancelled (stopReason cancelled)"
        result.error_code = RunCancelledError.code
    elif out.stop_reason == "refusal":
        raise AgentRefusalError(f"agent {result.agent!r} refused the prompt (stopReason refusal)")
    elif out.stop_reason != "end_turn":
        raise UnknownStopReasonError(
            f"agent {result.agent!r} ended its turn with unknown stopReason {out.stop_reason!r}"
        )
