"""The names on the wire (``oma.core.contracts.names``): their values are what
histories recorded and users type, and the worker and the workflows declare
exactly those."""

from __future__ import annotations

from typing import Any

import pytest
import temporalio.activity
import temporalio.workflow

from oma.core.contracts.names import (
    ActivityName,
    QueryName,
    SignalName,
    UpdateName,
    WorkflowName,
)
from oma.worker import Activities
from oma.workflows.agent_run import AgentRun
from oma.workflows.team_run import TeamRun


def _values(names: type) -> set[str]:
    return {v for k, v in vars(names).items() if k.isupper()}


def test_the_wire_names_keep_their_values() -> None:
    assert _values(WorkflowName) == {"TeamRun", "AgentRun"}
    assert _values(ActivityName) == {
        "llm_turn",
        "tool_call",
        "mcp_list_tools",
        "mcp_close_run",
        "process_run",
        "acp_prompt",
        "acp_close_run",
        "before_run",
        "evaluate",
        "read_task_outputs",
        "read_fork_source",
        "registered_search_attributes",
    }
    assert _values(SignalName) == {
        "abort",
        "decide",
        "tool_approval_request",
        "tool_approval_closed",
        "task_usage",
        "forwarded_decision",
        "budget",
        "close_approvals",
    }
    assert _values(QueryName) == {
        "state",
        "events",
        "shared_memory",
        "pending_approvals",
        "conversation",
        "agent",
    }
    assert _values(UpdateName) == {"decide"}


def test_the_worker_serves_every_activity_named_and_no_other() -> None:
    served = [
        temporalio.activity._Definition.must_from_callable(fn).name
        for fn in Activities(session_task_queue="wire-names").all()
    ]
    assert sorted(served) == sorted(_values(ActivityName))


@pytest.mark.parametrize(
    ("workflow", "name", "signals", "queries"),
    [
        (
            TeamRun,
            "TeamRun",
            {"abort", "decide", "task_usage", "tool_approval_closed", "tool_approval_request"},
            {"events", "pending_approvals", "shared_memory", "state"},
        ),
        (
            AgentRun,
            "AgentRun",
            {"budget", "close_approvals", "decide", "forwarded_decision"},
            {"agent", "conversation", "events", "pending_approvals", "state"},
        ),
    ],
)
def test_each_workflow_declares_its_names(
    workflow: type[Any], name: str, signals: set[str], queries: set[str]
) -> None:
    defn = temporalio.workflow._Definition.must_from_class(workflow)
    assert (defn.name, set(defn.signals), set(defn.queries), set(defn.updates)) == (
        name,
        signals,
        queries,
        {"decide"},
    )
