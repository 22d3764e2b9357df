"""Helpers for the orchestration tests: plans as a coordinator writes them,
tasks without an assignee, and what a run left behind (its children, their
results, its events, the error it failed with)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import QueryName
from oma.core.schema.messages import text_of
from oma.core.schema.results import AgentRunResult
from oma.core.schema.run_events import RunEvent

RESEARCH_THEN_WRITE = json.dumps(
    [
        {"title": "Research", "description": "find facts", "assignee": "researcher"},
        {
            "title": "Write",
            "description": "write it up",
            "assignee": "writer",
            "depends_on": ["Research"],
        },
    ]
)
"""A coordinator's plan as a bare JSON array: ``researcher`` then ``writer``."""

ECHO = "import sys; sys.stdout.write(sys.stdin.read())"
"""A process agent whose output is exactly its prompt."""


def plan_answer(*items: dict[str, Any], prose: bool = True) -> str:
    """A coordinator's answer: the tasks as a JSON array in a ```json fence,
    with prose before and after it (as models tend to write)."""
    fence = f"```json\n{json.dumps(list(items), indent=2)}\n```"
    if not prose:
        return fence
    return f"Here is the plan for the team.\n\n{fence}\n\nEach task builds on the one before."


def planned(
    title: str, assignee: str | None, *depends_on: str, key: str = "depends_on"
) -> dict[str, Any]:
    """One item of a coordinator's plan; ``depends_on`` names titles."""
    return {
        "title": title,
        "description": f"do {title.lower()}",
        "assignee": assignee,
        key: list(depends_on),
    }


def unassigned(task_id: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    """A task without an assignee: ``options.scheduling`` picks its agent."""
    return {
        "id": task_id,
        "title": task_id.capitalize(),
        "description": f"do {task_id}",
        "depends_on": list(depends_on),
        **extra,
    }


async def child_ids(client: Client, workflow_id: str, run_id: str | None = None) -> list[str]:
    """The workflow ids of the children a run started, in order (from its
    ``StartChildWorkflowExecutionInitiated`` events)."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]


async def child_result(client: Client, child_id: str) -> AgentRunResult:
    """The ``AgentRunResult`` of a completed child (a task or coordinator step)."""
    handle = client.get_workflow_handle(child_id, result_type=AgentRunResult)
    return await handle.result()


def prompts_of(result: AgentRunResult) -> list[str]:
    """The text of every user message of an LLM agent's conversation."""
    return [text_of(m.content) for m in result.messages if m.role == "user"]


async def events_of(
    client: Client, workflow_id: str, after_seq: int | None = None
) -> list[RunEvent]:
    """The ``events`` query of a run (all, or those after ``after_seq``)."""
    handle = client.get_workflow_handle(workflow_id)
    if after_seq is None:
        return await handle.query(QueryName.EVENTS, result_type=list[RunEvent])
    return await handle.query(QueryName.EVENTS, after_seq, result_type=list[RunEvent])


def started_task_ids(events: list[RunEvent]) -> list[str | None]:
    """The task ids of the ``task_start`` events, in order."""
    return [e.task_id for e in events if e.type == "task_start"]


def failure_of(err: WorkflowFailureError) -> ApplicationError:
    """The ``ApplicationError`` in the cause chain of a failed run."""
    cause: BaseException | None = err.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert cause is not None, f"no ApplicationError in the cause chain of {err!r}"
    return cause
