"""``oma run`` and ``oma plan``: validate a run input, start a ``TeamRun``
(with the embedded dev server and a worker when nothing listens on
``TEMPORAL_ADDRESS``), print its events as they happen, then its tasks and
its output.

Imported by ``oma.cli.app`` only when one of those commands runs: it brings the
Temporal client, the run input's models and rich's tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from oma.cli.common import (
    Settings,
    connection,
    console,
    err_console,
    fail,
    print_table,
    run_async,
    run_text,
)
from oma.cli.live import PlainView, RunView, run_view
from oma.cli.server_watch import WATCH_INTERVAL_S, ServerWatch, server_gone
from oma.cli.summary import print_error_code, print_result
from oma.cli.upstream import live_lines
from oma.client.run_file import run_input_json
from oma.client.runs import cause
from oma.core.contracts.fork import ForkedRun
from oma.core.contracts.names import QueryName
from oma.core.schema.errors import InvalidRunInputError, OMAError
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.run_input import ReuseOptions, TeamRunInput, checked_team_run_input
from oma.core.schema.usage import usd
from oma.records.executions import workflow_task_failure
from oma.runtime.dev_server import is_listening, split_address

EVENT_POLL_S = 0.5
"""How often ``oma run`` and ``oma plan`` ask the run for new events."""

LAST_EVENTS_WAIT = timedelta(seconds=30)
"""How long ``oma run`` and ``oma plan``, once the run has ended, keep asking
it for the events not printed yet (its last steps, ``run_end`` among them)
before they print the result without them."""


# -- connecting ------------------------------------------------------------

QUERY_TIMEOUT = timedelta(seconds=10)
"""How long a query or signal waits for the server and a worker."""


def run_command(
    file: Path,
    as_json: bool,
    workflow_id: str | None,
    worker: bool | None,
    reuse: str | None = None,
    dry_run: bool = False,
    items: Path | None = None,
) -> None:
    """``oma run``: exits 0 when the run succeeded, 1 when it did not, 2 when
    FILE is invalid, 130 when interrupted (the run is cancelled). ``reuse``:
    ``options.reuse.from``; ``dry_run``: print what the run would reuse and
    run again (``print_dry_run``) and start nothing; ``items``: a JSONL file
    of the items FILE's ``task_template`` makes tasks of."""
    inp = read_run_input(file, items)
    if reuse is not None:
        given = ReuseOptions.model_validate({"from": reuse})
        inp = inp.model_copy(update={"options": inp.options.model_copy(update={"reuse": given})})
    if dry_run:
        run_async(dry_run_reuse(inp, workflow_id, worker))
        raise typer.Exit(0)

    def show(result: TeamRunResult) -> None:
        if as_json:
            print(result.model_dump_json(indent=2))
        else:
            print_result(result, goal_run=inp.goal is not None)

    # interrupted, the run's tasks as it left them are shown all the same
    result = run_async(start_and_follow(inp, workflow_id, worker, on_interrupt=show))
    show(result)
    if not as_json and result.plan is not None and result.status == "planned":  # plan_only
        console.rule("plan")
        print(result.plan.model_dump_json(indent=2))
    raise typer.Exit(0 if result.success else 1)


def plan_command(file: Path, workflow_id: str | None, worker: bool | None) -> None:
    """``oma plan``: the plan artifact on stdout, progress on stderr; exits 2
    when FILE has no goal."""
    inp = read_run_input(file)
    if inp.goal is None:
        raise fail(f"{file}: `oma plan` plans a 'goal'; this input has none", 2)
    options = inp.options.model_copy(update={"plan_only": True})
    result = run_async(
        start_and_follow(inp.model_copy(update={"options": options}), workflow_id, worker)
    )
    if result.plan is None:
        print_error_code(result)
        raise fail(f"the run ended {result.status} without a plan")
    print(result.plan.model_dump_json(indent=2))
    raise typer.Exit(0 if result.success else 1)


@asynccontextmanager
async def temporal(
    with_worker: bool | None, started_by: str = "oma run"
) -> AsyncIterator[tuple[Any, str]]:
    """A connected client and task queue. Starts the embedded dev server (and a
    worker in this process) when nothing listens on ``TEMPORAL_ADDRESS``
    (``started_by`` names the command to a second one); everything started
    here is stopped on exit."""
    from oma.client import serving

    conn = connection()
    if not is_listening(conn.address):
        if with_worker is False:
            raise fail(
                f"nothing listens on {conn.address} and --no-worker leaves no worker to "
                "run the workflow: start `oma dev`, or drop --no-worker"
            )
        _, port = split_address(conn.address)
        err_console.print(f"[dim]starting the embedded Temporal dev server on port {port}[/]")
    elif with_worker is not True and Settings.user_paths:
        _path_does_not_apply(conn.address, Settings.user_paths)
    async with serving(conn, worker=with_worker, started_by=started_by) as (client, served):
        yield client, served.task_queue


def _path_does_not_apply(address: str, paths: tuple[Path, ...]) -> None:
    """Warn that ``--path`` reaches no worker: a server listens at ``address``,
    so this command runs none, and the worker already up imports the run's
    tools, hooks and evaluators from its own path."""
    given = " ".join(f"--path {shlex.quote(str(p))}" for p in paths)
    err_console.print(
        run_text(
            f"warning: {given} does not apply: a server listens on {address}, so this command "
            "runs no worker, and the worker that serves the run (`oma dev`, `oma worker`) "
            "imports its custom tools, hooks and evaluators from its own directory, --path and "
            f"OMA_PATH: start that worker with {given} (or in that directory)",
            "bold yellow",
        )
    )


def read_run_input(file: Path, items: Path | None = None) -> TeamRunInput:
    """FILE as a ``TeamRunInput``, checked as the workflow will check it
    (``checked_team_run_input``), its ``items`` read from the JSONL file
    ``items`` when given (``items_json``); exits 2 when it is not one."""
    try:
        raw = run_input_json(file)
        if items is not None:
            if not isinstance(raw, dict) or "task_template" not in raw:
                raise InvalidRunInputError(
                    f"--items fills the task_template of {file}, which has none"
                )
            if "items" in raw:
                raise InvalidRunInputError(
                    f"{file} has 'items' already: give them in the file or with --items"
                )
            raw["items"] = items_json(items)
    except InvalidRunInputError as e:
        raise fail(e.message, 2) from None
    stored = connection().store is not None
    try:
        return checked_team_run_input(raw, stored=stored)
    except OMAError as e:
        # the message names the file: not the plain line an OMAError ends a command with
        raise fail(f"{file}: {e}", 2) from None


def items_json(file: Path) -> list[Any]:
    """The items in the JSONL file FILE: one JSON object per line (blank
    lines skipped). Raises ``InvalidRunInputError`` naming the line that is
    not one, or saying the file has none."""
    items: list[Any] = []
    try:
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InvalidRunInputError(
                        f"{file} line {number} is not valid JSON: {e.msg} (column {e.colno})"
                    ) from None
                if not isinstance(item, dict):
                    raise InvalidRunInputError(
                        f"{file} line {number} is not a JSON object: an item is one object a "
                        "line, its fields filling the task_template's {field}s"
                    )
                items.append(item)
    except OSError as e:
        raise InvalidRunInputError(f"cannot read {file}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidRunInputError(f"{file} is not UTF-8 text") from None
    except RecursionError:
        raise InvalidRunInputError(f"{file} nests its JSON too deep to read") from None
    if not items:
        raise InvalidRunInputError(f"{file} holds no item (one JSON object a line)")
    return items


async def start_and_follow(
    inp: TeamRunInput,
    workflow_id: str | None,
    with_worker: bool | None,
    on_interrupt: Callable[[TeamRunResult], None] | None = None,
) -> TeamRunResult:
    """Start a ``TeamRun`` of ``inp``, print its events to stderr as they
    happen, and return its result. Cancelled (Ctrl-C, SIGTERM), it cancels the
    run (``_cancel_run``), hands the result it ended with to ``on_interrupt``
    and is cancelled still."""
    from oma.client import start_team_run  # (what only a run needs)

    async with temporal(with_worker) as (client, task_queue):
        wid = workflow_id or f"team-{inp.team.name}-{uuid.uuid4().hex[:8]}"
        starting = start_team_run(client, inp, id=wid, task_queue=task_queue)
        return await follow_start(client, task_queue, inp, wid, starting, on_interrupt)


async def dry_run_reuse(inp: TeamRunInput, workflow_id: str | None, worker: bool | None) -> None:
    """``oma run --dry-run``: what a run with ``options.reuse`` would keep of
    its reference run and run again, and why (exit 2 without ``reuse``)."""
    from oma.client.fork import reuse_preview

    if inp.options.reuse is None:
        raise fail("--dry-run shows what a run reuses: give --reuse RUN_ID (or options.reuse)", 2)
    async with temporal(worker) as (client, _):
        wid = workflow_id or f"team-{inp.team.name}-dry-run"
        try:
            forked = await reuse_preview(client, inp.payload(), wid)
        except OMAError as e:
            # exit 2 whatever the class: a run too large to carry
            # (RUN_STATE_TOO_LARGE), a key or a store missing as the run is read
            raise fail(str(e), 2) from None
    print_dry_run(forked, inp.options.reuse.from_)


def print_dry_run(forked: ForkedRun, source: str, *, fork: bool = False) -> None:
    """What a fork or a run with ``options.reuse`` would do, on stdout: a line
    a task (``reused`` and the run and task it comes from, or ``runs again``
    and why), the estimated cost of the tasks to run again (what they cost
    in ``source``), the warnings."""
    if forked.resume is None:
        console.print(run_text(forked.note or "nothing is reused"))
        return
    table = Table(title=f"fork of {source}" if fork else f"reusing run {source}")
    kept = "kept from" if fork else "same content as in"
    for column in ("task", "decision", "why"):
        table.add_column(column)
    states = {t.id: t for t in forked.resume.result.tasks}
    for task_id in [t.id for t in forked.resume.result.tasks]:
        state = states[task_id]
        if state.reused_from is not None:
            origin = f"{state.reused_from.run_id} (task {state.reused_from.task_id})"
            table.add_row(run_text(task_id), "reused", run_text(f"{kept} {origin}"))
        else:
            why = forked.reasons.get(task_id, "")
            table.add_row(run_text(task_id), "runs again", run_text(why))
    print_table(table)
    unknown = forked.cost_unknown
    more = f" + unknown for {', '.join(unknown)}" if unknown else ""
    console.print(
        run_text(
            f"{len(forked.reused)} reused, {len(forked.rerun)} to run again; estimated cost of "
            f"those: {usd(forked.estimated_cost_usd)}{more} (what they cost in run {source})"
        )
    )
    for warning in forked.warnings:
        console.print(run_text(f"warning: {warning}", "bold yellow"))


async def follow_start(
    client: Client,
    task_queue: str,
    inp: TeamRunInput,
    wid: str,
    starting: Awaitable[WorkflowHandle[Any, TeamRunResult]],
    on_interrupt: Callable[[TeamRunResult], None] | None = None,
) -> TeamRunResult:
    """Start the ``TeamRun`` ``wid`` (``starting``: its start call), then follow
    it as ``start_and_follow`` says; ``inp`` is the input it runs (for the live
    view: its tasks)."""
    start = asyncio.ensure_future(starting)
    try:
        handle = await asyncio.shield(start)
    except WorkflowAlreadyStartedError:
        raise fail(f"a run with workflow id {wid!r} is already running") from None
    except asyncio.CancelledError:
        # Ctrl-C while the start was on its way: it may land all the same,
        # so wait for it and cancel the run it started
        err_console.print(run_text(f"interrupted: cancelling TeamRun {wid}"))
        with contextlib.suppress(Exception):
            await _cancel_and_wait(await asyncio.wait_for(start, QUERY_TIMEOUT.seconds))
        raise
    err_console.print(run_text(f"started TeamRun {wid} on task queue {task_queue!r}", "dim"))
    server = ServerWatch(client, wid)
    progress = Progress(handle, run_view(client, handle, inp), server)
    follow = asyncio.create_task(progress.follow())
    watch = asyncio.create_task(_say_when_no_worker_polls(client, task_queue))
    stuck = asyncio.create_task(_say_when_stuck(client, handle))
    answers = asyncio.create_task(server.watch())
    try:
        result = await _result_across_outages(handle, client, server)
    except asyncio.CancelledError:
        follow.cancel()
        if server.unreachable or not await server.answers():
            # the cancellation could not reach the run, which goes on
            server.left_running()
            raise
        # Ctrl-C or SIGTERM: the run would otherwise go on (or come back
        # with the next embedded server); cancel it and let it drain
        err_console.print(run_text(f"interrupted: cancelling TeamRun {wid}"))
        ended = await _cancel_run(client, handle, task_queue)
        if ended is not None and on_interrupt is not None:
            on_interrupt(ended)
        raise
    except WorkflowFailureError as err:
        raise fail(f"TeamRun {wid} did not complete: {cause(err)}") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise fail(
                f"TeamRun {wid} is not on the Temporal server at {server.address} any more: "
                f"the server came back without it (one that keeps its histories in memory, "
                f"as `temporal server start-dev` without --db-filename, loses them when it stops)"
            ) from None
        raise fail(f"cannot follow TeamRun {wid}: {err} (`oma show {wid}` shows it)") from None
    finally:
        for task in (follow, watch, stuck, answers):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    await progress.finish()
    return result


async def _result_across_outages(
    handle: WorkflowHandle[Any, TeamRunResult], client: Client, server: ServerWatch
) -> TeamRunResult:
    """``team_run_result`` of ``handle``, waited for across the times its
    server does not answer (a restart, a dropped connection: the run goes on
    on the server, so this waits until the server is back, ``server`` saying
    so, and asks again). Raises as ``team_run_result`` does, and ``RPCError``
    when the server answers but refuses (e.g. ``NOT_FOUND``: a server that
    came back without the run)."""
    from oma.client import team_run_result

    while True:
        try:
            result = await team_run_result(handle, client)
            server.answered()
            return result
        except (RPCError, RPCTimeoutOrCancelledError) as err:
            if not server_gone(err):
                raise
        if await server.probe():  # it answers: the call failed on its way
            await asyncio.sleep(WATCH_INTERVAL_S)
        await server.answering()


async def _worker_polls(client: Client, task_queue: str) -> bool | None:
    """Whether a worker has polled ``task_queue`` for workflow tasks lately
    (the server keeps a queue's pollers of the last minutes:
    ``DescribeTaskQueue``); ``None`` when the server does not say."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    try:
        described = await client.workflow_service.describe_task_queue(
            request, timeout=QUERY_TIMEOUT
        )
    except (RPCError, RPCTimeoutOrCancelledError):
        return None
    return bool(described.pollers)


NO_WORKER_CHECK_S = 2.0
"""How long after the start ``oma run`` looks at the task queue's pollers."""


async def _say_when_no_worker_polls(client: Client, task_queue: str) -> None:
    """Once, ``NO_WORKER_CHECK_S`` after the start: when no worker has polled
    ``task_queue`` for workflow tasks (the server keeps a queue's pollers of
    the last minutes: ``DescribeTaskQueue``), say what to start, as the run
    would otherwise wait without a word. Best effort: an error says nothing."""

    await asyncio.sleep(NO_WORKER_CHECK_S)
    if await _worker_polls(client, task_queue) is False:
        err_console.print(
            f"no worker polls task queue {task_queue!r}: the run waits until one does; "
            f"start one with `oma worker` (same TEMPORAL_ADDRESS and OMA_TASK_QUEUE), or "
            f"use `oma dev`, which runs a server and a worker",
            style="bold yellow",
            highlight=False,
            markup=False,
        )


STUCK_CHECK_S = 2.0
"""How often ``oma run`` looks whether the run's workflow task keeps failing."""


MAX_CHILDREN_CHECKED = 20
"""The most of a run's children in flight ``oma run`` looks at per check."""


async def _say_when_stuck(client: Client, handle: WorkflowHandle[Any, Any]) -> None:
    """Every ``STUCK_CHECK_S``: when the run's workflow task keeps failing
    (its pending workflow task is on attempt 2 or more), or that of a child
    it waits for (a task's ``AgentRun``, up to ``MAX_CHILDREN_CHECKED`` of
    them), say why, once per workflow and reason: the failure its history
    recorded (e.g. a result over Temporal's payload limit, a command the
    server refuses), and that it cannot end by itself (a worker retries it
    without end). Best effort: an error says nothing."""
    said: dict[str, str] = {}
    while True:
        await asyncio.sleep(STUCK_CHECK_S)
        try:
            described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
            attempt = described.raw_description.pending_workflow_task.attempt
            why = (
                await workflow_task_failure(client, handle.id, timeout=QUERY_TIMEOUT)
                if attempt >= 2
                else ""
            )
            if why and why != said.get(handle.id):
                said[handle.id] = why
                _say_stuck(
                    f"TeamRun {handle.id} cannot go on: its workflow task failed {attempt} "
                    f"times ({why}); a worker retries it without end, so the run cannot "
                    f"report. Stop it with `temporal workflow terminate --workflow-id "
                    f"{handle.id}`"
                )
            children = described.raw_description.pending_children[:MAX_CHILDREN_CHECKED]
            for child in children:
                await _say_when_child_stuck(client, handle.id, child.workflow_id, said)
        except (RPCError, RPCTimeoutOrCancelledError):
            continue


async def _say_when_child_stuck(
    client: Client, run_id: str, child_id: str, said: dict[str, str]
) -> None:
    """Say so when the workflow task of ``child_id``, a child the run
    ``run_id`` waits for, keeps failing: the run then waits for it without
    end, in silence, whatever its own workflow task does."""
    child = client.get_workflow_handle(child_id)
    described = await child.describe(rpc_timeout=QUERY_TIMEOUT)
    attempt = described.raw_description.pending_workflow_task.attempt
    why = (
        await workflow_task_failure(client, child_id, timeout=QUERY_TIMEOUT) if attempt >= 2 else ""
    )
    if why and why != said.get(child_id):
        said[child_id] = why
        _say_stuck(
            f"{described.workflow_type} {child_id} of TeamRun {run_id} cannot go on: its "
            f"workflow task failed {attempt} times ({why}); a worker retries it without end, "
            f"and the run waits for it. Terminate it with `temporal workflow terminate "
            f"--workflow-id {child_id}`: its task then fails and the run goes on"
        )


def _say_stuck(message: str) -> None:
    err_console.print(message, style="bold red", highlight=False, markup=False)


class Progress:
    """Shows a run's events on stderr, as the ``events`` query returns them
    (polled with ``after_seq``, so each is shown once), through ``view``: a
    live display or plain lines (``oma.cli.live``; plain lines by default).
    An answer is news for ``server`` (a ``ServerWatch``), if any: after an
    outage, it says the server is back before the events that follow."""

    def __init__(
        self,
        handle: WorkflowHandle[Any, Any],
        view: RunView | None = None,
        server: ServerWatch | None = None,
    ) -> None:
        self.handle = handle
        self.view: RunView = view or PlainView()
        self.server = server
        self.after_seq = -1
        self.hinted: set[str] = set()

    async def follow(self) -> None:
        """Show new events every ``EVENT_POLL_S`` seconds, until cancelled
        (the live view, if any, ends with it)."""
        self.view.start()
        try:
            while True:
                await self.poll()
                await asyncio.sleep(EVENT_POLL_S)
        finally:
            self.view.stop()

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
            run_text(
                f"could not read the last events of TeamRun {self.handle.id} ({why}); see them "
                f"with `temporal workflow query --workflow-id {self.handle.id} --type events`",
                "yellow",
            )
        )

    async def _print_new(self, timeout: timedelta) -> None:
        events: list[RunEvent] = await self.handle.query(
            QueryName.EVENTS, self.after_seq, result_type=list[RunEvent], rpc_timeout=timeout
        )
        if self.server is not None:
            self.server.answered()
        tracker = self.view.tracker
        if any(tracker.names_unknown(e) for e in events if e.seq > self.after_seq):
            # a goal run's plan, a resumed run: the titles come with its state
            with contextlib.suppress(RPCError, RPCTimeoutOrCancelledError):
                tracker.learn(
                    await self.handle.query(
                        QueryName.STATE, result_type=TeamRunResult, rpc_timeout=timeout
                    )
                )
        for event in events:
            if event.seq <= self.after_seq:
                continue
            self.after_seq = event.seq
            self.view.event(event)
            if event.type == "approval_request" and event.detail not in self.hinted:
                self.hinted.add(event.detail or "")
                self.view.note(
                    f"approval needed: oma approve {self.handle.id} {event.detail}",
                    "bold yellow",
                )
                await self._show_upstream(event.detail or "", timeout)

    async def _show_upstream(self, request_id: str, timeout: timedelta) -> None:
        """Under a dispatch's "approval needed": the outputs its task will act
        on, shortened (``oma.cli.upstream.live_lines``). Best effort: a run
        that does not answer shows the hint alone."""
        from oma.client.approvals import pending

        try:
            requests = await pending(self.handle, timeout)
        except (RPCError, RPCTimeoutOrCancelledError):
            return
        request = next((r for r in requests if r.request_id == request_id), None)
        if request is not None and request.upstream:
            for line in live_lines(request.upstream, self.handle.id):
                self.view.note(line, "")


CANCEL_DRAIN = timedelta(seconds=15)
"""How long an interrupted ``oma run`` waits for the cancelled run to end (its
tasks in flight cancelled, their processes killed) before it leaves it."""


async def _cancel_run(
    client: Client, handle: WorkflowHandle[Any, Any], task_queue: str
) -> TeamRunResult | None:
    """Request the cancellation of the run ``handle`` and, when a worker is
    there to carry it out, wait up to ``CANCEL_DRAIN`` for the run to end; the
    result it ended with, or ``None``, having said on stderr why the run may
    still be running and how to end it."""
    from oma.client import read_outputs, team_run_result

    wid = handle.id
    try:
        await asyncio.wait_for(handle.cancel(), QUERY_TIMEOUT.total_seconds())
    except Exception as err:  # an RPC error, a timeout: the run goes on
        err_console.print(
            run_text(
                f"the cancellation did not reach TeamRun {wid} ({err or type(err).__name__}): it "
                f"is still running; cancel it with `temporal workflow cancel --workflow-id {wid}`",
                "bold yellow",
            )
        )
        return None
    if await _worker_polls(client, task_queue) is False:
        err_console.print(
            run_text(
                f"TeamRun {wid} is still running: its cancellation is recorded, but no worker "
                f"polls task queue {task_queue!r} to carry it out; it ends cancelled once one "
                f"does (`oma worker`), or end it now with "
                f"`temporal workflow terminate --workflow-id {wid}`",
                "bold yellow",
            )
        )
        return None
    try:
        return await asyncio.wait_for(team_run_result(handle, client), CANCEL_DRAIN.total_seconds())
    except WorkflowFailureError:
        # ended Canceled in Temporal, with no result: its state is the table
        with contextlib.suppress(Exception):
            state: TeamRunResult = await handle.query(
                QueryName.STATE, result_type=TeamRunResult, rpc_timeout=QUERY_TIMEOUT
            )
            await read_outputs(client, state)  # those its answer kept by reference
            return state
    except TimeoutError:
        err_console.print(
            run_text(
                f"TeamRun {wid} did not end within {CANCEL_DRAIN.total_seconds():g} s of its "
                f"cancellation: it ends cancelled once its tasks in flight stop; see "
                f"`temporal workflow describe --workflow-id {wid}`",
                "bold yellow",
            )
        )
    except Exception:  # e.g. a failure without a result: there is no table to print
        pass
    return None


async def _cancel_and_wait(handle: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(handle.cancel(), 5)
        await asyncio.wait_for(handle.result(), 15)
