"""Tasks of a team run and their lifecycle."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class TaskStatus(StrEnum):
    """Where a task is in its life. ``blocked`` waits on dependencies; ``skipped``
    never ran because a dependency failed (or the run stopped first)."""

    PENDING = "pending"
    BLOCKED = "blocked"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


TERMINAL_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.SKIPPED})


class TaskSpec(BaseModel):
    """A task as the user writes it in a run input's ``tasks``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        pattern=r"^[^/]+$",
        description="Unique within the run; used in depends_on. No '/': the task's "
        "workflow id is '<run id>/<task id>'.",
    )
    title: str = Field(
        min_length=1, description="Short name; labels this task's output for dependents."
    )
    description: str = Field(default="", description="What to do: the body of the agent's prompt.")
    assignee: str = Field(min_length=1, description="Name of the team agent that runs the task.")
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of tasks that must complete before this one starts."
    )


class TaskState(BaseModel):
    """A task as the run reports it: the spec plus its status and outcome."""

    id: str
    title: str
    description: str = ""
    assignee: str
    depends_on: list[str] = Field(default_factory=list)
    status: TaskStatus = TaskStatus.PENDING
    output: str | None = None
    error: str | None = None
