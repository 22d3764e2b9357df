"""The ``read_fork_source`` activity's input and output: a fork's (or a run
with ``options.reuse``'s) source run read, and the run as it goes on
(``oma.core.rules.fork.fork_run`` makes it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_serializer

from oma.core.schema.run_state import TeamRunState


class ReadForkSourceInput(BaseModel):
    """Input of the ``read_fork_source`` activity."""

    workflow_id: str = Field(description="The fork's own workflow id.")
    fork: dict[str, Any] = Field(description="The fork's input as given (ForkInput.payload).")
    stored: bool = Field(
        default=False,
        description="The fork's payloads go to a payload store: its budget is the stored "
        "one (oma.core.schema.limits.state_budget). Absent in forks recorded before it.",
    )


class ForkedRun(BaseModel):
    """Output of the ``read_fork_source`` activity (and of ``fork_run``, and
    of ``oma.core.rules.reuse.reuse_run``): the fork, or the run with
    ``options.reuse``, as it goes on."""

    input: dict[str, Any] = Field(
        description="The fork's TeamRun input without 'resume': the source's, with the "
        "fork's team, coordinator, options and task edits."
    )
    resume: TeamRunState | None = Field(
        description="The state the run starts from; none: it runs as given (a goal run that "
        "plans anew, reusing nothing; note says why)."
    )
    note: str | None = None
    reused: list[str] = Field(default_factory=list, description="The tasks kept, in order.")
    rerun: list[str] = Field(default_factory=list, description="The tasks to run again.")
    warnings: list[str] = Field(default_factory=list)
    read: list[str] = Field(
        default_factory=list,
        description="The kept tasks whose outputs the tasks to run again (or a goal run's "
        "synthesis) read: carried in the state, not by reference.",
    )
    reasons: dict[str, str] = Field(
        default_factory=dict, description="Each task to run again -> why (oma run --dry-run)."
    )
    estimated_cost_usd: float = Field(
        default=0.0,
        description="What the tasks to run again cost in the source run, in US dollars.",
    )
    cost_unknown: list[str] = Field(
        default_factory=list,
        description="The tasks to run again whose cost the source does not know (not priced, "
        "or not run there).",
    )

    @field_serializer("resume", when_used="json")
    def _compact(self, resume: TeamRunState | None) -> dict[str, Any] | None:
        # the state in JSON (the activity's answer, a payload of at most 2 MB) without the
        # fields at their defaults, as a run carries it when it continues as new: a kept
        # task of thousands takes a third of the room
        return None if resume is None else resume.model_dump(mode="json", exclude_defaults=True)
