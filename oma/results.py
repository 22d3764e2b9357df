"""What runs return: ``AgentRunResult`` for one agent run, ``TeamRunResult`` for a team.

``TeamRunResult`` is exactly what ``temporal workflow result`` prints.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from oma.evaluation import EvaluationRecord
from oma.messages import LLMMessage
from oma.task import TaskState
from oma.usage import TokenUsage

AgentRunStatus = Literal["completed", "failed", "cancelled"]
"""``cancelled``: an ACP turn that ended with stopReason ``cancelled`` (partial output)."""
TeamRunStatus = Literal["running", "completed", "failed", "cancelled"]


class ToolCallRecord(BaseModel):
    """One tool call an agent made (LLM tool loop) or reported (ACP ``tool_call``)."""

    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    status: str | None = None
    output: str | None = None


class PermissionRecord(BaseModel):
    """One ACP ``session/request_permission`` and the answer OMA gave."""

    tool_call_id: str | None = None
    title: str = ""
    kind: str | None = None
    option_kinds: list[str] = Field(default_factory=list)
    outcome: Literal["selected", "cancelled"]
    option_id: str | None = None
    approved: bool


class AcpSessionInfo(BaseModel):
    """Where an ACP agent's session lives: later turns are routed to that worker."""

    session_id: str
    worker_task_queue: str = Field(description="The worker's own task queue.")
    new_session: bool = Field(description="True when this run's turn opened the session.")
    loaded_session: bool = Field(default=False, description="Opened with session/load.")


class AgentRunResult(BaseModel):
    """The outcome of one agent run (an ``AgentRun`` workflow)."""

    agent: str
    status: AgentRunStatus
    output: str = Field(default="", description="The final text the agent produced.")
    error: str | None = Field(default=None, description="Why the run failed, for a user to read.")
    error_code: str | None = Field(
        default=None, description="Stable code of the error (see oma.errors)."
    )
    turns: int = Field(
        default=0, description="Model turns (LLM) or prompt turns (ACP) taken; 1 for a process run."
    )
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    budget_exceeded: bool = False
    messages: list[LLMMessage] = Field(
        default_factory=list, description="LLM agents: the conversation, including the answer."
    )
    stop_reason: str | None = Field(default=None, description="ACP agents: the turn's stopReason.")
    permission_requests: list[PermissionRecord] = Field(
        default_factory=list, description="ACP agents: every permission request and its answer."
    )
    acp_session: AcpSessionInfo | None = Field(
        default=None, description="ACP agents: the session the turn ran in."
    )
    evaluation: EvaluationRecord | None = Field(
        default=None, description="The online evaluation of this run, when it was sampled."
    )


class TeamRunResult(BaseModel):
    """The outcome of a ``TeamRun`` workflow.

    ``status`` is ``completed`` when every task completed, ``failed`` when any
    failed (its dependents are then ``skipped``).
    """

    success: bool
    status: TeamRunStatus
    tasks: list[TaskState]
    task_results: dict[str, AgentRunResult] = Field(
        default_factory=dict, description="Keyed by task id; only tasks that ran."
    )
    total_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    shared_memory: dict[str, str] = Field(
        default_factory=dict,
        description="The run's shared memory at the end, e.g. task:<id>:result.",
    )
