"""What runs return: ``AgentRunResult`` for one agent run, ``TeamRunResult`` for a team.

``TeamRunResult`` is exactly what ``temporal workflow result`` prints.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from oma.core.schema.approvals import ApprovalDecision
from oma.core.schema.evaluation import EvaluationRecord
from oma.core.schema.messages import LLMMessage
from oma.core.schema.plan import PlanArtifact
from oma.core.schema.task import TaskState, TaskStatus
from oma.core.schema.usage import TokenUsage

AgentRunStatus = Literal["completed", "failed", "cancelled"]
"""``cancelled``: an ACP turn that ended with stopReason ``cancelled`` (partial output)."""
TeamRunStatus = Literal["running", "planned", "completed", "failed", "rejected", "cancelled"]


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
        default=None, description="Stable code of the error (see oma.core.schema.errors)."
    )
    turns: int = Field(
        default=0, description="Model turns (LLM) or prompt turns (ACP) taken; 1 for a process run."
    )
    backend_attempts: int = Field(
        default=0,
        description="Process and ACP agents: how many times Temporal ran the process_run or "
        "acp_prompt activity (its attempts). 1 normally; more when Temporal started it "
        "again (a lost worker, an outage longer than the heartbeat timeout, a retryable "
        "ACP error), so the command or the prompt turn may have run that many times. "
        "0 for an LLM agent, or when the run ended before its backend ran.",
    )
    recorded_turns: int = Field(
        default=0,
        description="Model turns answered from a recorded run (options.models 'recorded': "
        "the turn's recorded_from), not by the provider; their tokens are the recording's, "
        "their cost zero.",
    )
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    budget_exceeded: bool = False
    retryable: bool = Field(
        default=False,
        description="A failed run whose error is transient (rate limit, server or "
        "network error, timeout): a team task may retry it (max_retries).",
    )
    messages: list[LLMMessage] = Field(
        default_factory=list, description="LLM agents: the conversation, including the answer."
    )
    messages_omitted: int = Field(
        default=0,
        description="How many leading messages of a long conversation ``messages`` leaves out "
        "(an AgentRun's result stays well under Temporal's payload limit); the AgentRun's "
        "conversation query has them all.",
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
    approval_decisions: list[ApprovalDecision] = Field(
        default_factory=list, description="LLM agents: the decisions on gated tool calls."
    )


def keep_latest_messages(result: AgentRunResult, max_bytes: int) -> None:
    """Trim ``result.messages`` to its latest messages that fit in ``max_bytes``
    of JSON (at least the last one), counting the rest in ``messages_omitted``."""
    kept: list[LLMMessage] = []
    size = 0
    for message in reversed(result.messages):
        size += len(message.model_dump_json())
        if kept and size > max_bytes:
            break
        kept.append(message)
    result.messages_omitted += len(result.messages) - len(kept)
    result.messages = kept[::-1]


class ShardResult(BaseModel):
    """One shard of a sharded run (a tasks run of more than
    ``limits.MAX_RUN_TASKS`` tasks: ``oma.core.rules.shards``): a ``TeamRun``
    child of its own, workflow id ``<run id>/shard/<n>``, whose result holds
    its tasks' states (``oma show <run id>/shard/<n>``)."""

    run_id: str = Field(description="The shard's TeamRun workflow id, <run id>/shard/<n>.")
    status: TeamRunStatus | None = Field(
        default=None,
        description="How the shard's run ended ('running' while it runs); none: it never started.",
    )
    tasks: int = Field(description="How many tasks the shard holds.")
    first_task: str = Field(description="The id of its first task, in the run's order.")
    completed: int = 0
    failed: int = 0
    skipped: int = Field(
        default=0, description="Its tasks skipped, all of them for a shard never started."
    )
    error: str | None = Field(
        default=None, description="Why the shard stopped early, or never started, if so."
    )
    error_code: str | None = None


class TeamRunResult(BaseModel):
    """The outcome of a ``TeamRun`` workflow (also what its ``state`` query shows).

    ``status``: ``completed`` when every task completed; ``failed`` when a task
    failed (its dependents are ``skipped``), the run timed out, or the token
    or cost budget ran out (``error_code`` says which); ``rejected`` when a reviewer
    rejected a plan, round or dispatch; ``cancelled`` after an ``abort``
    signal; ``planned`` for ``options.plan_only``. Each task's details (the
    conversation, tool calls) are in its ``AgentRun`` child's result, workflow
    id ``<run id>/<task id>``; so are the outputs the result keeps by
    reference (``TaskState.output_ref``) to stay within
    ``oma.core.schema.limits.RUN_STATE_BUDGET_BYTES``.
    """

    success: bool
    status: TeamRunStatus
    goal: str | None = Field(default=None, description="The goal of a goal run.")
    tasks: list[TaskState]
    plan: PlanArtifact | None = Field(
        default=None, description="A goal run: the coordinator's validated plan."
    )
    final_output: str | None = Field(
        default=None, description="A goal run: the coordinator's synthesized answer."
    )
    agent_results: dict[str, AgentRunResult] = Field(
        default_factory=dict,
        description="Runs not tied to one task: 'coordinator' (planning and synthesis, "
        "usage summed; messages left out).",
    )
    total_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    recorded_turns: int = Field(
        default=0,
        description="Model turns of this run (tasks and coordinator) answered from a "
        "recorded run, not by a provider: their tokens are in total_token_usage at no cost.",
    )
    total_cost_usd: float = Field(
        default=0.0,
        description="What the run cost, in US dollars, as far as it is known (tasks and "
        "coordinator); cost_unknown names what it leaves out.",
    )
    cost_unknown: list[str] = Field(
        default_factory=list,
        description="What the run used at an unknown cost (e.g. \"model 'llama3'\", "
        "\"process agent 'coder'\"); empty when total_cost_usd is the whole cost.",
    )
    budget_exceeded: bool = Field(
        default=False, description="The token or the cost budget stopped the run."
    )
    error: str | None = Field(default=None, description="Why the run stopped early, if it did.")
    error_code: str | None = None
    approval_decisions: list[ApprovalDecision] = Field(default_factory=list)
    forked_from: str | None = Field(
        default=None,
        description="A fork: the workflow id of the TeamRun it was forked from (docs/fork.md).",
    )
    shards: list[ShardResult] = Field(
        default_factory=list,
        description="A sharded run (a tasks run of more than MAX_RUN_TASKS tasks): its "
        "shards, in order; each shard's run holds its tasks (tasks stays empty here).",
    )
    plan_content_key: str | None = Field(
        default=None,
        description="A goal run that kept another run's plan (a fork, a reuse): the content "
        "key of what planned it (goal, coordinator, planning prompt), carried from the run "
        "whose coordinator made it; none for a plan this run made, or one a fork edited.",
    )

    def task(self, task_id: str) -> TaskState:
        """The task ``task_id``; raises ``KeyError`` when the run has none."""
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)


class _TaskStatus(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: TaskStatus


class ShardOutcome(BaseModel):
    """What a sharded run reads of a shard's ``TeamRunResult``: how it ended,
    its usage and its tasks' statuses, the rest (each task's spec and
    output, a few MB for a shard of 5,000 tasks) left unread. Decoded from
    the result's JSON at once (``model_validate_json`` through the payload
    converter), it costs the run's workflow task a fraction of the whole
    result's validation, which in the replay of a run 14 shards in passed
    the 10 s workflow task timeout."""

    model_config = ConfigDict(extra="ignore")

    status: TeamRunStatus
    tasks: list[_TaskStatus]
    total_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    recorded_turns: int = 0
    budget_exceeded: bool = False
    error: str | None = None
    error_code: str | None = None
