"""Approval rules: request hashes, decision checks and approval options
(oma/approvals.py). Pure logic, no Temporal."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalOptions,
    ApprovalRequest,
    Decision,
    DecisionValue,
    Reviewer,
    canonical_json,
    check_decision,
    check_dispatch_names,
    request_hash,
)
from oma.core.schema.errors import (
    ApprovalConflictError,
    ApprovalError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
    InvalidRunInputError,
)
from oma.core.schema.task import TaskSpec
from oma.core.schema.team import TeamConfig

SCOPE = "run-1"
PLAN = {"tasks": [{"id": "a", "title": "Collect"}, {"id": "b", "title": "Write"}]}
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def request(request_id: str, content: Any = PLAN) -> ApprovalRequest:
    return ApprovalRequest(
        request_id=request_id,
        boundary="plan",
        scope=SCOPE,
        content=content,
        reason="review the plan",
        requested_at=WHEN,
        request_hash=request_hash(SCOPE, "plan", content),
    )


def decision(request_id: str, hash_: str, value: DecisionValue = "approve") -> Decision:
    return Decision(
        request_id=request_id,
        request_hash=hash_,
        decision=value,
        reviewer=Reviewer(id="ana"),
    )


def recorded(req: ApprovalRequest, value: DecisionValue = "approve") -> ApprovalDecision:
    return ApprovalDecision(
        request_id=req.request_id,
        boundary=req.boundary,
        request_hash=req.request_hash,
        decision=value,
        reviewer=Reviewer(id="bob"),
        decided_at=WHEN,
        source="update",
    )


# canonical_json and request_hash


def test_canonical_json_sorts_keys_at_every_level_without_whitespace() -> None:
    value = {"b": 1, "a": [2, {"d": "é", "c": None}], "e": {"z": True, "y": 1.5}}

    assert canonical_json(value) == '{"a":[2,{"c":null,"d":"é"}],"b":1,"e":{"y":1.5,"z":true}}'


def test_canonical_json_of_equal_values_is_equal_text() -> None:
    assert canonical_json({"x": 1, "y": [1, 2]}) == canonical_json({"y": [1, 2], "x": 1})


def test_request_hash_is_the_sha256_of_the_canonical_json() -> None:
    doc = '{"boundary":"plan","content":{"tasks":["é"]},"scope":"run-1"}'

    assert (
        request_hash(SCOPE, "plan", {"tasks": ["é"]})
        == hashlib.sha256(doc.encode("utf-8")).hexdigest()
    )


def test_request_hash_does_not_depend_on_key_order() -> None:
    reordered = {"tasks": [{"title": "Collect", "id": "a"}, {"title": "Write", "id": "b"}]}

    assert request_hash(SCOPE, "plan", reordered) == request_hash(SCOPE, "plan", PLAN)


@pytest.mark.parametrize(
    ("scope", "boundary", "content"),
    [
        ("run-2", "plan", PLAN),
        (SCOPE, "round", PLAN),
        (SCOPE, "plan", {"tasks": [{"id": "a", "title": "Collect"}]}),
        (
            SCOPE,
            "plan",
            {"tasks": [{"id": "b", "title": "Write"}, {"id": "a", "title": "Collect"}]},
        ),
    ],
)
def test_request_hash_changes_with_scope_boundary_or_content(
    scope: str, boundary: Any, content: Any
) -> None:
    assert request_hash(scope, boundary, content) != request_hash(SCOPE, "plan", PLAN)


def test_request_hash_is_64_hex_digits() -> None:
    digest = request_hash(SCOPE, "dispatch", {"id": "a"})

    assert len(digest) == 64
    assert set(digest) <= set("0123456789abcdef")


# check_decision


def test_a_decision_with_the_requests_hash_returns_the_request() -> None:
    req = request("plan-1")

    assert check_decision({"plan-1": req}, {}, decision("plan-1", req.request_hash)) is req


def test_a_decision_for_an_unknown_request_lists_the_known_ones() -> None:
    requests = {"plan-1": request("plan-1"), "dispatch-a": request("dispatch-a")}

    with pytest.raises(ApprovalUnknownRequestError) as info:
        check_decision(requests, {}, decision("round-9", "0" * 64))

    assert info.value.code == "APPROVAL_UNKNOWN_REQUEST"
    assert info.value.message == (
        "no approval request 'round-9' in this run (requests: dispatch-a, plan-1)"
    )


def test_a_decision_in_a_run_without_requests_says_none() -> None:
    with pytest.raises(ApprovalUnknownRequestError) as info:
        check_decision({}, {}, decision("plan-1", "0" * 64))

    assert info.value.message == "no approval request 'plan-1' in this run (requests: none)"


def test_a_second_decision_conflicts_with_the_first() -> None:
    req = request("plan-1")

    with pytest.raises(ApprovalConflictError) as info:
        check_decision(
            {"plan-1": req},
            {"plan-1": recorded(req, "reject")},
            decision("plan-1", req.request_hash),
        )

    assert info.value.code == "APPROVAL_CONFLICT"
    assert info.value.message == (
        "request 'plan-1' was already decided: reject by bob at 2025-01-02T03:04:05+00:00"
    )


def test_a_decided_request_conflicts_before_its_hash_is_checked() -> None:
    req = request("plan-1")

    with pytest.raises(ApprovalConflictError):
        check_decision({"plan-1": req}, {"plan-1": recorded(req)}, decision("plan-1", "f" * 64))


def test_a_decision_with_another_hash_is_stale() -> None:
    req = request("plan-1")
    old = request_hash(SCOPE, "plan", {"tasks": []})

    with pytest.raises(ApprovalStaleDecisionError) as info:
        check_decision({"plan-1": req}, {}, decision("plan-1", old))

    assert info.value.code == "APPROVAL_STALE_DECISION"
    assert info.value.message == (
        f"request 'plan-1' has hash {req.request_hash}, not {old}: the content changed "
        "since it was reviewed; read pending_approvals again"
    )


@pytest.mark.parametrize(
    "error", [ApprovalUnknownRequestError, ApprovalConflictError, ApprovalStaleDecisionError]
)
def test_every_refused_decision_is_an_approval_error(error: type[ApprovalError]) -> None:
    assert issubclass(error, ApprovalError)
    assert str(error("why")) == f"{error.code}: why"


# ApprovalOptions


def test_round_and_dispatch_approvals_together_are_refused() -> None:
    with pytest.raises(ValidationError) as info:
        ApprovalOptions(round=True, dispatch="all")

    assert info.value.error_count() == 1
    assert "'round' and 'dispatch' approvals are mutually exclusive: a round approval " in str(
        info.value
    )
    assert "already reviews every task it dispatches; keep one" in str(info.value)


def test_round_with_a_dispatch_list_is_refused_too() -> None:
    with pytest.raises(ValidationError, match="mutually exclusive"):
        ApprovalOptions.model_validate({"round": True, "dispatch": ["a"]})


def test_round_alone_and_dispatch_alone_are_accepted() -> None:
    assert ApprovalOptions(round=True).round is True
    assert ApprovalOptions(dispatch=["a"]).dispatch == ["a"]


def test_dispatch_all_gates_every_task() -> None:
    options = ApprovalOptions(dispatch="all")

    assert options.gates_dispatch("a", None) is True
    assert options.gates_dispatch("b", "writer") is True


def test_dispatch_by_task_id_gates_only_those_tasks() -> None:
    options = ApprovalOptions(dispatch=["deploy"])

    assert options.gates_dispatch("deploy", None) is True
    assert options.gates_dispatch("deploy", "ops") is True
    assert options.gates_dispatch("build", "ops") is False


def test_dispatch_by_agent_name_gates_that_agents_tasks() -> None:
    options = ApprovalOptions(dispatch=["ops"])

    assert options.gates_dispatch("deploy", "ops") is True
    assert options.gates_dispatch("deploy", "dev") is False
    assert options.gates_dispatch("deploy", None) is False


def test_no_dispatch_option_gates_nothing() -> None:
    options = ApprovalOptions()

    assert options.dispatch is None
    assert options.gates_dispatch("deploy", "ops") is False


def test_an_empty_dispatch_list_gates_nothing() -> None:
    assert ApprovalOptions(dispatch=[]).gates_dispatch("deploy", "ops") is False


def test_a_dispatch_gate_naming_no_task_or_agent_is_refused() -> None:
    team = TeamConfig.model_validate(
        {"name": "t", "agents": [{"name": "coder", "provider": "scripted", "script": ["x"]}]}
    )
    tasks = [TaskSpec(id="build", title="Build", assignee="coder")]
    check_dispatch_names(ApprovalOptions(dispatch=["build", "coder"]), tasks, team)
    check_dispatch_names(ApprovalOptions(dispatch="all"), tasks, team)

    with pytest.raises(InvalidRunInputError) as info:
        check_dispatch_names(ApprovalOptions(dispatch=["biuld", "coder"]), tasks, team)
    assert info.value.message == (
        "options.approvals.dispatch names 'biuld', which is neither a task id nor an agent "
        "of the team"
    )
