"""The names on the wire (``oma.core.contracts.names``): their values are what
histories recorded and users type, and the worker and the workflows declare
exactly those."""

from __future__ import annotations

import ast
from pathlib import Path
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

ROOT = Path(__file__).resolve().parent.parent


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
        "plan_shards",
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


WIRE_CALLS = frozenset(
    {
        "execute_activity",
        "start_activity",
        "execute_local_activity",
        "start_local_activity",
        "signal",
        "query",
        "execute_update",
        "start_update",
        "execute_update_with_start_workflow",
        "start_child_workflow",
        "execute_child_workflow",
        "start_workflow",
        "execute_workflow",
        "defn",
        "update",
    }
)
"""Calls whose first argument (or one of ``WIRE_KEYWORDS``) is a name on the
wire: ``handle.signal(...)``, ``workflow.get_external_workflow_handle(id).signal(...)``,
``workflow.execute_activity(...)``, ``@activity.defn(name=...)``,
``@workflow.update(name=...)`` and the like."""

WIRE_KEYWORDS = frozenset(
    {"activity", "workflow", "signal", "query", "update", "start_signal", "name"}
)


def bare_wire_names(root: Path) -> list[str]:
    """``file:line: 'name'`` of each wire name written as a bare string in a
    ``WIRE_CALLS`` call under ``root/oma``, outside ``oma/core/contracts``."""
    wire = set().union(
        *(_values(n) for n in (WorkflowName, ActivityName, SignalName, QueryName, UpdateName))
    )
    found: list[str] = []
    for path in sorted((root / "oma").rglob("*.py")):
        if (root / "oma" / "core" / "contracts") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called not in WIRE_CALLS:
                continue
            given = node.args[:1] + [k.value for k in node.keywords if k.arg in WIRE_KEYWORDS]
            found += [
                f"{path.relative_to(root)}:{arg.lineno}: {arg.value!r}"
                for arg in given
                if isinstance(arg, ast.Constant) and arg.value in wire
            ]
    return found


def test_oma_names_no_wire_name_with_a_bare_string() -> None:
    # issue 36: both sides of the wire name it by its constant in
    # oma.core.contracts.names, so that it cannot drift on one side
    found = bare_wire_names(ROOT)
    assert not found, "bare wire names (use oma.core.contracts.names):\n" + "\n".join(found)
