"""The summary ``oma run`` (and ``oma approve --wait``) prints once a run has
ended: the task table, usage and cost, the final output, and the failures.

On stdout: it is the command's result (progress went to stderr).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich import box
from rich.table import Table
from rich.text import Text

from oma.cli.common import WIDE, console, print_table, run_text, table_width
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import ReusedFrom, TaskState, TaskStatus
from oma.core.schema.usage import usd

TABLE_ROWS_UP_TO = 20
"""A run of more tasks lists only those that did not complete in its table
(and counts the others): all of them are in ``--json``."""


def print_result(result: TeamRunResult, goal_run: bool | None = None) -> None:
    """The task table (one line a task: id, title, assignee, status (and
    attempts when more than one; ``reused`` for a task a fork kept,
    ``recorded`` for one whose model turns came from a recording), tokens
    in/out, cost, the last non-empty line of its output or the first of its
    error; borderless on a narrow terminal, ``_layout``; a sharded run's
    lists its shards, ``_print_shards``), for a fork the run it was forked
    from, the tokens and the cost, the run's error code, the final output (a
    goal run's synthesized answer, else the outputs of the completed tasks
    nothing depends on), then **Failures**: each failed task's whole error (a
    process's redacted stderr tail included) and the tasks skipped because
    of it."""
    if result.shards:
        _print_shards(result)
    else:
        _print_table(result)
    if (note := reused_note(result.forked_from, [t.reused_from for t in result.tasks])) is not None:
        console.print(run_text(note))
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
        f"total cost: {usd(result.total_cost_usd)}{unknown}", highlight=False, markup=False
    )
    if result.recorded_turns:
        console.print(recorded_note(result.recorded_turns), highlight=False, markup=False)
    print_error_code(result)
    if goal_run is None:
        goal_run = result.goal is not None
    if goal_run:
        if result.final_output is not None:
            console.rule("final output")
            console.print(run_text(result.final_output))
    else:
        for t in _final_tasks(result):
            if t.status == TaskStatus.COMPLETED and t.output is not None:
                console.rule(run_text(f"output of {t.id} ({t.title})"))
                console.print(run_text(t.output))
    print_failures(result)


def recorded_note(turns: int) -> str:
    """What a run's views say under its totals when model turns were answered
    from a recording (``options.models`` ``recorded``): how many, and that
    no provider was called for them."""
    return (
        f"recorded: {turns} model turn{'' if turns == 1 else 's'} answered from the recording, "
        "no provider called (the tokens are the recording's, the cost zero)"
    )


def reused_note(forked_from: str | None, origins: Sequence[ReusedFrom | None]) -> str | None:
    """What a run's views say under its totals when it kept tasks of other
    runs (a fork, ``options.reuse``): how many, from where, and that their
    rows' tokens and cost are those runs', not in this run's totals."""
    runs = sorted({o.run_id for o in origins if o is not None})
    fork = f"fork of {forked_from}: " if forked_from else ""
    if not runs:
        return f"{fork}every task ran here" if fork else None
    kept = sum(o is not None for o in origins)
    return (
        f"{fork}{kept} task(s) reused from {', '.join(runs)}, not run here: their tokens and "
        "cost are not in this run's totals"
    )


def _print_table(result: TeamRunResult) -> None:
    listed = result.tasks
    if len(listed) > TABLE_ROWS_UP_TO:
        listed = [t for t in result.tasks if t.status != TaskStatus.COMPLETED]
    rows = []
    for t in listed:
        usage = f"{t.token_usage.input_tokens}/{t.token_usage.output_tokens}"
        cost = "?" if t.cost_usd is None else usd(t.cost_usd, result.total_cost_usd)
        status = t.status.value if t.attempts <= 1 else f"{t.status.value} ({t.attempts}x)"
        if t.reused_from is not None:  # a fork's kept task: it did not run in this run
            status = "reused"
        elif t.recorded_turns:  # its model turns came from a recording, not a provider
            status = f"{status}, recorded"
        cells = [t.id, t.title, t.assignee or "-", status, usage, cost, _detail(t)]
        rows.append([run_text(cell) for cell in cells])
    layout = _layout(rows)
    table = Table(title=f"TeamRun: {result.status}", **layout.table_options)
    widths = _widths([[r[i] for i in layout.shown] for r in rows], layout)
    for i, width in zip(layout.shown, widths, strict=True):
        name = _COLUMNS[i][0]
        table.add_column(name, no_wrap=True, overflow="ellipsis", min_width=width, max_width=width)
    rest = max(table_width() - sum(widths) - layout.frame, OUTPUT_MIN_WIDTH)
    table.add_column("output or error", no_wrap=True, overflow="ellipsis", max_width=rest)
    for row in rows:
        table.add_row(*[row[i] for i in layout.shown], row[-1])
    if len(listed) < len(result.tasks):
        table.caption = (
            f"and {len(result.tasks) - len(listed)} completed task(s) not listed (--json has all)"
        )
    print_table(table)


def _print_shards(result: TeamRunResult) -> None:
    """A sharded run's table (``shards_table``); each shard's run holds its
    tasks (``oma show <shard run>``)."""
    title = f"TeamRun: {result.status}, in {len(result.shards)} shards"
    print_table(shards_table(result.shards, title, "each shard's tasks: oma show <shard run>"))


class ShardRow(Protocol):
    """A shard as its table reads it: a ``ShardResult`` (``oma run``), or
    ``oma show``'s ``ShardView`` (``None``: not known while the run runs)."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> str | None: ...
    @property
    def tasks(self) -> int | None: ...
    @property
    def first_task(self) -> str | None: ...
    @property
    def completed(self) -> int | None: ...
    @property
    def failed(self) -> int | None: ...
    @property
    def skipped(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...


def shards_table(shards: Sequence[ShardRow], title: str, caption: str) -> Table:
    """A sharded run's table: one line a shard (its run, first task, how many
    tasks, status (``not started``), how many completed, failed and were
    skipped, its error; ``?`` what is not known)."""
    table = Table(title=title)
    for name in ("shard run", "first task", "tasks", "status", "completed", "failed", "skipped"):
        table.add_column(name, no_wrap=True)
    table.add_column("error", no_wrap=True, overflow="ellipsis")
    for shard in shards:
        counts = (shard.tasks, shard.completed, shard.failed, shard.skipped)
        table.add_row(
            run_text(shard.run_id),
            run_text(shard.first_task or "?"),
            _known(counts[0]),
            shard.status or "not started",
            *(_known(c) for c in counts[1:]),
            run_text(shard.error or ""),
        )
    table.caption = caption
    return table


def _known(count: int | None) -> str:
    return "?" if count is None else str(count)


def _detail(task: TaskState) -> str:
    """One line for a task's row: the last non-empty line of its output (where
    a process or an agent usually ends with its result; its first often echoes
    the prompt), else the first line of its error (what went wrong; a stderr
    tail follows it)."""
    if task.output is None and task.output_ref is not None and task.status == TaskStatus.COMPLETED:
        return f"(not read: the result of {task.output_ref})"  # e.g. past its retention
    if task.output is not None:
        lines = [line for line in task.output.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""
    error = (task.error or "").strip()
    return error.splitlines()[0] if error else ""


_COLUMNS = [
    ("task", 16),
    ("title", 24),
    ("assignee", 16),
    ("status", 20),
    ("tokens", 16),
    ("cost", 10),
]
"""The table's columns before the output, and the most characters each shows."""

OUTPUT_MIN_WIDTH = 28
"""On a terminal, the least the output column shows: the table gives up its
borders, then its tokens column (the totals and ``--json`` have them), then
narrows ids, titles and assignees to keep it."""


@dataclass(frozen=True)
class _Layout:
    """Which of ``_COLUMNS`` a table shows, the characters of a row that are
    borders and padding, and rich's options for it."""

    shown: tuple[int, ...]
    frame: int
    table_options: dict[str, Any]


_BOXED = _Layout(tuple(range(len(_COLUMNS))), 3 * len(_COLUMNS) + 4, {})
"""Every column, boxed: a pipe, a file, a wide terminal."""


def _borderless(shown: tuple[int, ...]) -> _Layout:
    """``shown`` and the output column two spaces apart, a rule under the heading."""
    options = {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False}
    return _Layout(shown, 2 * len(shown), {**options, "collapse_padding": True})


def _layout(rows: list[list[Text]]) -> _Layout:
    """The boxed table, unless on a terminal too narrow for it to show
    ``OUTPUT_MIN_WIDTH`` of the output: then borderless, and without the
    tokens column if that is not enough either."""
    if not console.is_terminal:
        return _BOXED
    tokens = next(i for i, (name, _) in enumerate(_COLUMNS) if name == "tokens")
    for layout in (
        _BOXED,
        _borderless(_BOXED.shown),
        _borderless(tuple(i for i in _BOXED.shown if i != tokens)),
    ):
        natural = sum(_natural([[r[i] for i in layout.shown] for r in rows], layout))
        if table_width() - natural - layout.frame >= OUTPUT_MIN_WIDTH:
            return layout
    return layout


def _natural(rows: list[list[Text]], layout: _Layout) -> list[int]:
    """The shown columns' widths: their content's, up to their caps on a
    terminal; elsewhere (a pipe, a file) every cell stays whole."""
    fitted = console.is_terminal
    widths = []
    for i, column in enumerate(layout.shown):
        name, cap = _COLUMNS[column]
        widths.append(
            min(max([len(name), *(r[i].cell_len for r in rows)]), cap if fitted else WIDE)
        )
    return widths


def _widths(rows: list[list[Text]], layout: _Layout) -> list[int]:
    """The shown columns' widths (``_natural``), then the widest of task,
    title and assignee narrowed until the output column has at least
    ``OUTPUT_MIN_WIDTH`` characters of the terminal's width."""
    widths = _natural(rows, layout)
    narrowed = [i for i, column in enumerate(layout.shown) if column < 3]  # id, title, assignee
    room = table_width() - layout.frame - OUTPUT_MIN_WIDTH
    while sum(widths) > room:
        i = max(narrowed, key=lambda i: widths[i])
        if widths[i] <= 6:
            break
        widths[i] -= 1
    return widths


def print_failures(result: TeamRunResult) -> None:
    """The **Failures** section: for each failed task, its id, title,
    assignee, error code and attempts, its whole error as the run recorded it
    (``TaskState.error``: for ``PROCESS_FAILED`` the exit status and the
    redacted end of stderr), and the tasks skipped because it failed. Nothing
    when no task failed."""
    failed = [t for t in result.tasks if t.status == TaskStatus.FAILED]
    if not failed:
        return
    console.rule("Failures", style="red")
    for t in failed:
        head = run_text(t.id, "bold red")
        head.append(run_text(f" ({t.title})" if t.title else ""))
        head.append(run_text(f" · {t.assignee or '-'}"))
        if t.error_code:
            head.append(f" · {t.error_code}", style="red")
        if t.attempts > 1:
            head.append(f" · {t.attempts} attempts")
        console.print(head)
        console.print(run_text((t.error or "(no error recorded)").rstrip()))
        skipped = _skipped_because_of(result, t)
        if skipped:
            names = ", ".join(f"{s.id} ({s.title})" if s.title else s.id for s in skipped)
            console.print(run_text(f"skipped because it failed: {names}", "yellow"))
        console.print()


def _skipped_because_of(result: TeamRunResult, failed: TaskState) -> list[TaskState]:
    """The skipped tasks that depend on ``failed``, directly or not."""
    dependents: dict[str, list[TaskState]] = {}
    for t in result.tasks:
        for d in t.depends_on:
            dependents.setdefault(d, []).append(t)
    seen: dict[str, TaskState] = {}
    todo = [failed.id]
    while todo:
        for t in dependents.get(todo.pop(), []):
            if t.id not in seen and t.status == TaskStatus.SKIPPED:
                seen[t.id] = t
                todo.append(t.id)
    return [t for t in result.tasks if t.id in seen]


def print_error_code(result: TeamRunResult) -> None:
    """The run's own error (``error_code: error``), when it has one."""
    if result.error_code is not None:
        text = f"{result.error_code}: {result.error}" if result.error else result.error_code
        console.print(run_text(text, "bold red"))


def _final_tasks(result: TeamRunResult) -> list[TaskState]:
    """The tasks nothing depends on: their outputs are the run's final output."""
    depended_on = {d for t in result.tasks for d in t.depends_on}
    return [t for t in result.tasks if t.id not in depended_on]
