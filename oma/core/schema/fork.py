"""The input of a fork: a ``TeamRun`` that starts from another run's outcome.

A fork's ``TeamRun`` takes ``{"fork": {...}, "team"?, "coordinator"?, "options"?}``
instead of a team and a goal, tasks or plan: it reads its source run first
(the ``read_fork_source`` activity), then goes on as that run resumed, with
the tasks it keeps completed (``oma.core.rules.fork``). Parse user JSON with
``parse_fork_input``; ``is_fork_input`` tells the two inputs apart.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from oma.core.schema.limits import MAX_DURATION_S, MAX_NAME_CHARS, MAX_TASK_RETRIES
from oma.core.schema.plan import CoordinatorConfig
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import RunOptions
from oma.core.schema.task import DependencyPayload, MemoryScope, TaskRequirements
from oma.core.schema.team import TeamConfig
from oma.core.schema.validation import parse_run_json


def _nulls_left_out(raw: Any) -> Any:
    """``raw`` without its keys whose value is null: in a fork's input a
    null field means what leaving it out means (the source's), and
    ``payload`` must not carry it on to the fork's own input."""
    if isinstance(raw, dict):
        return {k: v for k, v in raw.items() if v is not None}
    return raw


class TaskEdit(BaseModel):
    """What a fork changes in one task (``oma fork --set TASK.FIELD=VALUE``):
    the fields given replace the task's. The task runs again, and so does
    everything downstream of it. Its ``id`` and ``depends_on`` stay: the
    task graph is the source's."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, raw: Any) -> Any:
        return _nulls_left_out(raw)

    title: str | None = Field(default=None, min_length=1)
    description: str | None = None
    assignee: str | None = Field(default=None, min_length=1)
    requires: TaskRequirements | None = None
    memory_scope: MemoryScope | None = None
    dependency_payload: DependencyPayload | None = None
    max_retries: int | None = Field(default=None, ge=0, le=MAX_TASK_RETRIES)
    retry_delay_s: float | None = Field(default=None, ge=0, le=MAX_DURATION_S, allow_inf_nan=False)
    retry_backoff: float | None = Field(default=None, ge=1, allow_inf_nan=False)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_DURATION_S, allow_inf_nan=False)


class ForkSource(BaseModel):
    """A source run given inline rather than read from the server: what
    ``oma fork --history FILE`` reads out of an exported history."""

    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] = Field(
        description="The source run's TeamRun input as its start recorded it (a 'resume' in "
        "it is left out)."
    )
    result: TeamRunResult = Field(
        description="Its result, or the state it carried when it continued as new."
    )
    temporal_run_id: str | None = Field(
        default=None,
        max_length=MAX_NAME_CHARS,
        description="The Temporal run id of the execution read (what a fork or reuse of it "
        "names wherever it refers to that run); none: not known (an exported history).",
    )


class ForkSpec(BaseModel):
    """``fork`` of a ``TeamRun`` input: which run, and what runs again."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, raw: Any) -> Any:
        return _nulls_left_out(raw)

    run_id: str = Field(
        min_length=1, description="The workflow id of the TeamRun to fork (never changed)."
    )
    rerun: list[str] | None = Field(
        default=None,
        description="The tasks to run again; every task downstream of one runs again too. "
        "None: every task that did not complete (failed, skipped, cancelled, not started).",
    )
    edit: dict[str, TaskEdit] = Field(
        default_factory=dict,
        description="Task id -> the fields that change (oma fork --set); an edited task runs "
        "again.",
    )
    source: ForkSource | None = Field(
        default=None,
        description="The source run inline (oma fork --history); none: read from the server.",
    )
    temporal_run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Temporal run id of the execution of run_id to read (one run of a "
        "chain that continued as new: its last); none: the workflow id's latest. Needed for "
        "a fork that takes its source's workflow id (oma acp's /retry), whose own execution "
        "is the latest once it starts.",
    )


class ForkInput(BaseModel):
    """Input of a fork's first ``TeamRun``: the ``fork`` and what replaces the source's."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, raw: Any) -> Any:
        return _nulls_left_out(raw)

    fork: ForkSpec
    team: TeamConfig | None = Field(
        default=None,
        description="Replaces the source's team (agents, prompts, models, tools); none: the "
        "source's.",
    )
    coordinator: CoordinatorConfig | None = Field(
        default=None, description="A goal run: replaces the source's coordinator."
    )
    options: RunOptions | None = Field(
        default=None,
        description="The options it gives replace the source's, field by field (those it "
        "leaves out stay the source's).",
    )

    def payload(self) -> dict[str, Any]:
        """This input as given (the fields left out stay out: ``options``
        replaces only the source's fields it names)."""
        return self.model_dump(mode="json", exclude_unset=True)


def is_fork_input(raw: Any) -> bool:
    """Whether ``raw`` (a decoded ``TeamRun`` input) is a fork's first run's."""
    return isinstance(raw, dict) and "fork" in raw


def parse_fork_input(raw: Any) -> ForkInput:
    """Validate a decoded JSON value as a ``ForkInput``. Raises
    ``InvalidRunInputError`` naming every bad field by its path."""
    return parse_run_json(ForkInput, raw, "TeamRun input (a fork)")
