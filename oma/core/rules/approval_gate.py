"""``ApprovalGate``: the approval requests of one team run and their decisions.

One mechanism for every gate (``plan``, ``round``, ``dispatch``): a request
records what is reviewed and its hash; a decision must name an open request,
carry the hash of what the reviewer saw, and come first (the first decision
wins); an open request can expire, and then ``on_timeout`` decides. Pure
logic: ``TeamRun`` does the waiting (Temporal timers, conditions), this class
keeps the books and applies the rules (``oma.core.schema.approvals``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from oma.core.rules.task_graph import SETTLED, TaskGraph
from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalOptions,
    ApprovalRequest,
    Boundary,
    Decision,
    DecisionSource,
    DecisionValue,
    PendingApproval,
    Reviewer,
    UpstreamOutput,
    check_decision,
    request_hash,
    upstream_output,
)
from oma.core.schema.errors import ApprovalUnknownRequestError
from oma.core.schema.task import TaskState

TIMEOUT_REVIEWER = Reviewer(id="oma:timeout", display_name="approval timeout")
"""Who a decision taken by ``options.approvals.on_timeout`` is recorded as."""


def dispatch_request_id(task_id: str) -> str:
    """The id of the request that gates the dispatch of ``task_id``."""
    return f"dispatch-{task_id}"


def task_of(request: ApprovalRequest) -> str | None:
    """The task a dispatch or tool request is about (its events carry the task id)."""
    if request.boundary == "dispatch":
        return str(request.content["id"])
    if request.boundary == "tool":
        task = request.content.get("task")
        return str(task) if task is not None else None
    return None


def task_snapshot(state: TaskState, outcome: bool = True) -> dict[str, Any]:
    """A task as a reviewer sees it in a request's content; with ``outcome``
    (a round's tasks), its status and output too."""
    snapshot: dict[str, Any] = {
        "id": state.id,
        "title": state.title,
        "description": state.description,
        "assignee": state.assignee,
        "depends_on": state.depends_on,
    }
    if outcome:
        snapshot |= {"status": state.status.value, "output": state.output}
    return snapshot


def upstream_of(graph: TaskGraph, task_id: str) -> list[UpstreamOutput]:
    """The outputs of ``task_id``'s dependencies, in ``depends_on`` order,
    each cut to its preview (``oma.core.schema.approvals.UpstreamOutput``)."""
    return [
        upstream_output(
            dep.id,
            dep.title,
            dep.assignee,
            dep.status.value,
            dep.output,
            dep.output_ref,
            dep.output_bytes,
            dep.output_run_id if dep.output_ref else None,
        )
        for dep in (graph[d] for d in graph[task_id].depends_on if d in graph.specs)
    ]


def pending_view(request: ApprovalRequest, graph: TaskGraph | None) -> PendingApproval:
    """``request`` as the ``pending_approvals`` query shows it: a dispatch
    request of a task of ``graph`` with its dependencies' outputs."""
    upstream = None
    if graph is not None and request.boundary == "dispatch":
        task_id = task_of(request)
        if task_id is not None and task_id in graph.specs:
            upstream = upstream_of(graph, task_id)
    return PendingApproval(**dict(request), upstream=upstream)


def round_content(
    round_no: int, graph: TaskGraph, last_round: Collection[str], batch: Iterable[str]
) -> dict[str, Any]:
    """What a reviewer sees of round ``round_no``: the tasks of the previous
    round with their outcomes (``completed``), and the tasks about to start
    with their agents (``next``)."""
    return {
        "round": round_no,
        "completed": [
            task_snapshot(s) for s in graph if s.status in SETTLED and s.id in last_round
        ],
        "next": [task_snapshot(graph[t]) for t in batch],
    }


class ApprovalGate:
    """The requests and decisions of the run ``scope`` (its workflow id).

    ``open_requests`` and ``decisions`` are the run state's own lists (the
    ``pending_approvals`` query and the result's ``approval_decisions``); the
    gate changes them in place. It also remembers every request made since
    it was built, so a decision on a request that closed without one is told
    so rather than that the request is unknown. ``changes`` counts the
    changes of the open requests (one opened, adopted or closed), so a
    watcher knows the list changed without comparing it.
    """

    def __init__(
        self,
        scope: str,
        options: ApprovalOptions | None,
        open_requests: list[ApprovalRequest],
        decisions: list[ApprovalDecision],
    ) -> None:
        self.scope = scope
        self.options = options
        self.open = open_requests
        self.decisions = decisions
        self._requests = {r.request_id: r for r in open_requests}
        self._decided = {d.request_id: d for d in decisions}
        self.changes = 0

    def request(
        self, request_id: str, boundary: Boundary, content: Any, reason: str, now: datetime
    ) -> ApprovalRequest:
        """Open a request for ``content`` (JSON-compatible); it expires after
        ``options.timeout_s`` seconds, if set."""
        timeout = self.options.timeout_s if self.options else None
        request = ApprovalRequest(
            request_id=request_id,
            boundary=boundary,
            scope=self.scope,
            content=content,
            reason=reason,
            requested_at=now,
            expires_at=now + timedelta(seconds=timeout) if timeout else None,
            request_hash=request_hash(self.scope, boundary, content),
        )
        self._requests[request_id] = request
        self.open.append(request)
        self.changes += 1
        return request

    def check(self, decision: Decision, closed_because: str) -> ApprovalRequest:
        """The request ``decision`` answers, if it may be recorded.

        Raises ``ApprovalUnknownRequestError`` (no such request, or it closed
        without a decision: ``closed_because`` says why),
        ``ApprovalConflictError`` (already decided) or
        ``ApprovalStaleDecisionError`` (not the hash of the request), in
        ``check_decision``'s order.
        """
        request_id = decision.request_id
        if request_id in self._requests and not (
            self.is_open(request_id) or request_id in self._decided
        ):
            raise ApprovalUnknownRequestError(
                f"request {request_id!r} was closed without a decision: "
                f"{closed_because or 'the run stopped'}"
            )
        # open requests, and decided ones (so a late decision is a conflict)
        decidable = {
            r: req for r, req in self._requests.items() if self.is_open(r) or r in self._decided
        }
        return check_decision(decidable, self._decided, decision)

    def decide(
        self,
        request: ApprovalRequest,
        value: DecisionValue,
        reviewer: Reviewer,
        comment: str | None,
        source: DecisionSource,
        now: datetime,
        forwarded_by: str | None = None,
    ) -> ApprovalDecision:
        """Record a decision on ``request`` (checked already) and return it;
        ``forwarded_by``: the run it was taken at, if not this one."""
        record = ApprovalDecision(
            request_id=request.request_id,
            boundary=request.boundary,
            request_hash=request.request_hash,
            decision=value,
            reviewer=reviewer,
            comment=comment,
            decided_at=now,
            source=source,
            forwarded_by=forwarded_by,
        )
        self._decided[request.request_id] = record
        self.decisions.append(record)
        return record

    def expire(self, request: ApprovalRequest, now: datetime) -> ApprovalDecision:
        """``request`` waited ``options.timeout_s``: ``on_timeout`` decides it."""
        assert self.options is not None and self.options.timeout_s is not None
        return self.decide(
            request,
            self.options.on_timeout,
            TIMEOUT_REVIEWER,
            f"no decision within {self.options.timeout_s} s",
            "timeout",
            now,
        )

    def adopt(self, request: ApprovalRequest) -> None:
        """Hold open a request another run made (a task's tool call, made by its
        ``AgentRun``), so this run lists it and takes decisions on it; its
        ``scope`` stays the other run's."""
        self._requests[request.request_id] = request
        if not self.is_open(request.request_id):
            self.open.append(request)
            self.changes += 1

    def note(self, record: ApprovalDecision) -> None:
        """Record the decision the run that made an adopted request recorded
        (its own, or one this run forwarded to it)."""
        if record.request_id not in self._decided:
            self._decided[record.request_id] = record
            self.decisions.append(record)

    def decision(self, request_id: str) -> ApprovalDecision | None:
        return self._decided.get(request_id)

    def knows(self, request_id: str) -> bool:
        """Whether this run made request ``request_id`` (open, decided or closed)."""
        return request_id in self._requests

    def get(self, request_id: str) -> ApprovalRequest:
        return self._requests[request_id]

    def is_open(self, request_id: str) -> bool:
        return any(r.request_id == request_id for r in self.open)

    def close(self, request_id: str) -> None:
        """The request takes no more decisions (decided, or the run stopped)."""
        kept = [r for r in self.open if r.request_id != request_id]
        if len(kept) != len(self.open):
            self.open[:] = kept
            self.changes += 1

    def gates_dispatch(self, task_id: str, agent: str | None) -> bool:
        """Whether ``options.approvals.dispatch`` gates this task (run by
        ``agent``) and it has no decision yet."""
        return (
            self.options is not None
            and self.options.gates_dispatch(task_id, agent)
            and dispatch_request_id(task_id) not in self._decided
        )
