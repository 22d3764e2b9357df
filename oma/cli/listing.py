"""``oma list`` and ``oma approvals`` without a run id: runs found through
Temporal's visibility (``oma.client.listing``), on the server that holds the
runs, or the embedded one ``oma run`` left, started for the listing and
stopped (``oma.cli.common.runs_server``).

Imported by ``oma.cli.app`` only when one of those commands runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from rich import box
from rich.table import Table
from temporalio.client import Client
from temporalio.service import RPCError

from oma.cli.common import (
    connection,
    console,
    err_console,
    fail,
    print_table,
    run_async,
    run_text,
    runs_server,
)
from oma.cli.run import QUERY_TIMEOUT
from oma.client.listing import check_listing, list_team_runs, open_approvals
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.visibility import AWAITING_APPROVAL, RUNNING
from oma.core.schema.listing import OpenApprovals, TeamRunListing

T = TypeVar("T")


def list_command(status: str | None, team: str | None, limit: int, as_json: bool) -> None:
    """``oma list``: the ``limit`` newest team runs, newest first, as a table
    (or JSON: a list of ``TeamRunListing``). An unknown ``status`` or a
    ``limit`` out of range is refused before connecting (``InputError``:
    exit 2)."""
    check_listing(status, limit)  # before connecting
    runs: list[TeamRunListing] = run_async(
        _asking(
            lambda client: list_team_runs(client, status=status, team=team, limit=limit), "oma list"
        )
    )
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return
    namespace = connection().namespace
    if not runs:
        console.print(run_text(f"no team runs{_filters(status, team)} in namespace {namespace!r}"))
        return
    title = f"team runs{_filters(status, team)} in namespace {namespace!r}, newest first"
    table = Table(title=run_text(title), box=box.SIMPLE)
    table.add_column("workflow id", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("team", overflow="fold")
    table.add_column("started (UTC)", no_wrap=True)
    for r in runs:
        table.add_row(
            run_text(r.workflow_id), _status(r), run_text(r.team or "-"), _utc(r.started_at)
        )
    print_table(table)


def approvals_command(as_json: bool) -> None:
    """``oma approvals`` without a run id: every open request of the
    namespace, oldest first (or JSON: an ``OpenApprovals``). Exits 1 when a
    waiting run did not answer."""
    found: OpenApprovals = run_async(
        _asking(lambda client: open_approvals(client, rpc_timeout=QUERY_TIMEOUT), "oma approvals")
    )
    if as_json:
        print(found.model_dump_json(indent=2))
    else:
        _print_open_approvals(found)
    for run in found.unanswered:
        err_console.print(run_text(f"warning: run {run.workflow_id} waits too: {run.error}"))
    if found.unanswered:
        raise fail(f"{len(found.unanswered)} waiting run(s) did not say what they wait for")


def _print_open_approvals(found: OpenApprovals) -> None:
    namespace = connection().namespace
    if not found.requests:
        console.print(run_text(f"no open approval requests in namespace {namespace!r}"))
    else:
        now = datetime.now(UTC)
        title = f"open approval requests in namespace {namespace!r}, oldest first"
        table = Table(title=run_text(title), box=box.SIMPLE)
        table.add_column("run", overflow="fold")
        table.add_column("request id", overflow="fold")
        table.add_column("approves", overflow="fold")
        table.add_column("waiting since (UTC)", no_wrap=True)
        table.add_column("for", no_wrap=True)
        for r in found.requests:
            table.add_row(
                run_text(r.workflow_id),
                run_text(r.request_id),
                run_text(r.approves),
                _utc(r.requested_at),
                age((now - r.requested_at).total_seconds()),
            )
        print_table(table)
        console.print(run_text(_decide_with(found)))
        agent_runs = sorted(
            {r.workflow_id for r in found.requests if r.workflow_type != WorkflowName.TEAM_RUN}
        )
        if agent_runs:
            console.print(
                run_text(
                    f"{', '.join(agent_runs)}: an AgentRun of its own; decide with `temporal "
                    "workflow update execute --name decide` (docs/approvals.md)"
                )
            )
    if found.truncated:
        console.print(
            run_text(
                f"more runs wait than one listing asks: see oma list --status {AWAITING_APPROVAL}"
            )
        )


def _decide_with(found: OpenApprovals) -> str:
    """How to decide the requests listed: the very command when there is one."""
    if len(found.requests) != 1:
        return (
            "decide with: oma approve|reject RUN REQUEST_ID; what each reviews: oma approvals RUN"
        )
    run, request = shlex.quote(found.requests[0].workflow_id), found.requests[0].request_id
    return (
        f"decide with: oma approve|reject {run} {shlex.quote(request)}; "
        f"what it reviews: oma approvals {run}"
    )


async def _asking(ask: Callable[[Client], Awaitable[T]], command: str) -> T:
    """``ask`` of a client of the server that holds the runs (the embedded one
    ``oma run`` left, started for it: ``runs_server``); every error ends
    ``command`` with one line (an ``OMAError``'s, e.g.
    ``SEARCH_ATTRIBUTES_MISSING``, raised as it is)."""
    async with runs_server(command) as client:
        try:
            return await ask(client)
        except RPCError as err:
            raise fail(f"Temporal refused the listing: {err}") from None


def _filters(status: str | None, team: str | None) -> str:
    said = [f"status {status}"] if status else []
    said += [f"team {team!r}"] if team is not None else []
    return f" ({', '.join(said)})" if said else ""


def _status(run: TeamRunListing) -> str:
    """``OmaStatus``; with Temporal's status where it disagrees (a run
    terminated, or past its execution timeout, keeps ``running``)."""
    temporal = run.execution_status.lower()
    if run.status is None:
        return f"({temporal})"
    if run.status in (RUNNING, AWAITING_APPROVAL) and run.execution_status != "RUNNING":
        return f"{run.status} ({temporal})"
    return run.status


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def age(seconds: float) -> str:
    """A duration as a person reads it: ``45s``, ``12m``, ``3h 05m``, ``2d 4h``."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"
