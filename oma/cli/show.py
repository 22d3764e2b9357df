"""``oma show``: a run's task DAG, statuses, timings and errors, read from its
Temporal histories (``oma.viewer.model``), on the terminal (rich) or as one
self-contained HTML page (``oma.viewer.html``).

From a server (``oma.runtime.connection``; where nothing listens, the embedded
server over ``.oma/temporal.db`` that ``oma run`` left, started for the reading
and stopped: ``oma.cli.common.runs_server``) or from exported histories (``--history``, files or
directories of ``temporal workflow show --output json`` output). A sharded run
shows its shards (as ``oma run`` prints them), each shard's run its tasks.
Imported by ``oma.cli.app`` only when ``oma show`` runs.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

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
from oma.cli.summary import recorded_note, reused_note, shards_table
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.workflow_ids import task_workflow_id, team_run_id_of
from oma.core.schema.errors import HistoryReadError
from oma.core.schema.usage import usd
from oma.records.histories import ChildHistory, fetch_histories, server_histories
from oma.records.history_files import read_history_files
from oma.records.outputs import kept_output
from oma.runtime.codec import keys_from_env
from oma.runtime.converter import data_converter
from oma.viewer.model import RunView, TaskView, add_activities, build_run_view, seconds_text
from oma.viewer.paging import page_of

OUTPUT_LINES = 4
"""How many lines of each task's output the terminal view shows."""

OUTPUT_LINE_CHARS = 160
"""How much of each of those lines it shows."""

MAX_INDENT = 8
"""The deepest a task's id is indented by its layer (a chain of 1,000 tasks
would push the table off the screen)."""

STATUS_STYLES = {
    "completed": "green",
    "failed": "bold red",
    "skipped": "yellow",
    "in_progress": "cyan",
    "running": "cyan",
    "pending": "dim",
    "blocked": "dim",
    "awaiting_approval": "magenta",
    "cancelled": "yellow",
    "rejected": "red",
    "planned": "blue",
    "reused": "green dim",
}


def show_command(
    workflow_id: str | None,
    histories: list[Path],
    html: Path | None,
    as_json: bool,
    task_id: str | None = None,
) -> None:
    """``oma show``: build the run's view and print it, write it as HTML
    (``html``), print it as JSON (``as_json``), or print one task whole
    (``task_id``). Exits 1 with one line when the run or the histories cannot
    be read, 2 when neither a workflow id nor a history is given or
    ``task_id`` comes with ``html`` or ``as_json``."""
    if workflow_id is None and not histories:
        raise fail("give a TeamRun's workflow id, or --history FILE (or a directory)", 2)
    if task_id is not None and (html is not None or as_json):
        raise fail("--task prints one task on the terminal: leave out --html and --json", 2)
    converter = data_converter(keys_from_env(), connection().store)

    async def go() -> RunView:
        if histories:
            return await build_run_view(read_history_files(histories), converter, workflow_id)
        async with runs_server("oma show", ", or give exported histories with --history") as client:
            found = await _from_server(client, workflow_id or "")
            try:
                # the client's converter: the same, with the store of the server it found
                fetch = server_histories(client)
                view = await _read_view(
                    found, client.data_converter, workflow_id or "", fetch, as_json, html
                )
            except RPCError as e:
                raise fail(f"cannot read the histories of {workflow_id!r}: {e}") from None
            await _read_reused(client, view)
        return view

    try:
        view = run_async(go())
    except HistoryReadError as e:
        raise fail(str(e)) from None
    for note in view.notes:
        err_console.print(Text.assemble(("note:", "yellow"), " ", run_text(note)))
    if task_id is not None:
        print_task(view, task_id)
    elif html is not None:
        _write_html(view, html)
    elif as_json:
        print(view.model_dump_json(indent=2))
    else:
        source = " ".join(f"--history {shlex.quote(str(h))}" for h in histories)
        run = shlex.quote(workflow_id) if workflow_id else ""
        print_view(view, " ".join(p for p in ("oma show", run, source, "--task ID") if p))


async def _read_view(
    found: list[WorkflowHistory],
    converter: DataConverter,
    workflow_id: str,
    fetch: ChildHistory,
    as_json: bool,
    html: Path | None,
) -> RunView:
    """The view of the run whose own histories are ``found``. Its tasks are
    there; a task's activities are in its child's history, read for the tasks
    shown whole only (``oma.viewer.paging``): the terminal view of a
    many-task run reads none, its page those it draws; ``--json`` has all.
    A sharded run's view lists its shards: no other history is read."""
    view = await build_run_view(found, converter, workflow_id, fetch, activities=False)
    if view.shards:
        return view
    page = page_of(view)
    if page.whole or as_json:
        return await build_run_view(found, converter, workflow_id, fetch)
    if html is not None:
        runs = [*(r for t in page.tasks for r in t.runs), *view.coordinator]
        await add_activities(view, runs, converter, fetch)
    return view


async def _read_reused(client: Client, view: RunView) -> None:
    """The outputs of a fork's kept tasks, from the children of the runs that
    ran them (``reused_from``), where the histories read do not hold them."""
    for t in view.tasks:
        if t.reused_from is None or t.output is not None:
            continue
        ref = task_workflow_id(t.reused_from.run_id, t.reused_from.task_id)
        try:
            t.output = await kept_output(client, ref, t.output_run_id)
        except (RPCError, WorkflowFailureError) as err:
            view.notes.append(
                f"the output of task {t.id}, reused from {ref}, cannot be read: {err}"
            )


async def _from_server(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    try:
        found = await fetch_histories(client, workflow_id, children=False)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            namespace = client.namespace
            raise fail(f"no workflow {workflow_id!r} in namespace {namespace!r}") from None
        raise fail(f"cannot read the history of {workflow_id!r}: {e}") from None
    kind = found[0].events[0].workflow_execution_started_event_attributes.workflow_type.name
    if kind != WorkflowName.TEAM_RUN:
        parent = team_run_id_of(workflow_id)
        hint = f": show its team run, `oma show {parent}`" if parent else ""
        raise fail(f"workflow {workflow_id!r} is not a TeamRun (its type is {kind}){hint}")
    return found


def _write_html(view: RunView, path: Path) -> None:
    from oma.viewer.html import render_html

    try:
        path.write_text(render_html(view), encoding="utf-8")
    except OSError as e:
        raise fail(f"cannot write {path}: {e.strerror}") from None
    if view.shards:
        console.print(
            run_text(
                f"wrote {path}: TeamRun {view.workflow_id} ({view.status}), "
                f"{_shard_tasks(view)} tasks in {len(view.shards)} shards"
            )
        )
        return
    bars = sum(len(r.activities) + 1 for t in view.tasks for r in t.runs)
    console.print(
        run_text(
            f"wrote {path}: TeamRun {view.workflow_id} ({view.status}), {len(view.tasks)} tasks, "
            f"{bars + len(view.coordinator)} runs and activities"
        )
    )


def _styled(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _offset(view: RunView, at: datetime | None) -> str:
    return "" if at is None else f"+{seconds_text((at - view.started_at).total_seconds())}"


def print_view(view: RunView, whole_with: str = "oma show RUN --task ID") -> None:
    """The run on the terminal: a header, the tasks in dependency layers, the
    coordinator's steps, each task's output (collapsed; ``whole_with``: the
    command that shows one whole), and each failed task's full error (stderr
    tail included); a sharded run's, under its header, its shards' table."""
    if view.duration_s is not None:
        took = f"took {seconds_text(view.duration_s)}"
    else:
        took = f"running for {seconds_text((datetime.now(UTC) - view.started_at).total_seconds())}"
    header = Text.assemble(
        ("TeamRun ", "bold"),
        run_text(view.workflow_id, "bold"),
        run_text(f"  team {view.team or '?'}  "),
        _styled(view.status),
        f"  (Temporal: {view.execution_status})",
    )
    console.print(header)
    console.print(
        run_text(f"started {view.started_at:%Y-%m-%d %H:%M:%S} UTC, {took}, {totals(view)}")
    )
    if view.goal:
        console.print(run_text(f"goal: {view.goal}"))
    if (note := reused_note(view.forked_from, [t.reused_from for t in view.tasks])) is not None:
        console.print(run_text(note))
    if view.recorded_turns:
        console.print(run_text(recorded_note(view.recorded_turns)))
    if view.error:
        code = f"{view.error_code}: " if view.error_code else ""
        console.print(run_text(f"stopped: {code}{view.error}", "red"))
    elif view.aborting is not None:
        console.print(run_text(view.aborting, "red"))
    if view.shards:
        _print_shards(view)
        return
    page = page_of(view)
    print_table(_task_table(view, page.tasks))
    if not page.whole:
        console.print(
            run_text(f"… {page.left_text()}: one whole with {whole_with}, all with --json", "dim")
        )
    if view.coordinator:
        print_table(_coordinator_table(view))
    _print_outputs(page.tasks, whole_with)
    _print_failures(view, page.tasks)
    _print_skipped(page.tasks)


def _print_shards(view: RunView) -> None:
    """A sharded run's shards, as ``oma run`` prints them (``shards_table``),
    and how to see a shard's tasks."""
    title = f"shards: {_shard_tasks(view)} tasks in {len(view.shards)} shards"
    shard = shlex.quote(f"{view.workflow_id}/shard/") + "<n>"
    said = f"each shard's tasks: oma show {shard} (one task whole: add --task ID)"
    print_table(shards_table(view.shards, title, said))


def _shard_tasks(view: RunView) -> str:
    """How many tasks a sharded run's shards hold (``?`` while not known of each)."""
    return "?" if view.shard_tasks is None else f"{view.shard_tasks:,}"


def totals(view: RunView) -> str:
    """``14 tokens, $0.00`` (``+ unknown (...)`` what the cost leaves out); when
    the run's totals cannot be known (no result read), that they are unknown,
    and why: never zero."""
    if view.total_token_usage is None or view.total_cost_usd is None:
        return f"tokens and cost unknown ({view.totals_unknown or 'no result read'})"
    cost = usd(view.total_cost_usd)
    if view.cost_unknown:
        cost += f" + unknown ({', '.join(view.cost_unknown)})"
    return f"{view.total_token_usage.total_tokens} tokens, {cost}"


def _print_outputs(tasks: list[TaskView], whole_with: str) -> None:
    """Each task's output, collapsed to its first ``OUTPUT_LINES`` lines (each
    cut to ``OUTPUT_LINE_CHARS``); ``whole_with`` says how to see one whole."""
    done = [t for t in tasks if t.output is not None]
    if not done:
        return
    console.print(Text.assemble(("Outputs", "bold"), run_text(f" (whole: {whole_with})", "dim")))
    for t in done:
        assert t.output is not None
        console.print(run_text(f"{t.id} ({t.title}), {len(t.output)} characters:", "bold"))
        lines = t.output.splitlines() or [""]
        for line in lines[:OUTPUT_LINES]:
            cut = "…" if len(line) > OUTPUT_LINE_CHARS else ""
            console.print(run_text(f"  {line[:OUTPUT_LINE_CHARS]}{cut}"))
        if (more := len(lines) - OUTPUT_LINES) > 0:
            console.print(run_text(f"  … {more} more line{'' if more == 1 else 's'}", "dim"))


def print_task(view: RunView, task_id: str) -> None:
    """``oma show RUN --task ID``: one task's facts, its whole output and its
    whole error. Exits 1 naming the run's tasks (``no_task_message``: 20 at
    most) when it has no task ``task_id``,
    or its shards' runs when it is sharded (a shard's run holds the task)."""
    if view.shards:
        first = view.shards[0].run_id
        raise fail(
            f"TeamRun {view.workflow_id} ran its tasks in {len(view.shards)} shards, each a "
            f"TeamRun of its own ({first}, ...): show the task with oma show "
            f"{shlex.quote(view.workflow_id + '/shard/')}<n> --task {shlex.quote(task_id)}"
        )
    t = next((t for t in view.tasks if t.id == task_id), None)
    if t is None:  # a shard's 5,000 ids are not all named
        from oma.core.rules.fork import no_task_message

        raise fail(no_task_message(view.workflow_id, task_id, [t.id for t in view.tasks]))
    console.print(Text.assemble(("task ", "bold"), run_text(t.id, "bold"), "  ", _with_mark(t)))
    facts = [
        f"title: {t.title}",
        f"assignee: {t.assignee or '-'}",
        f"depends on: {', '.join(t.depends_on) or '-'}",
        f"tries: {t.tries}",
        f"took: {seconds_text(t.duration_s) or '-'}",
        f"tokens: {'unknown' if t.token_usage is None else t.token_usage.total_tokens}",
        f"cost: {'?' if t.cost_usd is None else usd(t.cost_usd)}",
    ]
    if t.reused_from is not None:
        facts.append(f"reused from: {t.reused_from.run_id} (task {t.reused_from.task_id})")
    if t.recorded_mark:
        facts.append(f"recorded: {t.recorded_turns} model turn(s), no provider called")
    for fact in facts:
        console.print(run_text(fact))
    if t.output is not None:
        console.print(Text(f"output ({len(t.output)} characters):", style="bold"))
        for line in t.output.splitlines():
            console.print(run_text(line), soft_wrap=True)
    if t.error:
        code = f" [{t.error_code}]" if t.error_code else ""
        console.print(run_text(f"error{code}:", "bold red"))
        for line in t.error.splitlines():
            console.print(run_text(line), soft_wrap=True)


def _task_table(view: RunView, tasks: list[TaskView]) -> Table:
    table = Table(title="tasks, in dependency order", box=box.SIMPLE_HEAD, title_justify="left")
    columns = ("task", "title", "assignee", "status", "after", "start", "took", "tries", "cost")
    for name in columns:
        # on a narrow terminal the free text wraps; ids, statuses and figures stay whole
        free = name in ("title", "after")
        table.add_column(name, overflow="fold", no_wrap=not free, min_width=8 if free else None)
    for t in tasks:
        table.add_row(
            run_text(f"{'  ' * min(t.layer, MAX_INDENT)}{t.id}"),
            run_text(t.title),
            run_text(t.assignee or ""),
            _with_mark(t),
            run_text(", ".join(t.depends_on)),
            _offset(view, t.started_at),
            seconds_text(t.duration_s),
            t.tries,
            "?" if t.cost_usd is None else usd(t.cost_usd, view.total_cost_usd),
        )
    return table


def _with_mark(t: TaskView) -> Text:
    """The task's status, and ``, recorded`` when a recording answered its turns."""
    status = _styled(t.shown_status)
    if t.recorded_mark:
        status.append(f", {t.recorded_mark}", style="dim")
    return status


def _coordinator_table(view: RunView) -> Table:
    table = Table(title="coordinator", box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("step", "agent", "status", "start", "took", "tokens"):
        table.add_column(name, overflow="fold", no_wrap=name != "step")
    for child in view.coordinator:
        s = child.span
        table.add_row(
            run_text(s.label),
            run_text(s.agent or ""),
            _styled(s.status),
            _offset(view, s.started_at),
            seconds_text(s.duration_s),
            str(s.token_usage.total_tokens) if s.token_usage else "",
        )
    return table


def _print_failures(view: RunView, tasks: list[TaskView]) -> None:
    failed: list[TaskView] = [t for t in tasks if t.status == "failed"]
    steps = [c for c in view.coordinator if c.span.status == "failed"]
    if not failed and not steps:
        return
    console.print(Text("Failures", style="bold red"))
    for t in failed:
        code = f" [{t.error_code}]" if t.error_code else ""
        console.print(run_text(f"{t.id} ({t.title}){code}:", "bold"))
        # unwrapped: the whole error, the stderr tail's lines as they are (made visible)
        for line in (t.error or "(no error recorded)").splitlines():
            console.print(run_text(f"  {line}"), soft_wrap=True)
    for c in steps:
        console.print(run_text(f"{c.span.label}:", "bold"))
        for line in (c.span.error or "(no error recorded)").splitlines():
            console.print(run_text(f"  {line}"), soft_wrap=True)


def _print_skipped(tasks: list[TaskView]) -> None:
    skipped = [t for t in tasks if t.status == "skipped"]
    if skipped:
        console.print(Text("Skipped", style="bold yellow"))
    for t in skipped:
        console.print(run_text(f"  {t.id} ({t.title}): {t.error or 'skipped'}"), soft_wrap=True)
