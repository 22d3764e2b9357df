"""``oma approvals``, ``oma approve``, ``oma reject`` and ``oma abort``:
talk to a ``TeamRun`` that is already going, on a server that is already
running (nothing is started for a decision or an abort; ``oma approvals``, which
only reads, finds a run in the embedded server ``oma run`` left too).

Imported by ``oma.cli.app`` only when one of those commands runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from rich import box
from rich.json import JSON
from rich.table import Table
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from oma.cli.common import (
    connection,
    console,
    fail,
    print_table,
    run_async,
    run_text,
    runs_server,
)
from oma.cli.run import QUERY_TIMEOUT
from oma.cli.summary import print_result
from oma.cli.upstream import output_lines, upstream_header
from oma.client import OpenMultiAgent, team_run_result
from oma.client.approvals import pending as pending_requests
from oma.client.approvals import upstream_outputs
from oma.client.runs import cause
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    PendingApproval,
    Reviewer,
)
from oma.core.schema.errors import OMAError
from oma.core.schema.results import TeamRunResult
from oma.records.aborts import abort_sent
from oma.runtime.dev_server import is_listening

UPDATE_TIMEOUT = timedelta(seconds=30)
"""How long ``oma approve`` and ``oma reject`` wait for the run to record the decision."""


@asynccontextmanager
async def _running_team_run(
    workflow_id: str, reading: str | None = None
) -> AsyncIterator[tuple[Client, WorkflowHandle[Any, Any]]]:
    """A client and a handle on the running ``TeamRun`` ``workflow_id``, on the
    server and namespace ``oma.runtime.connection`` configures.

    A decision or an abort goes to a run that is already going, on a server
    that is running: nothing is started for one. A command that only reads
    (``reading``, its name: ``oma approvals``) also finds a run in the
    embedded server ``oma run`` left (``runs_server``), which is then closed.
    Fails with a clear error when nothing listens, when there is no such
    workflow, when it is not a ``TeamRun``, or when it has already closed.
    """
    if reading is not None:
        async with runs_server(reading) as client:
            yield client, await _team_run(client, workflow_id)
        return
    conn = connection()
    address = conn.address
    if not is_listening(address):
        raise fail(
            f"nothing listens on {address}: start `oma dev` (or point TEMPORAL_ADDRESS at the "
            "Temporal server that holds the run)"
        )
    client = await conn.connect()  # TemporalUnavailableError: one line (run_async)
    yield client, await _team_run(client, workflow_id)


async def _team_run(client: Client, workflow_id: str) -> WorkflowHandle[Any, Any]:
    """The handle of the running ``TeamRun`` ``workflow_id``; exits 1 with one
    line when there is none."""
    namespace = client.namespace
    handle = client.get_workflow_handle(workflow_id, result_type=TeamRunResult)
    try:
        described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise fail(f"no workflow {workflow_id!r} in namespace {namespace!r}") from None
        raise fail(f"cannot describe workflow {workflow_id!r}: {e}") from None
    if described.workflow_type != WorkflowName.TEAM_RUN:
        raise fail(f"workflow {workflow_id!r} is a {described.workflow_type}, not a TeamRun")
    if described.status != WorkflowExecutionStatus.RUNNING:
        status = described.status.name if described.status else "closed"
        raise fail(
            f"TeamRun {workflow_id} has already ended ({status}): it takes no more "
            f"decisions or signals; see `oma show {shlex.quote(workflow_id)}`"
        )
    return handle


@contextmanager
def _query_errors(handle: WorkflowHandle[Any, Any], name: str) -> Iterator[None]:
    """The queries of TeamRun ``handle`` (``name``) inside fail with one line."""
    try:
        yield
    except RPCError as e:
        raise fail(
            f"the {name} query of TeamRun {handle.id} got no answer ({e}): is a worker "
            "running on the run's task queue?"
        ) from None
    except WorkflowQueryFailedError as e:
        raise fail(f"the {name} query of TeamRun {handle.id} failed: {e.message}") from None


def approvals(workflow_id: str, full: bool = False, as_json: bool = False) -> None:
    """``oma approvals RUN``: the open approval requests of a running TeamRun (the
    ``pending_approvals`` query), a table and then the content each reviews;
    a dispatch's dependencies' outputs as previews, or whole with ``full``
    (``upstream_outputs``); ``as_json``: the query's answer as JSON."""

    async def go() -> tuple[list[PendingApproval], dict[str, dict[str, str | None]]]:
        async with _running_team_run(workflow_id, reading="oma approvals") as (_, handle):
            with _query_errors(handle, QueryName.PENDING_APPROVALS):
                pending = await pending_requests(handle, QUERY_TIMEOUT)
            whole = {}
            with _query_errors(handle, QueryName.STATE):
                for r in pending:
                    if full and r.upstream:
                        whole[r.request_id] = await upstream_outputs(handle, r, QUERY_TIMEOUT)
            return pending, whole

    pending, whole = run_async(go())
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in pending], indent=2))
        return
    if not pending:
        console.print(run_text(f"TeamRun {workflow_id}: no open approval requests"))
        return
    table = Table(
        title=run_text(f"open approval requests of TeamRun {workflow_id}"), box=box.SIMPLE
    )
    table.add_column("request id", no_wrap=True)
    table.add_column("boundary", no_wrap=True)
    table.add_column("reason", min_width=20, overflow="fold")
    table.add_column("requested at (UTC)")
    table.add_column("expires at (UTC)")
    for r in pending:
        expires = _utc(r.expires_at) if r.expires_at else "never"
        table.add_row(
            run_text(r.request_id), r.boundary, run_text(r.reason), _utc(r.requested_at), expires
        )
    print_table(table)
    for r in pending:
        _print_request_content(r, whole.get(r.request_id), workflow_id)
    which = shlex.quote(pending[0].request_id) if len(pending) == 1 else "REQUEST_ID"
    console.print(run_text(f"decide with: oma approve|reject {shlex.quote(workflow_id)} {which}"))


def _utc(at: datetime) -> str:
    # two lines, so the reason keeps the width of a narrow terminal
    return at.astimezone(UTC).strftime("%Y-%m-%d\n%H:%M:%S")


def _print_request_content(
    request: ApprovalRequest,
    whole: dict[str, str | None] | None = None,
    workflow_id: str | None = None,
) -> None:
    """The request's content, and a dispatch's upstream outputs: previews, or
    ``whole`` (task id -> output) when read."""
    console.rule(run_text(f"{request.request_id} ({request.boundary})"))
    console.print(JSON.from_data(request.content))
    upstream = request.upstream if isinstance(request, PendingApproval) else None
    if not upstream:
        return
    console.print(run_text(f"the outputs it will act on ({len(upstream)}):", "bold"))
    for up in upstream:
        text = whole.get(up.task_id) if whole is not None else up.preview
        console.print(run_text(upstream_header(up)))
        for line in output_lines(up, text, whole is not None):
            console.print(run_text(line))
    cut = whole is None and any(up.truncated for up in upstream)
    if cut and workflow_id is not None:
        console.print(run_text(f"whole outputs: oma approvals {workflow_id} --full", "dim"))


def decide(
    workflow_id: str,
    request_id: str,
    value: Literal["approve", "reject"],
    reviewer: str,
    display_name: str | None,
    comment: str | None,
) -> None:
    """Show the request, then send the ``decide`` update with its current hash
    (``OpenMultiAgent.approval_request`` and ``decide``)."""
    if not reviewer.strip():
        raise fail("--reviewer must not be empty: it says who decided", 2)

    async def go() -> ApprovalDecision:
        async with _running_team_run(workflow_id) as (client, _):
            oma = OpenMultiAgent(client=client)
            try:
                request = await oma.approval_request(
                    workflow_id, request_id, rpc_timeout=QUERY_TIMEOUT
                )
                _print_request_content(request, workflow_id=workflow_id)
                return await oma.decide(
                    workflow_id,
                    request_id,
                    value,
                    Reviewer(id=reviewer, display_name=display_name),
                    comment,
                    request=request,
                    rpc_timeout=UPDATE_TIMEOUT,
                )
            except OMAError as err:
                # exit 1 for all: an INVALID_RUN_INPUT (a --reviewer or
                # --display-name too long, a refusal) too, an InputError
                raise fail(str(err)) from None
            except RPCTimeoutOrCancelledError:
                raise fail(
                    f"TeamRun {workflow_id} did not answer the decision within "
                    f"{UPDATE_TIMEOUT.total_seconds():g} s: is a worker running on the run's "
                    "task queue? Read `oma approvals` before deciding again"
                ) from None
            except WorkflowUpdateFailedError as err:
                raise fail(f"the decision was refused: {cause(err)}") from None
            except RPCError as err:
                raise fail(f"the decision did not reach TeamRun {workflow_id}: {err}") from None

    recorded = run_async(go())
    who = recorded.reviewer.id + (
        f" ({recorded.reviewer.display_name})" if recorded.reviewer.display_name else ""
    )
    console.print(
        run_text(
            f"recorded: {recorded.decision} of {recorded.request_id} ({recorded.boundary}) by "
            f"{who} at {recorded.decided_at.isoformat(timespec='seconds')}"
            + (f": {recorded.comment}" if recorded.comment else "")
        )
    )
    if recorded.decision == "reject":
        console.print(run_text(rejection_effect(workflow_id, recorded.boundary)))


def rejection_effect(workflow_id: str, boundary: str) -> str:
    """What a rejection of a ``boundary`` request does to the run
    (docs/approvals.md): a tool call's is the call's result, which the agent
    reads, and the run goes on; a plan's, a round's or a dispatch's stops it."""
    if boundary == "tool":
        return (
            f"the tool call is not run: its agent reads the rejection as the call's result, "
            f"and TeamRun {workflow_id} goes on"
        )
    return f"TeamRun {workflow_id} stops: it ends rejected"


def abort(workflow_id: str, reason: str | None, wait: bool) -> None:
    """``oma abort``: the abort signal.

    No new task starts, tasks in flight finish, the rest are skipped, and the
    run ends cancelled.
    """

    async def go() -> TeamRunResult | None:
        async with _running_team_run(workflow_id) as (client, handle):
            try:
                earlier = await abort_sent(client, workflow_id)
                if earlier is None:
                    payload = {"reason": reason} if reason else {}
                    await handle.signal(SignalName.ABORT, payload, rpc_timeout=QUERY_TIMEOUT)
            except RPCError as err:
                raise fail(f"the abort signal did not reach TeamRun {workflow_id}: {err}") from None
            if earlier is not None:
                why = f" ({earlier.reason})" if earlier.reason else ""
                console.print(
                    run_text(
                        f"TeamRun {workflow_id} is already being aborted: an abort{why} reached "
                        f"it at {earlier.at:%H:%M:%S} UTC and is pending while the tasks in "
                        "flight settle; nothing more sent"
                    )
                )
            else:
                console.print(
                    run_text(
                        f"abort sent to TeamRun {workflow_id}: no new task starts, tasks in "
                        "flight finish, the rest are skipped, and the run ends cancelled"
                    )
                )
            if not wait:
                return None
            return await team_run_result(handle, client)

    result = run_async(go())
    if result is not None:
        print_result(result)
