"""Tasks of a team run and their lifecycle."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from oma.core.schema.limits import MAX_DURATION_S, MAX_TASK_ID_CHARS, MAX_TASK_RETRIES
from oma.core.schema.usage import TokenUsage

MemoryScope = Literal["dependencies", "all"]
"""What a task sees of the shared memory: its direct dependencies' outputs
(``dependencies``), or a summary of every entry (``all``)."""

DependencyPayload = Literal["output", "structured", "both"]
"""How a dependency's result reaches the task: its output text (``output``), a
JSON record of the result (``structured``), or both."""

BackendKind = Literal["llm", "process", "acp"]
"""An agent's kind: an LLM agent (no ``backend``), or its backend's ``kind``."""


class TaskStatus(StrEnum):
    """Where a task is in its life. ``blocked`` waits on dependencies;
    ``awaiting_approval`` waits on a dispatch or round approval; ``skipped``
    never ran because a dependency failed or the run stopped first."""

    PENDING = "pending"
    BLOCKED = "blocked"
    AWAITING_APPROVAL = "awaiting_approval"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


TERMINAL_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.SKIPPED})


class TaskRequirements(BaseModel):
    """``requires`` of a task: what its agent must have. Every field set must hold."""

    model_config = ConfigDict(extra="forbid")

    capabilities: list[str] = Field(
        default_factory=list, description="Each must be in the agent's 'capabilities'."
    )
    backend: BackendKind | None = Field(
        default=None, description="The agent's kind: 'llm', 'process' or 'acp'."
    )
    provider: str | None = Field(
        default=None, description="An LLM agent's provider, e.g. 'anthropic'."
    )


class TaskSpec(BaseModel):
    """A task as the user writes it in a run input's ``tasks`` (or a plan's)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        max_length=MAX_TASK_ID_CHARS,
        description="Unique within the run; used in depends_on. No '/': the task's "
        "workflow id is '<run id>/<task id>' (and its search attribute OmaTask).",
    )
    title: str = Field(
        min_length=1, description="Short name; labels this task's output for dependents."
    )
    description: str = Field(default="", description="What to do: the body of the agent's prompt.")
    assignee: str | None = Field(
        default=None,
        min_length=1,
        description="Name of the team agent that runs the task; none: options.scheduling "
        "picks one among the agents that satisfy 'requires'.",
    )
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of tasks that must complete before this one starts."
    )

    @field_validator("id")
    @classmethod
    def _no_slash(cls, task_id: str) -> str:
        if "/" in task_id:
            raise ValueError(
                f"task id {task_id!r} contains '/': a task's workflow id is "
                "'<run id>/<task id>', so task ids may not contain '/'"
            )
        return task_id

    requires: TaskRequirements | None = Field(
        default=None,
        description="What the task's agent must have (capabilities, backend, provider).",
    )
    memory_scope: MemoryScope = "dependencies"
    dependency_payload: DependencyPayload = "output"
    max_retries: int = Field(
        default=0,
        ge=0,
        le=MAX_TASK_RETRIES,
        description="Retries after a retryable failure (0: run once).",
    )
    retry_delay_s: float = Field(
        default=1.0,
        ge=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="Delay before the first retry, in seconds.",
    )
    retry_backoff: float = Field(
        default=2.0,
        ge=1,
        allow_inf_nan=False,
        description="Each later retry waits this many times longer (at most "
        "oma.core.schema.limits.MAX_DURATION_S).",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="Cancel an attempt that runs longer than this many seconds (TASK_TIMEOUT).",
    )

    def retry_delay(self, attempts: int) -> float:
        """Seconds to wait after failed attempt number ``attempts`` (1-based):
        ``retry_delay_s``, times ``retry_backoff`` for each earlier retry, at
        most ``MAX_DURATION_S`` (the longest a Temporal timer holds)."""
        try:
            delay = self.retry_delay_s * self.retry_backoff ** (attempts - 1)
        except OverflowError:
            return float(MAX_DURATION_S)
        return float(min(delay, MAX_DURATION_S))


class ReusedFrom(BaseModel):
    """Where the outcome of a task a fork kept comes from: the ``TeamRun``
    that ran it and the task's id there; its ``AgentRun``,
    ``<run_id>/<task_id>``, holds the whole result."""

    run_id: str = Field(description="The workflow id of the TeamRun that ran the task.")
    task_id: str
    temporal_run_id: str | None = Field(
        default=None,
        description="The Temporal run id of that TeamRun's execution (the one read by the "
        "fork or reuse that first kept the task); none in runs from before it, or a source "
        "given inline (an exported history).",
    )
    content_key: str | None = Field(
        default=None,
        description="The content key of the inputs that made the output (docs/fork.md, "
        "'Reuse by content'), carried from the run that ran the task; none when not known "
        "(kept before keys were carried): reuse then never matches it.",
    )


class TaskState(BaseModel):
    """A task as the run reports it: who runs it, its status and its outcome."""

    id: str
    title: str = Field(default="", description="The spec's title.")
    description: str = ""
    assignee: str | None = Field(
        default=None, description="None until the scheduler assigns an unassigned task."
    )
    depends_on: list[str] = Field(default_factory=list)
    status: TaskStatus = TaskStatus.PENDING
    output: str | None = Field(
        default=None,
        description="What the task returned; none when output_ref is set (the result keeps "
        "it by reference).",
    )
    output_ref: str | None = Field(
        default=None,
        description="Set when the run's result (or the state it carried) keeps the output "
        "by reference, to stay under Temporal's payload limit: the workflow id of the task's "
        "AgentRun, whose result holds it (its execution: output_run_id). oma.client reads it "
        "back into output.",
    )
    output_bytes: int | None = Field(
        default=None, description="With output_ref: the output's size in bytes of UTF-8."
    )
    output_run_id: str | None = Field(
        default=None,
        description="The run id of the execution of the task's AgentRun that returned its "
        "output (the attempt the task kept; a reused task's, in the run that ran it): "
        "output_ref names that execution, not the latest under its workflow id, which a "
        "later run under the same workflow id may have reused. None in runs from before it "
        "(their output_ref reads the latest execution).",
    )
    error: str | None = None
    error_code: str | None = None
    attempts: int = Field(default=0, description="How many times the task was started.")
    backend_attempts: int = Field(
        default=0,
        description="Process and ACP agents: the AgentRun results' backend_attempts summed "
        "over the task's attempts. More than attempts when Temporal ran a process or ACP "
        "turn again within one attempt.",
    )
    recorded_turns: int = Field(
        default=0,
        description="Model turns of its attempts answered from a recorded run "
        "(options.models 'recorded'), not by the provider.",
    )
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = Field(
        default=0.0,
        description="What the task's attempts cost, in US dollars; null when part of it is "
        "unknown (token_usage.unpriced says what: an unpriced model, a process, an ACP "
        "agent that reports no cost).",
    )
    reused_from: ReusedFrom | None = Field(
        default=None,
        description="A fork's task that did not run again: the run (and task) whose output, "
        "usage and cost it kept (docs/fork.md). Its AgentRun is that run's, not this one's.",
    )
    reused_consequential: list[str] = Field(
        default_factory=list,
        description="A reused task: the consequential tools (@oma.consequential) it called in "
        "the run it was reused from; they were not called again.",
    )
