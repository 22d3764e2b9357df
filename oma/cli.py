"""The ``oma`` command line.

``run`` and ``plan`` start a ``TeamRun`` (and, when nothing listens on
``TEMPORAL_ADDRESS``, the embedded dev server and a worker); ``approvals``,
``approve``, ``reject`` and ``abort`` talk to a run that is already going, on a
server that is already running; ``dev``, ``worker`` and ``replay`` serve and
debug runs.

Every command connects through ``oma.connection`` (Temporal's environment
configuration: a profile file, ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
credentials). Commands that run a worker import ``oma.worker`` (and with it
every activity) when they need it, so the other commands start fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich import box
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RPCError, RPCStatusCode

from oma import plugin
from oma.client import OpenMultiAgent
from oma.codec import keys_from_env, new_key
from oma.connection import Connection
from oma.core.approvals import ApprovalDecision, ApprovalRequest, Reviewer
from oma.core.errors import OMAError, ReplayMismatchError
from oma.core.results import TeamRunResult
from oma.core.run_events import RunEvent
from oma.core.run_input import TeamRunInput, checked_team_run_input
from oma.dev_server import DevServer, is_listening, split_address

app = typer.Typer(help="OMA on Temporal: multi-agent team runs as durable Temporal workflows.")
# soft wrap: a line longer than the terminal is left for the terminal to wrap,
# so output piped to a file or a test keeps its lines whole
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

STATE_DIR = Path(".oma")
DEV_DB = STATE_DIR / "temporal.db"

EVENT_POLL_S = 0.5
"""How often ``oma run`` and ``oma plan`` ask the run for new events."""

LAST_EVENTS_WAIT = timedelta(seconds=30)
"""How long ``oma run`` and ``oma plan``, once the run has ended, keep asking
it for the events not printed yet (its last steps, ``run_end`` among them)
before they print the result without them."""

QUERY_TIMEOUT = timedelta(seconds=10)
"""How long a query or signal waits for the server and a worker."""

UPDATE_TIMEOUT = timedelta(seconds=30)
"""How long ``oma approve`` and ``oma reject`` wait for the run to record the decision."""


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


# -- connecting ------------------------------------------------------------


@asynccontextmanager
async def _temporal(with_worker: bool | None) -> AsyncIterator[tuple[Any, str]]:
    """A connected client and task queue. Starts the embedded dev server (and a
    worker in this process) when nothing listens on ``TEMPORAL_ADDRESS``;
    everything started here is stopped on exit."""
    connection = _connection()
    server: DevServer | None = None
    if not is_listening(connection.address):
        if with_worker is False:
            raise _fail(
                f"nothing listens on {connection.address} and --no-worker leaves no worker to "
                "run the workflow: start `oma dev`, or drop --no-worker"
            )
        _, port = split_address(connection.address)
        err_console.print(f"[dim]starting the embedded Temporal dev server on port {port}[/]")
        server = DevServer(
            port=port,
            db_file=DEV_DB,
            log_file=STATE_DIR / "dev-server.log",
            namespaces=[connection.namespace],
        )
        try:
            await asyncio.to_thread(server.start)
        except OMAError as e:
            # e.g. another `oma run` holds .oma/temporal.db
            raise _fail(f"{e}; see {server.log_file}") from None
        connection = connection.at(server.address)
    try:
        client = await connection.connect()
        if with_worker if with_worker is not None else server is not None:
            from oma.worker import build_worker

            async with build_worker(client, connection.task_queue):
                yield client, connection.task_queue
        else:
            yield client, connection.task_queue
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


def _connection() -> Connection:
    try:
        keys_from_env()  # a malformed OMA_CODEC_KEYS fails here, before anything starts
        return Connection.from_env()
    except OMAError as e:
        raise _fail(str(e)) from None


@asynccontextmanager
async def _running_team_run(
    workflow_id: str,
) -> AsyncIterator[tuple[Client, WorkflowHandle[Any, Any]]]:
    """A client and a handle on the running ``TeamRun`` ``workflow_id``, on the
    server and namespace ``oma.connection`` configures.

    Connect only: a decision or an abort goes to a run that is already going,
    so nothing is started here (an embedded server would not hold the run).
    Fails with a clear error when nothing listens, when there is no such
    workflow, when it is not a ``TeamRun``, or when it has already closed.
    """
    connection = _connection()
    address, namespace = connection.address, connection.namespace
    if not is_listening(address):
        raise _fail(
            f"nothing listens on {address}: start `oma dev` (or point TEMPORAL_ADDRESS at the "
            "Temporal server that holds the run)"
        )
    try:
        client = await connection.connect()
    except RuntimeError as e:
        raise _fail(f"cannot connect to Temporal at {address}: {e}") from None
    handle = client.get_workflow_handle(workflow_id, result_type=TeamRunResult)
    try:
        described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise _fail(f"no workflow {workflow_id!r} in namespace {namespace!r}") from None
        raise _fail(f"cannot describe workflow {workflow_id!r}: {e}") from None
    if described.workflow_type != "TeamRun":
        raise _fail(f"workflow {workflow_id!r} is a {described.workflow_type}, not a TeamRun")
    if described.status != WorkflowExecutionStatus.RUNNING:
        status = described.status.name if described.status else "closed"
        raise _fail(
            f"TeamRun {workflow_id} has already ended ({status}): it takes no more "
            f"decisions or signals; see `temporal workflow result --workflow-id {workflow_id}`"
        )
    yield client, handle


async def _query(handle: WorkflowHandle[Any, Any], name: str, result_type: Any) -> Any:
    try:
        return await handle.query(name, result_type=result_type, rpc_timeout=QUERY_TIMEOUT)
    except RPCError as e:
        raise _fail(
            f"the {name} query of TeamRun {handle.id} got no answer ({e}): is a worker "
            "running on the run's task queue?"
        ) from None
    except WorkflowQueryFailedError as e:
        raise _fail(f"the {name} query of TeamRun {handle.id} failed: {e.message}") from None


# -- run and plan ----------------------------------------------------------


def _read_run_input(file: Path) -> TeamRunInput:
    """FILE as a ``TeamRunInput``, checked as the workflow will check it
    (``checked_team_run_input``); exits 2 when it is not one."""
    try:
        raw = json.loads(file.read_text())
    except OSError as e:
        raise _fail(f"cannot read {file}: {e.strerror}", 2) from None
    except UnicodeDecodeError:
        raise _fail(f"{file} is not UTF-8 text", 2) from None
    except json.JSONDecodeError as e:
        raise _fail(f"{file} is not valid JSON: {e}", 2) from None
    except RecursionError:
        raise _fail(f"{file} nests its JSON too deep to read", 2) from None
    try:
        return checked_team_run_input(raw)
    except OMAError as e:
        raise _fail(f"{file}: {e}", 2) from None


WorkerOption = Annotated[
    bool | None,
    typer.Option(
        "--worker/--no-worker",
        help="Run a worker in this process (default: only when the embedded server is started).",
    ),
]
WorkflowIdOption = Annotated[str | None, typer.Option(help="Workflow id (default: random).")]


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A run input: a TeamRun JSON file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
) -> None:
    """Validate FILE, start a TeamRun, follow its events, and print the tasks and the output.

    FILE has a team and exactly one of goal, tasks or plan. Exits 0 when the
    run succeeded, 1 when it did not, 2 when FILE is invalid, 130 when
    interrupted (the run is cancelled).
    """
    inp = _read_run_input(file)
    result = _run_async(_start_and_follow(inp, workflow_id, worker))
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        _print_result(result, goal_run=inp.goal is not None)
        if result.plan is not None and result.status == "planned":  # options.plan_only
            console.rule("plan")
            print(result.plan.model_dump_json(indent=2))
    raise typer.Exit(0 if result.success else 1)


@app.command()
def plan(
    file: Annotated[
        Path, typer.Argument(help="A goal run input: a TeamRun JSON file with 'goal'.")
    ],
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
) -> None:
    """Have the coordinator plan FILE's goal, run nothing, and print the plan as JSON.

    The printed plan artifact runs later as ``{"team": ..., "plan": <it>}``.
    Progress goes to stderr. Exits 2 when FILE has no goal.
    """
    inp = _read_run_input(file)
    if inp.goal is None:
        raise _fail(f"{file}: `oma plan` plans a 'goal'; this input has none", 2)
    options = inp.options.model_copy(update={"plan_only": True})
    result = _run_async(
        _start_and_follow(inp.model_copy(update={"options": options}), workflow_id, worker)
    )
    if result.plan is None:
        _print_error_code(result)
        raise _fail(f"the run ended {result.status} without a plan")
    print(result.plan.model_dump_json(indent=2))
    raise typer.Exit(0 if result.success else 1)


async def _start_and_follow(
    inp: TeamRunInput, workflow_id: str | None, with_worker: bool | None
) -> TeamRunResult:
    """Start a ``TeamRun`` of ``inp``, print its events to stderr as they
    happen, and return its result. Cancelled (Ctrl-C, SIGTERM), it cancels the
    run and waits for it to drain."""
    async with _temporal(with_worker) as (client, task_queue):
        wid = workflow_id or f"team-{inp.team.name}-{uuid.uuid4().hex[:8]}"
        try:
            handle = await client.start_workflow(
                "TeamRun", inp, id=wid, task_queue=task_queue, result_type=TeamRunResult
            )
        except WorkflowAlreadyStartedError:
            raise _fail(f"a run with workflow id {wid!r} is already running") from None
        err_console.print(f"[dim]started TeamRun {wid} on task queue {task_queue!r}[/]")
        progress = _Progress(handle)
        follow = asyncio.create_task(progress.follow())
        try:
            result: TeamRunResult = await handle.result()
        except asyncio.CancelledError:
            # Ctrl-C or SIGTERM: the run would otherwise go on (or come back
            # with the next embedded server); cancel it and let it drain
            follow.cancel()
            err_console.print(f"interrupted: cancelling TeamRun {wid}")
            await _cancel_and_wait(handle)
            raise
        except WorkflowFailureError as err:
            raise _fail(f"TeamRun {wid} did not complete: {_cause(err)}") from None
        finally:
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
        await progress.finish()
        return result


class _Progress:
    """Prints a run's events to stderr, one line each, as the ``events``
    query returns them (polled with ``after_seq``, so each is printed once)."""

    def __init__(self, handle: WorkflowHandle[Any, Any]) -> None:
        self.handle = handle
        self.after_seq = -1
        self.hinted: set[str] = set()

    async def follow(self) -> None:
        """Print new events every ``EVENT_POLL_S`` seconds, until cancelled."""
        while True:
            await self.poll()
            await asyncio.sleep(EVENT_POLL_S)

    async def poll(self) -> None:
        """Print the events recorded since the last answer, if the run answers."""
        try:
            await self._print_new(QUERY_TIMEOUT)
        except Exception:
            # best effort while the run goes on: it may not have taken its
            # first workflow task yet, and the next poll asks again
            return

    async def finish(self) -> None:
        """Print the events not printed yet, once the run has ended: its last
        steps, ``run_end`` at least.

        The run's events are final, but a query of a closed run needs a worker
        to replay it, and one under load or restarting answers late. So ask
        until it answers, for at most ``LAST_EVENTS_WAIT``; if it never does,
        or the query fails for good, say so on stderr rather than end short
        without a word.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LAST_EVENTS_WAIT.total_seconds()
        while True:
            left = max(deadline - loop.time(), EVENT_POLL_S)
            try:
                await self._print_new(timedelta(seconds=min(QUERY_TIMEOUT.total_seconds(), left)))
                return
            except (RPCError, RPCTimeoutOrCancelledError) as err:
                gone = isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND
                if gone or loop.time() + EVENT_POLL_S >= deadline:
                    self._missed(str(err))
                    return
            except Exception as err:  # e.g. the worker cannot replay the run
                self._missed(str(err))
                return
            await asyncio.sleep(EVENT_POLL_S)

    def _missed(self, why: str) -> None:
        err_console.print(
            f"could not read the last events of TeamRun {self.handle.id} ({why}); see them "
            f"with `temporal workflow query --workflow-id {self.handle.id} --type events`",
            style="yellow",
            highlight=False,
            markup=False,
        )

    async def _print_new(self, timeout: timedelta) -> None:
        events: list[RunEvent] = await self.handle.query(
            "events", self.after_seq, result_type=list[RunEvent], rpc_timeout=timeout
        )
        for event in events:
            if event.seq <= self.after_seq:
                continue
            self.after_seq = event.seq
            err_console.print(_event_line(event))
            if event.type == "approval_request" and event.detail not in self.hinted:
                self.hinted.add(event.detail or "")
                err_console.print(
                    f"approval needed: oma approve {self.handle.id} {event.detail} --reviewer ID",
                    style="bold yellow",
                    highlight=False,
                    markup=False,
                )


_EVENT_STYLES = {
    "task_complete": "green",
    "task_failed": "red",
    "task_skipped": "yellow",
    "task_retry": "yellow",
    "budget_exceeded": "red",
    "approval_request": "yellow",
    "approval_refused": "red",
    "abort": "red",
    "run_end": "bold",
}


def _event_line(event: RunEvent) -> Text:
    """``12:00:03 task_failed      code     PROCESS_FAILED: exit status 1``"""
    detail = (event.detail or "").strip()
    first = detail.splitlines()[0] if detail else ""
    at = event.at.astimezone().strftime("%H:%M:%S")
    line = Text(f"{at} ", style="dim")
    line.append(f"{event.type:<17}", style=_EVENT_STYLES.get(event.type, "cyan"))
    line.append(f" {event.task_id or '-':<12} {first}".rstrip())
    return line


def _print_result(result: TeamRunResult, goal_run: bool | None = None) -> None:
    """The task table, the tokens, the error code, and the final output: a goal
    run's synthesized answer, else the outputs of the tasks nothing depends on."""
    table = Table(title=f"TeamRun: {result.status}")
    for col in ("task", "assignee", "status", "attempts", "tokens in/out", "cost"):
        table.add_column(col, no_wrap=True)
    table.add_column("output or error")
    for t in result.tasks:
        usage = f"{t.token_usage.input_tokens}/{t.token_usage.output_tokens}"
        cost = "?" if t.cost_usd is None else f"${t.cost_usd:.4f}"
        detail = ((t.output if t.output is not None else t.error) or "").strip()
        # one line a task, cut to the terminal: the whole output is below
        # (final tasks) or in --json
        first = Text(detail.splitlines()[0] if detail else "", no_wrap=True, overflow="ellipsis")
        table.add_row(t.id, t.assignee or "-", t.status.value, str(t.attempts), usage, cost, first)
    console.print(table)
    coordinator = result.agent_results.get("coordinator")
    if coordinator is not None:
        cu = coordinator.token_usage
        console.print(
            f"coordinator: {coordinator.turns} turn(s), {cu.input_tokens} in, "
            f"{cu.output_tokens} out"
        )
    u = result.total_token_usage
    cache = ""
    if u.cache_read_input_tokens or u.cache_creation_input_tokens:
        cache = (
            f" (and {u.cache_read_input_tokens} read from, "
            f"{u.cache_creation_input_tokens} written to the prompt cache)"
        )
    console.print(
        f"total tokens: {u.input_tokens} in{cache}, {u.output_tokens} out", highlight=False
    )
    unknown = f" + unknown: {', '.join(result.cost_unknown)}" if result.cost_unknown else ""
    console.print(
        f"total cost: ${result.total_cost_usd:.4f}{unknown}", highlight=False, markup=False
    )
    _print_error_code(result)
    if goal_run is None:
        goal_run = result.goal is not None
    if goal_run:
        if result.final_output is not None:
            console.rule("final output")
            console.print(result.final_output, highlight=False, markup=False)
        return
    for t in _final_tasks(result):
        if t.output is not None:
            console.rule(f"output of {t.id} ({t.title})")
        else:  # a final task that failed or was skipped: why
            console.rule(f"{t.id} ({t.title}): {t.status.value}")
        console.print(t.output or t.error or "", highlight=False, markup=False)


def _print_error_code(result: TeamRunResult) -> None:
    if result.error_code is not None:
        console.print(
            f"{result.error_code}: {result.error}" if result.error else result.error_code,
            style="bold red",
            highlight=False,
            markup=False,
        )


def _final_tasks(result: TeamRunResult) -> list[Any]:
    """The tasks nothing depends on: their outputs are the run's final output."""
    depended_on = {d for t in result.tasks for d in t.depends_on}
    return [t for t in result.tasks if t.id not in depended_on]


async def _cancel_and_wait(handle: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(handle.cancel(), 5)
        await asyncio.wait_for(handle.result(), 15)


def _cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure, as ``TYPE: message``."""
    while err.__cause__ is not None or getattr(err, "cause", None) is not None:
        err = getattr(err, "cause", None) or err.__cause__  # type: ignore[assignment]
    kind = getattr(err, "type", None) or type(err).__name__
    # str() of an ApplicationError already starts with its type
    return f"{kind}: {getattr(err, 'message', None) or err}"


def _run_async(coro: Any) -> Any:
    """Run ``coro``; Ctrl-C and SIGTERM (a closed terminal, ``kill``, a service
    manager) both cancel it, so its cleanup runs, and exit with status 130."""

    async def cancellable() -> Any:
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        return await coro

    try:
        return asyncio.run(cancellable())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(130) from None


# -- approvals and abort ---------------------------------------------------

ReviewerOption = Annotated[str, typer.Option(help="Your reviewer id, recorded with the decision.")]
DisplayNameOption = Annotated[str | None, typer.Option(help="Your name, as a person reads it.")]
CommentOption = Annotated[str | None, typer.Option(help="Why, recorded with the decision.")]


@app.command()
def approvals(
    workflow_id: Annotated[str, typer.Argument(help="The TeamRun's workflow id.")],
) -> None:
    """List the open approval requests of a running TeamRun (the pending_approvals query)."""

    async def go() -> list[ApprovalRequest]:
        async with _running_team_run(workflow_id) as (_, handle):
            pending: list[ApprovalRequest] = await _query(
                handle, "pending_approvals", list[ApprovalRequest]
            )
            return pending

    pending = _run_async(go())
    if not pending:
        console.print(f"TeamRun {workflow_id}: no open approval requests")
        return
    table = Table(title=f"open approval requests of TeamRun {workflow_id}", box=box.SIMPLE)
    table.add_column("request id", no_wrap=True)
    table.add_column("boundary", no_wrap=True)
    table.add_column("reason", min_width=20, overflow="fold")
    table.add_column("requested at (UTC)")
    table.add_column("expires at (UTC)")
    for r in pending:
        expires = _utc(r.expires_at) if r.expires_at else "never"
        table.add_row(r.request_id, r.boundary, r.reason, _utc(r.requested_at), expires)
    console.print(table)
    for r in pending:
        _print_request_content(r)
    console.print(
        f"decide with: oma approve|reject {workflow_id} REQUEST_ID --reviewer ID",
        highlight=False,
    )


def _utc(at: datetime) -> str:
    # two lines, so the reason keeps the width of a narrow terminal
    return at.astimezone(UTC).strftime("%Y-%m-%d\n%H:%M:%S")


def _print_request_content(request: ApprovalRequest) -> None:
    console.rule(f"{request.request_id} ({request.boundary})")
    console.print(JSON.from_data(request.content))


@app.command()
def approve(
    workflow_id: Annotated[str, typer.Argument(help="The TeamRun's workflow id.")],
    request_id: Annotated[str, typer.Argument(help="The request to approve (`oma approvals`).")],
    reviewer: ReviewerOption,
    display_name: DisplayNameOption = None,
    comment: CommentOption = None,
) -> None:
    """Approve an open approval request (the decide update); prints what was recorded."""
    _decide(workflow_id, request_id, "approve", reviewer, display_name, comment)


@app.command()
def reject(
    workflow_id: Annotated[str, typer.Argument(help="The TeamRun's workflow id.")],
    request_id: Annotated[str, typer.Argument(help="The request to reject (`oma approvals`).")],
    reviewer: ReviewerOption,
    display_name: DisplayNameOption = None,
    comment: CommentOption = None,
) -> None:
    """Reject an open approval request (the decide update): the run stops and ends rejected."""
    _decide(workflow_id, request_id, "reject", reviewer, display_name, comment)


def _decide(
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
        raise _fail("--reviewer must not be empty: it says who decided", 2)

    async def go() -> ApprovalDecision:
        async with _running_team_run(workflow_id) as (client, _):
            oma = OpenMultiAgent(client=client)
            try:
                request = await oma.approval_request(
                    workflow_id, request_id, rpc_timeout=QUERY_TIMEOUT
                )
                _print_request_content(request)
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
                raise _fail(str(err)) from None
            except RPCTimeoutOrCancelledError:
                raise _fail(
                    f"TeamRun {workflow_id} did not answer the decision within "
                    f"{UPDATE_TIMEOUT.total_seconds():g} s: is a worker running on the run's "
                    "task queue? Read `oma approvals` before deciding again"
                ) from None
            except WorkflowUpdateFailedError as err:
                raise _fail(f"the decision was refused: {_cause(err)}") from None
            except RPCError as err:
                raise _fail(f"the decision did not reach TeamRun {workflow_id}: {err}") from None

    recorded = _run_async(go())
    who = recorded.reviewer.id + (
        f" ({recorded.reviewer.display_name})" if recorded.reviewer.display_name else ""
    )
    console.print(
        f"recorded: {recorded.decision} of {recorded.request_id} ({recorded.boundary}) by {who} "
        f"at {recorded.decided_at.isoformat(timespec='seconds')}"
        + (f": {recorded.comment}" if recorded.comment else ""),
        highlight=False,
        markup=False,
    )
    if recorded.decision == "reject":
        console.print(f"TeamRun {workflow_id} stops: it ends rejected", highlight=False)


@app.command()
def abort(
    workflow_id: Annotated[str, typer.Argument(help="The TeamRun's workflow id.")],
    reason: Annotated[str | None, typer.Option(help="Why, recorded in the run.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the run to end and print it.")
    ] = False,
) -> None:
    """Abort a running TeamRun gracefully (the abort signal).

    No new task starts, tasks in flight finish, the rest are skipped, and the
    run ends cancelled.
    """

    async def go() -> TeamRunResult | None:
        async with _running_team_run(workflow_id) as (_, handle):
            try:
                await handle.signal(
                    "abort", {"reason": reason} if reason else {}, rpc_timeout=QUERY_TIMEOUT
                )
            except RPCError as err:
                raise _fail(
                    f"the abort signal did not reach TeamRun {workflow_id}: {err}"
                ) from None
            console.print(
                f"abort sent to TeamRun {workflow_id}: no new task starts, tasks in flight "
                "finish, the rest are skipped, and the run ends cancelled",
                highlight=False,
            )
            if not wait:
                return None
            result: TeamRunResult = await handle.result()
            return result

    result = _run_async(go())
    if result is not None:
        _print_result(result)


# -- replay, worker, dev ---------------------------------------------------


@app.command()
def replay(
    history: Annotated[
        Path, typer.Argument(help="A history from `temporal workflow show --output json`.")
    ],
    workflow_id: Annotated[
        str | None,
        typer.Option(help="The run's workflow id (default: read from the history's children)."),
    ] = None,
) -> None:
    """Replay HISTORY against the current workflow code; exit 1 on a mismatch."""
    from temporalio.client import WorkflowHistory

    try:
        raw = json.loads(history.read_text())
        if not isinstance(raw, dict) or not raw.get("events"):
            raise ValueError("expected an object with a non-empty 'events' list")
        wid = workflow_id or _workflow_id_of(raw) or history.stem
        parsed = WorkflowHistory.from_json(wid, raw)
        if not parsed.events[0].HasField("workflow_execution_started_event_attributes"):
            raise ValueError("its first event is not WorkflowExecutionStarted")
    except OSError as e:
        raise _fail(f"cannot read {history}: {e.strerror}", 2) from None
    except (ValueError, KeyError, TypeError) as e:
        raise _fail(f"{history} is not a workflow history in JSON: {e}", 2) from None
    try:
        _check_codec_keys(parsed)
        replayer = plugin.replayer()
    except OMAError as e:
        raise _fail(str(e)) from None

    async def go() -> Any:
        return await replayer.replay_workflow(parsed, raise_on_replay_failure=False)

    result = _run_async(go())
    if result.replay_failure is not None:
        mismatch = ReplayMismatchError(
            f"{history} no longer replays against the current workflow code: "
            f"{result.replay_failure}"
        )
        raise _fail(str(mismatch))
    console.print(f"{history}: replayed {len(parsed.events)} events, no mismatch")


def _check_codec_keys(history: Any) -> None:
    """Raise ``CodecKeyMissingError`` when the history's input is encrypted with
    a key ``OMA_CODEC_KEYS`` does not hold: the replay would otherwise report a
    mismatch (the run failing on an unreadable input) instead of the cause."""
    from oma.codec import AesGcmCodec, undecryptable_reason
    from oma.core.errors import CodecKeyMissingError

    started = history.events[0].workflow_execution_started_event_attributes
    for payload in started.input.payloads:
        keys = keys_from_env()
        shown = AesGcmCodec(keys).decrypt(payload) if keys else payload
        reason = undecryptable_reason(shown)
        if reason is not None:
            raise CodecKeyMissingError(
                f"cannot replay: {reason}; set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) "
                "to a list holding that key"
            )


def _workflow_id_of(history: Any) -> str | None:
    """The exported history does not carry the workflow id, but a TeamRun names
    its children after it (``<id>/<task id>``, ``<id>/coordinator/<step>``);
    read it back from the first one."""
    from oma.core.workflow_ids import team_run_id_of

    for event in history.get("events", []):
        attrs = event.get("startChildWorkflowExecutionInitiatedEventAttributes")
        if attrs:
            wid = team_run_id_of(str(attrs.get("workflowId", "")))
            if wid:
                return wid
    return None


@app.command()
def worker() -> None:
    """Run a worker (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE or a TEMPORAL_PROFILE; OMA_TASK_QUEUE)."""
    from oma.worker import main as worker_main

    _run_async(worker_main(_connection()))


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="gRPC port of the dev server.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Port of the Temporal Web UI.")] = 8233,
    db: Annotated[Path, typer.Option(help="SQLite file for histories.")] = DEV_DB,
) -> None:
    """Start the embedded Temporal dev server (SQLite under .oma/) and a worker."""
    from oma.worker import main as worker_main

    connection = _connection()
    server = DevServer(
        port=port,
        ui_port=ui_port,
        db_file=db,
        log_file=STATE_DIR / "dev-server.log",
        namespaces=[connection.namespace],
    )
    try:
        server.start()
    except OMAError as e:
        raise _fail(str(e)) from None
    connection = connection.at(server.address)
    console.print(
        f"Temporal dev server at {server.address} (namespace {connection.namespace!r}); "
        f"Web UI at {server.ui_url}"
    )
    console.print(f"Worker running on task queue {connection.task_queue!r}. Ctrl-C stops both.")
    try:
        _run_async(worker_main(connection))
    except typer.Exit:
        pass
    finally:
        server.stop()


@app.command("codec-key")
def codec_key(
    key_id: Annotated[
        str | None, typer.Option(help="The key's id (default: k and 8 random hex digits).")
    ] = None,
) -> None:
    """Print a new AES-256 key entry, key_id:base64_key, for OMA_CODEC_KEYS.

    To rotate, put the new entry first and keep the old ones after it:
    OMA_CODEC_KEYS="<new>,<old>" (docs/security.md)."""
    print(new_key(key_id))


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    ui_origin: Annotated[
        str | None,
        typer.Option(help="The Web UI's origin allowed by CORS, e.g. http://localhost:8233."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require Authorization: Bearer TOKEN (default: OMA_CODEC_SERVER_TOKEN, if set).",
        ),
    ] = None,
) -> None:
    """Serve Temporal's codec endpoints (/encode, /decode) with OMA_CODEC_KEYS,
    for the Web UI's Codec Server setting and `temporal ... --codec-endpoint`."""
    from oma.codec import AesGcmCodec
    from oma.codec_server import codec_app, serve

    try:
        keys = keys_from_env()
    except OMAError as e:
        raise _fail(str(e)) from None
    if keys is None:
        raise _fail("oma codec-server needs OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE)", 2)
    token = token or os.environ.get("OMA_CODEC_SERVER_TOKEN") or None
    app = codec_app(AesGcmCodec(keys), ui_origin=ui_origin, token=token)

    async def go() -> None:
        runner = await serve(app, host, port)
        try:
            ids = ", ".join(k.key_id for k in keys)
            console.print(
                f"OMA codec server at http://{host}:{port} (keys {ids}"
                f"{'; bearer token required' if token else ''}"
                f"{f'; CORS for {ui_origin}' if ui_origin else ''})"
            )
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    _run_async(go())


def _core_logs_to_stderr() -> None:
    """Send the Temporal SDK core's own log lines (e.g. its warning about a
    payload over 512 KB) through Python logging to stderr. By default the
    core writes them to stdout, where they would corrupt ``oma run --json``
    and ``oma plan > plan.json``."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
        )
    )
    Runtime.set_default(Runtime(telemetry=telemetry), error_if_already_set=False)


def main() -> None:
    """Console-script entry point.

    Leaves with ``os._exit`` once the command has finished and its output is
    flushed: with a client connected, the SDK's Rust core can crash while the
    interpreter tears down (temporalio/sdk-python#300), which would turn a
    command that succeeded into exit status 134.
    """
    _core_logs_to_stderr()
    try:
        app()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
