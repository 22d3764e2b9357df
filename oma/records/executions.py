"""A run's executions as Temporal keeps them: those of a workflow id and
the latest one, the first and the last event of one, why its workflow task
last failed, and the children each started, back along a chain that
continued as new."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    GetWorkflowExecutionHistoryReverseRequest,
)
from temporalio.client import Client, WorkflowHistory
from temporalio.client import WorkflowExecution as ListedExecution
from temporalio.service import RPCError, RPCStatusCode

from oma.core.schema.errors import InvalidForkError
from oma.core.schema.task import ReusedFrom


async def latest_temporal_run_id(client: Client, workflow_id: str) -> str | None:
    """The Temporal run id of the latest execution of ``workflow_id``;
    ``None`` when there is none. Raises the server's other ``RPCError``s."""
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).run_id
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return None


async def latest_execution(
    client: Client, run_id: str, *, hint: str, not_temporal_run_id: str | None = None
) -> str:
    """The Temporal run id of the latest execution of the run (workflow id)
    ``run_id``, other than ``not_temporal_run_id`` (a run under the same
    workflow id that reads its predecessor: then the newest other one
    Temporal's visibility lists). Raises ``InvalidForkError`` when there is
    none, its message ending with ``hint`` (what to give instead)."""
    latest = await latest_temporal_run_id(client, run_id)
    if latest is not None and latest != not_temporal_run_id:
        return latest
    others = [wf for wf in await executions_of(client, run_id) if wf.run_id != not_temporal_run_id]
    if latest is None or not others:
        before = " before this one" if latest is not None else ""
        raise InvalidForkError(
            f"no run {run_id!r}{before} in namespace {client.namespace!r}: give the workflow "
            f"id of a TeamRun ({hint})"
        )
    return max(others, key=lambda wf: wf.start_time).run_id


async def executions_of(
    client: Client, workflow_id: str, *, limit: int | None = None
) -> list[ListedExecution]:
    """The executions of ``workflow_id`` Temporal's visibility lists (at most
    ``limit``), in the order it lists them; a visibility that lags may not
    list one that just started. Raises ``RPCError``."""
    query = f"WorkflowId = {_quoted(workflow_id)}"
    return [wf async for wf in client.list_workflows(query, limit=limit) if wf.id == workflow_id]


def _quoted(value: str) -> str:
    """``value`` as a string literal of a Temporal visibility query."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def edge_event(client: Client, execution: WorkflowExecution, *, first: bool) -> HistoryEvent:
    """The first (or last) event of ``execution`` (no run id: the workflow
    id's latest), in one page of one event. Raises ``RPCError``."""
    service = client.workflow_service
    if first:
        request = GetWorkflowExecutionHistoryRequest(
            namespace=client.namespace, execution=execution, maximum_page_size=1
        )
        return (await service.get_workflow_execution_history(request)).history.events[0]
    reverse = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace, execution=execution, maximum_page_size=1
    )
    return (await service.get_workflow_execution_history_reverse(reverse)).history.events[0]


WORKFLOW_TASK_EVENTS = 50
"""How many of a history's last events ``workflow_task_failure`` reads."""


async def workflow_task_failure(
    client: Client, workflow_id: str, *, timeout: timedelta | None = None
) -> str:
    """``CAUSE: message`` of the latest failed workflow task among the last
    ``WORKFLOW_TASK_EVENTS`` events of the latest execution of
    ``workflow_id`` (read from its end, in one request of at most
    ``timeout``), or ``""``. Raises ``RPCError`` (a request past
    ``timeout`` too)."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id),
        maximum_page_size=WORKFLOW_TASK_EVENTS,
    )
    page = await client.workflow_service.get_workflow_execution_history_reverse(
        request, timeout=timeout
    )
    for event in page.history.events:
        if event.HasField("workflow_task_failed_event_attributes"):
            failed = event.workflow_task_failed_event_attributes
            name = WorkflowTaskFailedCause.Name(failed.cause)
            return f"{name.removeprefix('WORKFLOW_TASK_FAILED_CAUSE_')}: {failed.failure.message}"
    return ""


Children = dict[str, str]
"""Child workflow id -> the Temporal run id of its last execution a ``TeamRun``
execution started, and ``CONTINUED_FROM`` -> the execution it continued
from, if any (``children_of``)."""

CONTINUED_FROM = ""
"""The key ``children_of`` answers an execution's predecessor under (no child id is empty)."""


async def children_of(client: Client, workflow_id: str, temporal_run_id: str) -> Children:
    """The children the ``TeamRun`` execution ``temporal_run_id`` of
    ``workflow_id`` started, and the execution it continued from
    (``Children``), read from its history. Raises ``RPCError``."""
    found: Children = {}
    handle = client.get_workflow_handle(workflow_id, run_id=temporal_run_id)
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_started_event_attributes"):
            previous = event.workflow_execution_started_event_attributes.continued_execution_run_id
            if previous:
                found[CONTINUED_FROM] = previous
        elif (child := started_child(event)) is not None:
            found[child.workflow_id] = child.run_id
    return found


def started_child(event: HistoryEvent) -> WorkflowExecution | None:
    """The child execution ``event`` says started (a
    ``ChildWorkflowExecutionStarted`` event's), or ``None`` for another event."""
    if not event.HasField("child_workflow_execution_started_event_attributes"):
        return None
    return event.child_workflow_execution_started_event_attributes.workflow_execution


def started_children(histories: Iterable[WorkflowHistory]) -> list[WorkflowExecution]:
    """The child executions ``histories`` started (``started_child``), in order."""
    return [
        child
        for history in histories
        for event in history.events
        if (child := started_child(event)) is not None
    ]


async def child_execution(
    client: Client,
    origin: ReusedFrom,
    child_id: str,
    seen: dict[tuple[str, str], Children],
) -> str | None:
    """The Temporal run id of the ``AgentRun`` ``child_id`` that the
    ``TeamRun`` execution ``origin`` names started (its last, for a task
    retried), read from that execution's history and, back along a chain that
    continued as new, its predecessors'; ``seen`` caches each history's
    children. ``None`` when ``origin`` names no execution (a run from before
    it: the latest is read) or none started it. Raises ``RPCError``."""
    execution = origin.temporal_run_id
    while execution:
        key = (origin.run_id, execution)
        if key not in seen:
            seen[key] = await children_of(client, origin.run_id, execution)
        found = seen[key].get(child_id)
        if found is not None:
            return found
        execution = seen[key].get(CONTINUED_FROM)
    return None
