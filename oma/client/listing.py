"""Finding runs through Temporal's visibility (the search attributes runs set,
docs/visibility.md): the team runs of a namespace, newest first (``oma
list``), and every open approval request of it (``oma approvals`` without a
run id: the runs whose ``OmaStatus`` is ``awaiting_approval``, each asked its
``pending_approvals`` query)."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecution,
    WorkflowQueryFailedError,
)
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts import visibility
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.contracts.workflow_ids import is_shard_of
from oma.core.rules.approval_gate import task_of
from oma.core.schema.approvals import PendingApproval, approves
from oma.core.schema.errors import InputError, SearchAttributesMissingError
from oma.core.schema.listing import (
    OpenApproval,
    OpenApprovals,
    TeamRunListing,
    UnansweredRun,
)

MAX_LIMIT = 1000
"""The most team runs ``list_team_runs`` returns at once."""

MAX_WAITING_RUNS = 500
"""The most waiting runs ``open_approvals`` asks (``OpenApprovals.truncated``
says that more wait)."""

QUERIES_AT_ONCE = 8
"""How many ``pending_approvals`` queries ``open_approvals`` has in flight."""

_KEYS = {
    name: SearchAttributeKey.for_keyword(name)
    for name in (
        visibility.OMA_STATUS,
        visibility.OMA_TEAM,
        visibility.OMA_ERROR_CODE,
        visibility.OMA_FORKED_FROM,
    )
}


async def list_team_runs(
    client: Client, *, status: str | None = None, team: str | None = None, limit: int = 20
) -> list[TeamRunListing]:
    """The ``limit`` newest executions of ``TeamRun`` (by start time, newest
    first) in ``client``'s namespace, without its ``AgentRun`` children,
    without a sharded run's shards (its own result and ``oma show`` list
    them) and without the executions a long run continued as new from
    (unless ``status`` is ``continued_as_new``); only those whose
    ``OmaStatus`` is ``status`` and whose ``OmaTeam`` is ``team``, when given.

    Temporal's SQL visibility (the dev server's) cannot sort by start time
    (``ORDER BY``): it lists running executions first, newest first, then the
    closed ones by close time. So the executions are read in that order, and
    the reading stops at a closed one that closed before the ``limit``-th
    newest found started: no later one can be newer.

    Raises ``InputError`` for a ``status`` that is not an ``OmaStatus`` or a
    ``limit`` outside 1..``MAX_LIMIT``; ``SearchAttributesMissingError`` when
    the namespace has not registered the attributes a filter needs;
    ``temporalio.service.RPCError`` for any other refusal.
    """
    check_listing(status, limit)
    clauses = [f'WorkflowType="{WorkflowName.TEAM_RUN}"']
    if status is not None:
        clauses.append(f'{visibility.OMA_STATUS}="{status}"')
    if status != "continued_as_new":
        clauses.append('ExecutionStatus!="ContinuedAsNew"')
    literal = _literal(team) if team is not None else None
    if literal is not None:
        clauses.append(f"{visibility.OMA_TEAM}={literal}")
    newest: list[TeamRunListing] = []  # sorted: newest first, at most limit
    async for execution in _executions(client, " AND ".join(clauses), min(limit * 2, MAX_LIMIT)):
        closed_at = execution.close_time
        if len(newest) == limit and closed_at is not None and closed_at < newest[-1].started_at:
            break
        if execution.parent_id and is_shard_of(execution.id, execution.parent_id):
            continue  # a TeamRun a workflow of the user's own started is listed
        row = _listing(execution)
        if team is not None and row.team != team:
            continue  # a name the query could not say (_literal)
        bisect.insort(newest, row, key=lambda r: (-r.started_at.timestamp(), r.workflow_id))
        del newest[limit:]
    return newest


def check_listing(status: str | None, limit: int) -> None:
    """Raise ``InputError`` for a ``status`` that is not an ``OmaStatus``
    (``STATUSES``) or a ``limit`` outside 1..``MAX_LIMIT``."""
    if status is not None and status not in visibility.STATUSES:
        raise InputError(f"unknown OmaStatus {status!r}: one of {', '.join(visibility.STATUSES)}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit {limit} is out of range: give 1 to {MAX_LIMIT}")


async def open_approvals(client: Client, *, rpc_timeout: timedelta | None = None) -> OpenApprovals:
    """Every open approval request in ``client``'s namespace, oldest first:
    each run whose ``OmaStatus`` is ``awaiting_approval`` (a ``TeamRun``, or
    an ``AgentRun`` of its own; a task's ``AgentRun`` is left out, its team
    run lists its tool requests) is asked its ``pending_approvals`` query,
    ``QUERIES_AT_ONCE`` at a time, each bounded by ``rpc_timeout``. A run
    that does not answer (no worker polls its task queue) is in
    ``unanswered``; past ``MAX_WAITING_RUNS`` runs the rest are not asked
    (``truncated``). Runs that waited already when their worker took this
    version on do not say ``awaiting_approval`` (docs/visibility.md).

    Raises ``SearchAttributesMissingError`` when the namespace has not
    registered ``OmaStatus``; ``temporalio.service.RPCError`` for any other
    refusal.
    """
    query = (
        f'{visibility.OMA_STATUS}="{visibility.AWAITING_APPROVAL}" AND ExecutionStatus="Running"'
    )
    waiting: list[WorkflowExecution] = []
    found = OpenApprovals()
    async for execution in _executions(client, query, MAX_WAITING_RUNS):
        if execution.workflow_type == WorkflowName.AGENT_RUN and execution.parent_id:
            continue  # a task's run: its team run lists the request
        if len(waiting) == MAX_WAITING_RUNS:
            found.truncated = True
            break
        waiting.append(execution)
    gate = asyncio.Semaphore(QUERIES_AT_ONCE)

    async def ask(execution: WorkflowExecution) -> list[OpenApproval] | UnansweredRun:
        async with gate:
            return await _requests_of(client, execution, rpc_timeout)

    for answer in await asyncio.gather(*(ask(e) for e in waiting)):
        if isinstance(answer, UnansweredRun):
            found.unanswered.append(answer)
        else:
            found.requests.extend(answer)
    found.requests.sort(key=lambda r: (r.requested_at, r.workflow_id, r.request_id))
    return found


async def _requests_of(
    client: Client, execution: WorkflowExecution, rpc_timeout: timedelta | None
) -> list[OpenApproval] | UnansweredRun:
    handle = client.get_workflow_handle(execution.id)
    try:
        pending: list[PendingApproval] = await handle.query(
            QueryName.PENDING_APPROVALS, result_type=list[PendingApproval], rpc_timeout=rpc_timeout
        )
    except (RPCTimeoutOrCancelledError, RPCError, WorkflowQueryFailedError) as err:
        # past rpc_timeout the SDK's core answers CANCELLED ("Timeout expired")
        timed_out = isinstance(err, RPCTimeoutOrCancelledError) or (
            isinstance(err, RPCError)
            and err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
        )
        if timed_out:
            why = "no answer to its pending_approvals query: is a worker polling its task queue?"
        else:
            why = f"its pending_approvals query failed: {err}"
        return UnansweredRun(workflow_id=execution.id, error=why)
    return [_open_approval(execution, r) for r in pending]


def _open_approval(execution: WorkflowExecution, request: PendingApproval) -> OpenApproval:
    content = request.content if isinstance(request.content, dict) else {}
    tool = content.get("tool") if request.boundary == "tool" else None
    return OpenApproval(
        workflow_id=execution.id,
        workflow_type=execution.workflow_type,
        request_id=request.request_id,
        boundary=request.boundary,
        approves=approves(request),
        task=task_of(request),
        tool=None if tool is None else str(tool),
        scope=request.scope,
        requested_at=request.requested_at,
        expires_at=request.expires_at,
        request_hash=request.request_hash,
    )


async def _executions(
    client: Client, query: str, page_size: int
) -> AsyncIterator[WorkflowExecution]:
    """The executions ``query`` lists, in the server's order; a query on an
    attribute the namespace lacks raises ``SearchAttributesMissingError``."""
    try:
        async for execution in client.list_workflows(query, page_size=page_size):
            yield execution
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT and any(
            name in err.message for name in visibility.SEARCH_ATTRIBUTES
        ):
            names = " ".join(visibility.SEARCH_ATTRIBUTES)
            raise SearchAttributesMissingError(
                f"namespace {client.namespace!r} cannot be searched by OMA's search attributes "
                f"({err.message}): register them once, e.g. `for name in {names}; do temporal "
                f"operator search-attribute create --namespace {client.namespace} --name "
                '"$name" --type Keyword; done` (docs/visibility.md)'
            ) from None
        raise


def _literal(value: str) -> str | None:
    """``value`` as a string literal of a visibility query, or ``None`` where
    the visibility store would not match it exactly (a quote, a backslash, a
    control character: its escapes differ by store); the caller filters those."""
    if any(c in value for c in '"\\') or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return f'"{value}"'


def _listing(execution: WorkflowExecution) -> TeamRunListing:
    attributes = execution.typed_search_attributes

    def keyword(name: str) -> Any:
        return attributes.get(_KEYS[name])

    status = execution.status.name if execution.status is not None else "UNKNOWN"
    return TeamRunListing(
        workflow_id=execution.id,
        run_id=execution.run_id,
        status=keyword(visibility.OMA_STATUS),
        execution_status=status,
        team=keyword(visibility.OMA_TEAM),
        error_code=keyword(visibility.OMA_ERROR_CODE),
        forked_from=keyword(visibility.OMA_FORKED_FROM),
        started_at=execution.start_time,
        closed_at=execution.close_time,
    )


OPEN_RUN_TYPES = (WorkflowName.TEAM_RUN, WorkflowName.AGENT_RUN)
"""The workflow types ``open_runs`` lists: every workflow OMA's workers run."""

MAX_OPEN_RUNS = 10_000
"""The most open runs ``open_runs`` returns at once."""


async def open_runs(
    client: Client, *, query: str | None = None, limit: int = 1000
) -> tuple[list[WorkflowExecution], bool]:
    """The open (``ExecutionStatus="Running"``) executions of ``TeamRun`` and
    ``AgentRun`` in ``client``'s namespace that also match ``query`` (a
    visibility query, ANDed), at most ``limit`` of them, in the server's
    order; and whether more match (the list stopped short).

    Raises ``InputError`` for a ``limit`` outside 1..``MAX_OPEN_RUNS`` or a
    ``query`` the server refuses (its message says why);
    ``SearchAttributesMissingError`` when ``query`` names an OMA attribute
    the namespace has not registered; ``temporalio.service.RPCError`` for any
    other refusal.
    """
    if not 1 <= limit <= MAX_OPEN_RUNS:
        raise InputError(f"limit {limit} is out of range: give 1 to {MAX_OPEN_RUNS}")
    types = " OR ".join(f'WorkflowType="{name}"' for name in OPEN_RUN_TYPES)
    clauses = [f"({types})", 'ExecutionStatus="Running"']
    if query is not None and query.strip():
        clauses.append(f"({query})")
    found: list[WorkflowExecution] = []
    try:
        async for execution in _executions(client, " AND ".join(clauses), min(limit + 1, 1000)):
            if len(found) == limit:
                return found, True
            found.append(execution)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT and query:
            raise InputError(f"the server refused the query {query!r}: {err.message}") from None
        raise
    return found, False
