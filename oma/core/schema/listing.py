"""What a list of runs shows: a team run as ``oma list`` lists it, and an open
approval request as ``oma approvals`` lists it across the runs of a
namespace (their ``--json``, and ``OpenMultiAgent.list_team_runs`` and
``open_approvals``). Read from Temporal's visibility (search attributes) and
each waiting run's ``pending_approvals`` query."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from oma.core.schema.approvals import Boundary


class TeamRunListing(BaseModel):
    """One execution of a ``TeamRun``, as Temporal's visibility lists it."""

    workflow_id: str
    run_id: str = Field(description="The execution (a run that continued as new has several).")
    status: str | None = Field(
        description="OmaStatus: running, awaiting_approval, completed, failed, rejected, "
        "cancelled, planned, continued_as_new; None where the run set none."
    )
    execution_status: str = Field(
        description="Temporal's: RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, "
        "CONTINUED_AS_NEW, TIMED_OUT (a terminated run keeps OmaStatus running)."
    )
    team: str | None = Field(description="OmaTeam.")
    error_code: str | None = Field(default=None, description="OmaErrorCode.")
    forked_from: str | None = Field(default=None, description="OmaForkedFrom.")
    started_at: datetime
    closed_at: datetime | None = None


class OpenApproval(BaseModel):
    """An open approval request, found at the run that lists it: a ``TeamRun``
    (its own requests and its tasks' tool requests) or a standalone
    ``AgentRun``."""

    workflow_id: str = Field(description="The run that lists it, where it is decided.")
    workflow_type: str = Field(description="TeamRun or AgentRun.")
    request_id: str
    boundary: Boundary
    approves: str = Field(
        description="What it approves: plan, round 2, dispatch <task>, tool <tool> (task <task>)."
    )
    task: str | None = Field(default=None, description="The task a dispatch or tool request is of.")
    tool: str | None = Field(default=None, description="A tool request's tool.")
    scope: str = Field(description="The run that made it (a tool request: the task's AgentRun).")
    requested_at: datetime
    expires_at: datetime | None = None
    request_hash: str


class UnansweredRun(BaseModel):
    """A run that says it waits for an approval but did not answer its
    ``pending_approvals`` query (no worker polls its task queue, or it just ended)."""

    workflow_id: str
    error: str


class OpenApprovals(BaseModel):
    """Every open approval request of a namespace, oldest first, and the
    waiting runs that did not say which (``unanswered``)."""

    requests: list[OpenApproval] = Field(default_factory=list)
    unanswered: list[UnansweredRun] = Field(default_factory=list)
    truncated: bool = Field(
        default=False, description="More runs wait than were asked (the limit of one listing)."
    )
