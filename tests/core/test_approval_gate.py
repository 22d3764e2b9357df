"""The approval gate's books and rules, without Temporal: requests, the order
of the checks a decision passes, first-wins, expiry, and dispatch gates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from oma.core.rules.approval_gate import ApprovalGate, dispatch_request_id, round_content
from oma.core.rules.task_graph import TaskGraph
from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalOptions,
    ApprovalRequest,
    Decision,
    Reviewer,
    request_hash,
)
from oma.core.schema.errors import (
    ApprovalConflictError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
)
from oma.core.schema.task import TaskSpec, TaskStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ANA = Reviewer(id="ana")


def gate(**options: object) -> tuple[ApprovalGate, list[ApprovalRequest], list[ApprovalDecision]]:
    requests: list[ApprovalRequest] = []
    decisions: list[ApprovalDecision] = []
    approvals = ApprovalOptions.model_validate(options) if options else None
    return ApprovalGate("run-1", approvals, requests, decisions), requests, decisions


def decision(request: ApprovalRequest, value: str = "approve", **change: str) -> Decision:
    return Decision.model_validate(
        {
            "request_id": request.request_id,
            "request_hash": request.request_hash,
            "decision": value,
            "reviewer": {"id": "ana"},
        }
        | change
    )


def test_a_request_is_open_hashed_over_scope_boundary_and_content_and_expires() -> None:
    g, requests, _ = gate(timeout_s=30)
    request = g.request("plan", "plan", {"tasks": [1]}, "review it", NOW)
    assert requests == [request]
    assert request.request_hash == request_hash("run-1", "plan", {"tasks": [1]})
    assert request.expires_at == NOW + timedelta(seconds=30)


def test_a_decision_is_recorded_in_the_results_list_and_closes_nothing_by_itself() -> None:
    g, requests, decisions = gate()
    request = g.request("plan", "plan", {}, "why", NOW)
    record = g.decide(g.check(decision(request), ""), "approve", ANA, "fine", "update", NOW)
    assert decisions == [record]
    assert g.decision("plan") == record
    assert g.is_open("plan")
    g.close("plan")
    assert requests == []


def test_the_checks_run_unknown_then_conflict_then_stale() -> None:
    g, _, _ = gate()
    request = g.request("plan", "plan", {}, "why", NOW)
    with pytest.raises(ApprovalUnknownRequestError, match="no approval request 'other'"):
        g.check(decision(request, request_id="other"), "")
    with pytest.raises(ApprovalStaleDecisionError):
        g.check(decision(request, request_hash="stale"), "")
    g.decide(request, "approve", ANA, None, "signal", NOW)
    # decided: a second decision is a conflict even with a stale hash
    with pytest.raises(ApprovalConflictError, match="already decided: approve by ana"):
        g.check(decision(request, "reject", request_hash="stale"), "")


def test_a_request_closed_without_a_decision_says_why() -> None:
    g, _, _ = gate()
    request = g.request("round-1", "round", {}, "why", NOW)
    g.close("round-1")
    with pytest.raises(ApprovalUnknownRequestError, match="closed without a decision: aborted"):
        g.check(decision(request), "aborted")


def test_an_expired_request_is_decided_by_on_timeout_as_the_timeout_reviewer() -> None:
    g, _, _ = gate(timeout_s=5, on_timeout="approve")
    request = g.request("dispatch-x", "dispatch", {"id": "x"}, "why", NOW)
    record = g.expire(request, NOW + timedelta(seconds=5))
    assert (record.decision, record.source, record.reviewer.id, record.comment) == (
        "approve",
        "timeout",
        "oma:timeout",
        "no decision within 5.0 s",
    )


def test_a_dispatch_gate_applies_until_the_task_has_a_decision() -> None:
    g, _, _ = gate(dispatch=["x", "writer"])
    assert g.gates_dispatch("x", None)
    assert g.gates_dispatch("y", "writer")
    assert not g.gates_dispatch("y", "reader")
    request = g.request(dispatch_request_id("x"), "dispatch", {"id": "x"}, "why", NOW)
    g.decide(request, "approve", ANA, None, "update", NOW)
    assert not g.gates_dispatch("x", None)


def test_a_gate_over_carried_lists_knows_their_requests_and_decisions() -> None:
    first, requests, decisions = gate()
    open_one = first.request("dispatch-a", "dispatch", {"id": "a"}, "why", NOW)
    decided = first.request("dispatch-b", "dispatch", {"id": "b"}, "why", NOW)
    first.decide(decided, "approve", ANA, None, "update", NOW)
    first.close("dispatch-b")
    resumed = ApprovalGate("run-1", None, requests, decisions)
    assert resumed.check(decision(open_one), "") == open_one
    assert resumed.decision("dispatch-b") is not None


def test_a_round_shows_the_last_rounds_outcomes_and_the_next_tasks() -> None:
    graph = TaskGraph([TaskSpec(id=t, title=t, assignee="a") for t in ("p", "q", "r")])
    graph.complete("p", "P out")
    graph["q"].status = TaskStatus.PENDING
    content = round_content(2, graph, ["p"], ["q", "r"])
    assert content["round"] == 2
    assert [(t["id"], t["status"], t["output"]) for t in content["completed"]] == [
        ("p", "completed", "P out")
    ]
    assert [t["id"] for t in content["next"]] == ["q", "r"]
