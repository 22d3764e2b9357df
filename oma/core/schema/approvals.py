"""Approval gates of a team run: requests, decisions and their rules.

A gate (``plan``, ``round``, ``dispatch``) records an ``ApprovalRequest`` and
waits; a reviewer answers with a ``Decision`` (the ``decide`` signal or update).
Pure logic: no I/O, safe inside workflows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from oma.core.schema.errors import (
    ApprovalConflictError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
    InvalidRunInputError,
)
from oma.core.schema.limits import MAX_DURATION_S, MAX_NAME_CHARS, MAX_REASON_CHARS, cut_text
from oma.core.schema.task import TaskSpec
from oma.core.schema.team import TeamConfig
from oma.core.schema.validation import format_validation_error, single_input

Boundary = Literal["plan", "round", "dispatch", "tool"]
DecisionValue = Literal["approve", "reject"]
DecisionSource = Literal["update", "signal", "timeout"]
"""Who decided: a reviewer (by update or signal), or ``on_timeout``."""


class ApprovalOptions(BaseModel):
    """``options.approvals`` of a run input.

    ``round`` and ``dispatch`` are mutually exclusive (a round barrier already
    reviews every dispatch). ``timeout_s`` bounds each wait; when it passes,
    ``on_timeout`` decides.
    """

    model_config = ConfigDict(extra="forbid")

    plan: bool = Field(default=False, description="Approve a coordinator's plan before it runs.")
    round: bool = Field(
        default=False,
        description="Run in rounds; approve each round, seeing the completed one and the next.",
    )
    dispatch: Literal["all"] | list[str] | None = Field(
        default=None,
        description="'all', or task ids and/or agent names: approve such a task before it starts.",
    )
    tools: Literal["all"] | list[str] | None = Field(
        default=None,
        description="'all', or tool names, agent names and/or 'agent.tool': approve such a "
        "tool call, with its exact input, before it runs.",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="How long a request waits, in seconds.",
    )
    on_timeout: DecisionValue = Field(
        default="reject", description="The decision taken when timeout_s passes."
    )

    @field_validator("dispatch", "tools", mode="before")
    @classmethod
    def _all_or_names(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "all":
            raise ValueError(
                f'must be "all" or a list of task ids and/or agent names, not the string {value!r}'
            )
        return value

    @model_validator(mode="after")
    def _round_xor_dispatch(self) -> ApprovalOptions:
        if self.round and self.dispatch is not None:
            raise ValueError(
                "'round' and 'dispatch' approvals are mutually exclusive: a round "
                "approval already reviews every task it dispatches; keep one"
            )
        return self

    def gates_tool(self, agent: str, tool: str) -> bool:
        """Whether a call of ``tool`` by ``agent`` needs an approval."""
        if self.tools is None:
            return False
        if self.tools == "all":
            return True
        return bool({tool, agent, f"{agent}.{tool}"} & set(self.tools))

    def gates_dispatch(self, task_id: str, assignee: str | None) -> bool:
        """Whether the dispatch of this task needs an approval."""
        if self.dispatch is None:
            return False
        if self.dispatch == "all":
            return True
        return task_id in self.dispatch or (assignee is not None and assignee in self.dispatch)


class Reviewer(BaseModel):
    """Who decided."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    display_name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)


DECISION_SHAPE = (
    '{"request_id", "request_hash", "decision": "approve" | "reject", '
    '"reviewer": {"id", "display_name"?}, "comment"?}'
)
"""The shape of a decision, for error messages."""


class Decision(BaseModel):
    """The input of the ``decide`` signal and update."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1)
    request_hash: str = Field(min_length=1, description="The hash of the request reviewed.")
    decision: DecisionValue
    reviewer: Reviewer
    comment: str | None = Field(
        default=None,
        description=f"Why, for the record; past {MAX_REASON_CHARS} characters it is cut "
        "(the cut said): the run carries every decision.",
    )

    @field_validator("comment")
    @classmethod
    def _cut_comment(cls, comment: str | None) -> str | None:
        return cut_comment(comment)


class ApprovalRequest(BaseModel):
    """An open (or answered) request, as the ``pending_approvals`` query shows it.

    ``request_hash`` is ``request_hash(scope, boundary, content)``; ``reason``,
    ``requested_at`` and ``expires_at`` are not part of it.
    """

    request_id: str
    boundary: Boundary
    scope: str = Field(description="The run's workflow id.")
    content: Any = Field(description="What is reviewed: the plan, the rounds, or the task.")
    reason: str
    requested_at: datetime
    expires_at: datetime | None = None
    request_hash: str


UPSTREAM_PREVIEW_CHARS = 500
"""How much of each dependency's output a dispatch request shows
(``UpstreamOutput.preview``); the whole output is read on demand."""


class UpstreamOutput(BaseModel):
    """One dependency of the task a dispatch request would start, and its
    output: what the task will act on.

    ``preview`` is the output's first ``UPSTREAM_PREVIEW_CHARS`` characters
    (``truncated`` when there is more; ``output_chars`` is the whole
    length). After the run continued as new, an output it kept by
    reference has no ``preview`` in the query's answer: ``output_ref`` names
    the ``AgentRun`` whose result holds it, ``output_bytes`` its size, and
    ``oma.client`` reads the preview from there.
    """

    task_id: str
    title: str = ""
    assignee: str | None = None
    status: str = Field(description="The dependency's TaskStatus value (completed).")
    preview: str | None = Field(
        default=None, description=f"The first {UPSTREAM_PREVIEW_CHARS} characters of its output."
    )
    truncated: bool = Field(default=False, description="The output is longer than the preview.")
    output_chars: int | None = Field(
        default=None, description="The output's length, in characters."
    )
    output_ref: str | None = Field(
        default=None,
        description="Kept by reference: the AgentRun workflow id whose result holds it.",
    )
    output_bytes: int | None = Field(
        default=None, description="With output_ref: the output's size in bytes of UTF-8."
    )
    output_run_id: str | None = Field(
        default=None,
        description="With output_ref: the run id of the AgentRun execution that holds it "
        "(TaskState.output_run_id); none: the latest.",
    )


def upstream_output(
    task_id: str,
    title: str,
    assignee: str | None,
    status: str,
    output: str | None,
    output_ref: str | None = None,
    output_bytes: int | None = None,
    output_run_id: str | None = None,
) -> UpstreamOutput:
    """``UpstreamOutput`` of a dependency whose output is ``output`` (``None``:
    kept by reference at ``output_ref``), its preview cut."""
    if output is None:
        return UpstreamOutput(
            task_id=task_id,
            title=title,
            assignee=assignee,
            status=status,
            output_ref=output_ref,
            output_bytes=output_bytes,
            output_run_id=output_run_id,
        )
    return UpstreamOutput(
        task_id=task_id,
        title=title,
        assignee=assignee,
        status=status,
        preview=output[:UPSTREAM_PREVIEW_CHARS],
        truncated=len(output) > UPSTREAM_PREVIEW_CHARS,
        output_chars=len(output),
        output_ref=output_ref,
        output_run_id=output_run_id,
    )


class PendingApproval(ApprovalRequest):
    """An open request as the ``pending_approvals`` query answers it: the
    request, and for a dispatch the outputs of the task's dependencies
    (``upstream``, in ``depends_on`` order; empty for a task without
    dependencies, ``None`` for other boundaries).

    ``upstream`` is not part of ``request_hash``: a dispatch request opens
    once its dependencies completed, so their outputs no longer change.
    """

    upstream: list[UpstreamOutput] | None = None


APPROVES_CHARS = 80
"""How long each name (a task id, a tool's name) in ``approves`` may grow."""


def approves(request: ApprovalRequest) -> str:
    """What ``request`` approves, in a few words a reviewer scans a list
    with: ``plan``, ``round 2``, ``dispatch publish`` (the task),
    ``tool file_write (task w)`` (the tool, and the task whose run calls
    it); each name cut to ``APPROVES_CHARS``."""
    content = request.content if isinstance(request.content, dict) else {}

    def named(key: str) -> str | None:
        value = content.get(key)
        return None if value is None else cut_text(str(value), APPROVES_CHARS)

    if request.boundary == "round":
        return f"round {named('round') or '?'}"
    if request.boundary == "dispatch":
        return f"dispatch {named('id') or '?'}"
    if request.boundary == "tool":
        task = named("task")
        return f"tool {named('tool') or '?'}" + (f" (task {task})" if task else "")
    return str(request.boundary)


class ApprovalDecision(BaseModel):
    """A recorded decision, as the result's ``approval_decisions`` lists it.

    ``source``: ``update`` or ``signal`` (a reviewer), or ``timeout``
    (``on_timeout`` applied; ``reviewer.id`` is then ``oma:timeout``).
    ``forwarded_by``: the workflow id of the run the reviewer answered at,
    when that run forwarded the decision to the one that made the request (a
    team run, for its task's tool request); ``None`` when it was taken here.
    """

    request_id: str
    boundary: Boundary
    request_hash: str
    decision: DecisionValue
    reviewer: Reviewer
    comment: str | None = None
    decided_at: datetime
    source: DecisionSource
    forwarded_by: str | None = None

    @field_validator("comment")
    @classmethod
    def _cut_comment(cls, comment: str | None) -> str | None:
        return cut_comment(comment)

    def rejection(self) -> str:
        """Why a run stops on this (rejecting) decision, for a person."""
        comment = f" ({self.comment})" if self.comment else ""
        return f"rejected: {self.request_id} by {self.reviewer.id}{comment}"


def cut_comment(comment: str | None) -> str | None:
    """``comment`` cut to ``MAX_REASON_CHARS`` characters, the cut said (a
    decision's comment is carried with the run's state and returned in its
    result, which Temporal caps at 2 MB)."""
    return None if comment is None else cut_text(comment, MAX_REASON_CHARS)


def decision_of(args: tuple[Any, ...]) -> Decision:
    """The ``Decision`` in the arguments of a ``decide`` signal or update
    (taken as ``*args``: a payload of the wrong arity is refused, not a
    workflow task failed for good). Raises ``InvalidRunInputError`` naming the
    bad field."""
    raw = single_input(args, "a decision")
    if not isinstance(raw, dict):
        raise InvalidRunInputError(f"a decision is {DECISION_SHAPE}; got {type(raw).__name__}")
    try:
        return Decision.model_validate(raw)
    except ValidationError as err:
        raise InvalidRunInputError(
            f"invalid decision: {format_validation_error(err, model=Decision)}"
        ) from None


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_hash(scope: str, boundary: Boundary, content: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``{scope, boundary, content}``.

    ``content`` must be JSON-compatible (dump pydantic models with
    ``mode="json"`` first). Key order does not change the hash.
    """
    doc = canonical_json({"scope": scope, "boundary": boundary, "content": content})
    return hashlib.sha256(doc.encode()).hexdigest()


def check_decision(
    requests: Mapping[str, ApprovalRequest],
    decisions: Mapping[str, ApprovalDecision],
    decision: Decision,
) -> ApprovalRequest:
    """The request ``decision`` answers, if it may be recorded.

    Raises, in this order: ``ApprovalUnknownRequestError`` (no such request),
    ``ApprovalConflictError`` (already decided: the first decision wins),
    ``ApprovalStaleDecisionError`` (the hash is not the request's).
    """
    request = requests.get(decision.request_id)
    if request is None:
        known = ", ".join(sorted(requests)) or "none"
        raise ApprovalUnknownRequestError(
            f"no approval request {decision.request_id!r} in this run (requests: {known})"
        )
    earlier = decisions.get(decision.request_id)
    if earlier is not None:
        raise ApprovalConflictError(
            f"request {decision.request_id!r} was already decided: {earlier.decision} by "
            f"{earlier.reviewer.id} at {earlier.decided_at.isoformat()}"
        )
    if decision.request_hash != request.request_hash:
        raise ApprovalStaleDecisionError(
            f"request {decision.request_id!r} has hash {request.request_hash}, not "
            f"{decision.request_hash}: the content changed since it was reviewed; read "
            "pending_approvals again"
        )
    return request


def check_tool_gate_names(approvals: ApprovalOptions | None, team: TeamConfig) -> None:
    """Raise ``InvalidRunInputError`` when ``approvals.tools`` names something
    that is neither an agent of the team, a tool one of its agents declares,
    nor ``agent.tool`` of those (a typo would silently drop a gate)."""
    if approvals is None or not isinstance(approvals.tools, list):
        return
    declared = {
        a.name: {t.name for t in a.resolved_tools()} for a in team.agents if a.backend is None
    }
    known = (
        set(declared)
        | set().union(*declared.values())
        | {f"{agent}.{tool}" for agent, tools in declared.items() for tool in tools}
    )
    unknown = [name for name in approvals.tools if name not in known]
    if unknown:
        raise InvalidRunInputError(
            f"options.approvals.tools names {', '.join(map(repr, unknown))}, which is neither "
            "an LLM agent of the team, a tool one declares, nor 'agent.tool'"
        )


def check_dispatch_names(
    approvals: ApprovalOptions | None, tasks: Iterable[TaskSpec], team: TeamConfig
) -> None:
    """Raise ``InvalidRunInputError`` when ``approvals.dispatch`` lists a name
    that is neither a task id nor an agent (a typo would silently drop a gate)."""
    if approvals is None or not isinstance(approvals.dispatch, list):
        return
    known = {t.id for t in tasks} | {a.name for a in team.agents}
    unknown = [name for name in approvals.dispatch if name not in known]
    if unknown:
        raise InvalidRunInputError(
            f"options.approvals.dispatch names {', '.join(map(repr, unknown))}, which is "
            "neither a task id nor an agent of the team"
        )
