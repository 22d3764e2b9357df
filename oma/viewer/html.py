"""``oma show --html``: a ``RunView`` as one self-contained HTML page.

Everything is inline (CSS, a little JavaScript, SVG): the page loads nothing
from the network, so it can be mailed, attached to an issue or opened
offline. It shows:

- a header: the run, its team, status, start, duration, tokens and cost;
- the task DAG: an SVG drawn by a small layered layout (a task's column is its
  ``layer``; within a column, tasks are ordered by the mean row of their
  dependencies, to keep edges short), dependencies as edges, nodes colored by
  status;
- a waterfall: every task, child run (one per attempt, coordinator steps
  too) and activity (``llm_turn``, ``tool_call``, ``process_run``,
  ``acp_prompt``, MCP calls) as a bar on one time axis, each with its
  duration and a tooltip (agent, tokens, cost, error);
- the tasks as a table, each task's output (collapsed, a ``<details>`` to
  open: its first line shown, the whole output inside), and the full error
  of every failed task.

Clicking a node or a bar shows its details in the side panel; on load the
panel shows the first failed task (or the first task).

A sharded run's page (``RunView.shards``) has the header and its shards as
a table, one row a shard (its run, first task, tasks, status, how many
completed, failed and were skipped, its start, duration and error): each
shard's own page (``oma show <run id>/shard/<n> --html FILE``) has its tasks.

A run of more tasks than ``oma.viewer.paging.WHOLE_TASKS`` gets a page
of a bounded size: a status map draws every task (up to ``MAP_MOST``) as a
square of its status's color, and the DAG is left out; the waterfall, the
table, the outputs and the failures hold the tasks the page shows whole
(``paging.page_of``), the others counted (a 5,000-task run's page was 13 MB).
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime
from typing import Any

from oma.core.contracts.names import ActivityName
from oma.core.schema.usage import usd
from oma.viewer.model import ChildRunView, RunView, Span, TaskView, seconds_text
from oma.viewer.paging import Page, page_of
from oma.viewer.scrubber import scrubber_html

STATUS_COLORS = {
    "completed": "#2e9d5b",
    "failed": "#d64545",
    "skipped": "#b8b8b8",
    "in_progress": "#2f7fd6",
    "running": "#2f7fd6",
    "pending": "#e3e3e3",
    "blocked": "#e3e3e3",
    "awaiting_approval": "#b36ad6",
    "cancelled": "#e0a030",
    "timed_out": "#d64545",
    "terminated": "#d64545",
    "continued_as_new": "#8aa0b8",
    "reused": "#7fb98a",
}
"""Fill of a DAG node (a task's status) and of a child run's bar."""

KIND_COLORS = {
    "task": "#5b6b7f",
    "coordinator": "#7a5b9c",
    ActivityName.LLM_TURN: "#3b82c4",
    ActivityName.TOOL_CALL: "#1f9e89",
    "mcp_call": "#9c6b3a",
    ActivityName.MCP_LIST_TOOLS: "#c49a6c",
    ActivityName.PROCESS_RUN: "#e07b28",
    ActivityName.ACP_PROMPT: "#8e5bd6",
}
"""Fill of an activity's bar, by activity type (others: grey)."""

DETAIL_OUTPUT_CHARS = 500
"""How much of a task's output the side panel shows (the Outputs section has it whole)."""

OUTPUT_SUMMARY_CHARS = 120
"""How much of an output's first line its collapsed ``<details>`` shows."""


MAP_CELL, MAP_COLUMNS = 10, 64
"""The status map: each task a square of ``MAP_CELL`` pixels, ``MAP_COLUMNS`` a line."""

MAP_MOST = 20_000
"""The most tasks the status map draws (the others are counted)."""

NODE_W, NODE_H, COL_GAP, ROW_GAP = 210, 60, 70, 22
LABEL_W, BARS_W, ROW_H = 270, 480, 22


def render_html(view: RunView) -> str:
    """The page for ``view``, as one string of HTML."""
    if view.shards:
        return _page(view, [_header(view), '<main><div class="left">', _shards(view), _END])
    details: list[dict[str, Any]] = []
    page = page_of(view)
    drawn = (
        _section("Task DAG", _dag_svg(view, details))
        if page.whole
        else _section("Tasks by status", _status_map(view, page))
    )
    parts = [
        _header(view),
        '<main><div class="left">',
        drawn,
        _section("Time", _scrubber(view, page)),
        _section("Waterfall", _waterfall_svg(view, page.tasks, details)),
        _section("Tasks", _task_table(view, page)),
        _section("Outputs", _outputs(page.tasks)),
        _section("Failures", _failures(view, page.tasks)),
        '</div><aside id="details"><h2>Details</h2>'
        '<p class="hint">Click a task or a bar.</p><pre id="detail-text"></pre></aside>',
        "</main>",
    ]
    return _page(view, parts, details)


_END = "</div></main>"
"""The end of a page without the details panel (a sharded run's: nothing to click)."""


def _page(view: RunView, parts: list[str], details: list[dict[str, Any]] | None = None) -> str:
    """The page of ``parts`` (its body, in order), with the data its script
    reads: ``details``, what the panel shows of each thing clicked."""
    details = details or []
    body = "\n".join(parts)
    first = next((i for i, d in enumerate(details) if d.get("status") == "failed"), 0)
    data = json.dumps({"details": details, "initial": first}, ensure_ascii=False)
    title = f"TeamRun {view.workflow_id}: {view.status}"
    return _PAGE.format(
        title=_e(title),
        css=_CSS,
        body=body,
        data=data.replace("<", "\\u003c"),
        js=_JS,
    )


def _shards(view: RunView) -> str:
    """A sharded run's shards as a table, one row a shard (``?``: not known
    while the run runs), and where each shard's tasks are shown."""
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "shard run",
            "first task",
            "tasks",
            "status",
            "completed",
            "failed",
            "skipped",
            "start",
            "duration",
            "error",
        )
    )
    rows = []
    for shard in view.shards:
        status = shard.status or "not started"
        took = seconds_text(shard.duration_s) if shard.duration_s is not None else ""
        cells = [
            f"<code>{_e(shard.run_id)}</code>",
            f"<code>{_e(shard.first_task or '?')}</code>",
            _e("?" if shard.tasks is None else shard.tasks),
            f'<span class="badge" style="background:{_color(status)}">{_e(status)}</span>',
            *(_e("?" if n is None else n) for n in (shard.completed, shard.failed, shard.skipped)),
            _e(_offset(view, shard.started_at)),
            _e(took),
            _e(": ".join(p for p in (shard.error_code, shard.error) if p)),
        ]
        rows.append(
            f'<tr data-shard="{_e(shard.run_id)}">'
            + "".join(f"<td>{c}</td>" for c in cells)
            + "</tr>"
        )
    total = "?" if view.shard_tasks is None else f"{view.shard_tasks:,}"
    hint = (
        f"{total} tasks in {len(view.shards)} shards, each a TeamRun of its own: its tasks "
        f"are shown by oma show {view.workflow_id}/shard/<n> (--html FILE for its page)."
    )
    table = f'<table class="tasks shards"><tr>{head}</tr>{"".join(rows)}</table>'
    return _section("Shards", f'<p class="hint">{_e(hint)}</p>{table}')


def _scrubber(view: RunView, page: Page) -> str:
    if page.whole:
        return scrubber_html(view, STATUS_COLORS)
    whole = {t.id for t in page.tasks}
    drawn = {t.id for t in view.tasks[:MAP_MOST]}
    return scrubber_html(view, STATUS_COLORS, whole, drawn)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _section(title: str, content: str) -> str:
    return f"<section><h2>{_e(title)}</h2>{content}</section>"


def _offset(view: RunView, at: datetime | None) -> str:
    if at is None:
        return ""
    return f"+{seconds_text((at - view.started_at).total_seconds())}"


def _header(view: RunView) -> str:
    usage = view.total_token_usage
    cost = "unknown" if view.total_cost_usd is None else usd(view.total_cost_usd)
    if view.cost_unknown:
        cost += f" (not counted: {', '.join(view.cost_unknown)})"
    facts = [
        ("team", view.team or "?"),
        ("Temporal status", view.execution_status),
        ("started", view.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("duration", seconds_text(view.duration_s) if view.duration_s is not None else "running"),
        ("tasks", _task_count(view)),
        *([("forked from", view.forked_from)] if view.forked_from else []),
        ("tokens", "unknown" if usage is None else f"{usage.total_tokens}"),
        ("cost", cost),
        *([("recorded model turns", str(view.recorded_turns))] if view.recorded_turns else []),
    ]
    dl = "".join(f"<span><b>{_e(k)}</b> {_e(v)}</span>" for k, v in facts)
    parts = [
        f"<header><h1>TeamRun <code>{_e(view.workflow_id)}</code> "
        f'<span class="badge" style="background:{_color(view.status)}">{_e(view.status)}</span>'
        f'</h1><div class="facts">{dl}</div>'
    ]
    if view.goal:
        parts.append(f'<p class="goal"><b>goal</b> {_e(view.goal)}</p>')
    if view.error:
        code = f"{view.error_code}: " if view.error_code else ""
        parts.append(f'<p class="error">{_e(code + view.error)}</p>')
    elif view.aborting is not None:
        parts.append(f'<p class="error">{_e(view.aborting)}</p>')
    for note in view.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    parts.append("</header>")
    return "".join(parts)


def _task_count(view: RunView) -> str:
    """``3``; a sharded run's ``7 in 3 shards`` (``?`` while not known of every shard)."""
    if not view.shards:
        return str(len(view.tasks))
    total = "?" if view.shard_tasks is None else f"{view.shard_tasks:,}"
    return f"{total} in {len(view.shards)} shards"


def _color(status: str) -> str:
    return STATUS_COLORS.get(status, "#999999")


def _detail_of_task(view: RunView, t: TaskView) -> dict[str, Any]:
    lines = [
        f"task {t.id}: {t.title}",
        f"status: {t.shown_status}",
        *(
            [f"recorded: {t.recorded_turns} model turn(s), no provider called"]
            if t.recorded_mark
            else []
        ),
        f"assignee: {t.assignee or '-'}",
        f"depends on: {', '.join(t.depends_on) or '-'}",
        f"tries: {t.tries}",
        f"start: {_offset(view, t.started_at) or '-'}",
        f"duration: {seconds_text(t.duration_s) if t.duration_s is not None else '-'}",
        f"tokens: {'unknown' if t.token_usage is None else t.token_usage.total_tokens}",
        f"cost: {'unknown' if t.cost_usd is None else usd(t.cost_usd)}",
    ]
    if t.reused_from is not None:
        lines.append(f"reused from: {t.reused_from.run_id} (task {t.reused_from.task_id})")
    if t.output is not None:
        more = len(t.output) - DETAIL_OUTPUT_CHARS
        cut = f"\n… {more} more characters (Outputs)" if more > 0 else ""
        lines += ["", f"output ({len(t.output)} characters):", t.output[:DETAIL_OUTPUT_CHARS] + cut]
    if t.error:
        lines += ["", f"error{f' ({t.error_code})' if t.error_code else ''}:", t.error]
    return {"status": t.shown_status, "text": "\n".join(lines)}


def _detail_of_span(view: RunView, s: Span) -> dict[str, Any]:
    lines = [
        f"{s.kind}: {s.label}",
        f"workflow: {s.workflow_id}",
        f"agent: {s.agent or '-'}",
        f"status: {s.status}",
        f"start: {_offset(view, s.started_at)}",
        f"duration: {seconds_text(s.duration_s) if s.duration_s is not None else 'running'}",
    ]
    if s.scheduled_at is not None:
        waited = (s.started_at - s.scheduled_at).total_seconds()
        lines.append(f"waited to start: {seconds_text(waited)}")
    if s.attempt > 1:
        lines.append(f"attempt: {s.attempt}")
    if s.token_usage is not None:
        u = s.token_usage
        lines.append(
            f"tokens: {u.input_tokens} in, {u.output_tokens} out"
            + (f", {u.cache_read_input_tokens} cache read" if u.cache_read_input_tokens else "")
        )
        lines.append(f"cost: {'unknown' if s.cost_usd is None else usd(s.cost_usd)}")
    if s.detail:
        lines += ["", s.detail]
    if s.error:
        lines += ["", f"error{f' ({s.error_code})' if s.error_code else ''}:", s.error]
    return {"status": s.status, "text": "\n".join(lines)}


# -- the DAG --------------------------------------------------------------------


def dag_layout(tasks: list[TaskView]) -> dict[str, tuple[int, int]]:
    """Each task's (column, row): the column is its layer; within one, tasks
    are sorted by the mean row of their dependencies (ties: run order)."""
    rows: dict[str, int] = {}
    layers: dict[int, list[TaskView]] = {}
    for t in tasks:
        layers.setdefault(t.layer, []).append(t)
    for layer in sorted(layers):
        members = layers[layer]

        def weight(t: TaskView, index: int) -> tuple[float, int]:
            parents = [rows[d] for d in t.depends_on if d in rows]
            return (sum(parents) / len(parents) if parents else float(index), index)

        ordered = sorted(enumerate(members), key=lambda p: weight(p[1], p[0]))
        for row, (_, t) in enumerate(ordered):
            rows[t.id] = row
    return {t.id: (t.layer, rows[t.id]) for t in tasks}


def _dag_svg(view: RunView, details: list[dict[str, Any]]) -> str:
    if not view.tasks:
        return '<p class="hint">No tasks (yet).</p>'
    place = dag_layout(view.tasks)
    cols = 1 + max(c for c, _ in place.values())
    rows = 1 + max(r for _, r in place.values())
    width, height = cols * (NODE_W + COL_GAP) - COL_GAP + 20, rows * (NODE_H + ROW_GAP) + 20

    def origin(task_id: str) -> tuple[int, int]:
        col, row = place[task_id]
        return 10 + col * (NODE_W + COL_GAP), 10 + row * (NODE_H + ROW_GAP)

    edges, nodes = [], []
    for t in view.tasks:
        x, y = origin(t.id)
        for dep in t.depends_on:
            if dep not in place:
                continue
            dx, dy = origin(dep)
            x1, y1, x2, y2 = dx + NODE_W, dy + NODE_H // 2, x, y + NODE_H // 2
            mid = (x1 + x2) / 2
            edges.append(
                f'<path class="edge" data-from="{_e(dep)}" data-to="{_e(t.id)}" '
                f'd="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 6},{y2}" marker-end="url(#arrow)"/>'
            )
        index = len(details)
        details.append(_detail_of_task(view, t))
        took = seconds_text(t.duration_s) if t.duration_s is not None else ""
        parts = (t.assignee or "", t.shown_status, t.recorded_mark, took)
        sub = " · ".join(p for p in parts if p)
        text_fill = "#222" if t.status in ("skipped", "pending", "blocked") else "#fff"
        nodes.append(
            f'<g class="node pick" data-task="{_e(t.id)}" data-detail="{index}" '
            f'transform="translate({x},{y})"><title>{_e(details[index]["text"])}</title>'
            f'<rect width="{NODE_W}" height="{NODE_H}" rx="7" fill="{_color(t.shown_status)}"/>'
            f'<text x="10" y="19" fill="{text_fill}" class="nid">{_e(_cut(t.id, 26))}</text>'
            f'<text x="10" y="36" fill="{text_fill}">{_e(_cut(t.title, 30))}</text>'
            f'<text x="10" y="52" fill="{text_fill}" class="sub">{_e(_cut(sub, 34))}</text></g>'
        )
    return (
        f'<svg id="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><defs><marker id="arrow" viewBox="0 0 10 10" '
        'refX="4" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#778"/></marker></defs>'
        + "".join(edges)
        + "".join(nodes)
        + "</svg>"
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the waterfall --------------------------------------------------------------


def _waterfall_rows(view: RunView, tasks: list[TaskView]) -> list[tuple[int, str, Any]]:
    """(depth, kind, item): ``tasks``, their child runs and activities, and the
    coordinator's steps, in order of start (tasks that never ran last)."""
    groups: list[tuple[datetime | None, int, list[tuple[int, str, Any]]]] = []
    for order, t in enumerate(tasks):
        rows: list[tuple[int, str, Any]] = [(0, "task", t)]
        for child in t.runs:
            if len(t.runs) > 1:
                rows.append((1, "run", child))
            rows.extend((2 if len(t.runs) > 1 else 1, "span", a) for a in child.activities)
        groups.append((t.started_at, order, rows))
    for order, child in enumerate(view.coordinator, start=len(tasks)):
        rows = [(0, "run", child), *((1, "span", a) for a in child.activities)]
        groups.append((child.span.started_at, order, rows))
    never = [g for g in groups if g[0] is None]
    ran = sorted((g for g in groups if g[0] is not None), key=lambda g: (g[0], g[1]))
    return [row for g in [*ran, *never] for row in g[2]]


def _ticks(span_s: float) -> list[float]:
    if span_s <= 0:
        return [0.0]
    raw = span_s / 6
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(span_s / step) + 1)]


def _waterfall_svg(view: RunView, tasks: list[TaskView], details: list[dict[str, Any]]) -> str:
    rows = _waterfall_rows(view, tasks)
    ends = [view.closed_at] if view.closed_at else []
    for _, kind, item in rows:
        span = _span_of(kind, item)
        if span is not None:
            ends.append(span.closed_at or span.started_at)
    end = max([e for e in ends if e is not None], default=view.started_at)
    total = max((end - view.started_at).total_seconds(), 0.001)
    scale = BARS_W / total
    height = (len(rows) + 1) * ROW_H + 24
    width = LABEL_W + BARS_W + 90
    out = [
        f'<svg id="waterfall" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for tick in _ticks(total):
        x = LABEL_W + tick * scale
        out.append(
            f'<line class="tick" x1="{x:.1f}" y1="16" x2="{x:.1f}" y2="{height}"/>'
            f'<text class="axis" x="{x + 2:.1f}" y="12">{_e(seconds_text(tick))}</text>'
        )
    for i, (depth, kind, item) in enumerate(rows):
        y = 24 + i * ROW_H
        span = _span_of(kind, item)
        index = len(details)
        if kind == "task":
            details.append(_detail_of_task(view, item))
            label = f"{item.id} · {item.title}"
            status = item.shown_status
        else:
            assert span is not None
            details.append(_detail_of_span(view, span))
            label, status = span.label, span.status
        cls = "row task" if kind == "task" else "row"
        shown_kind = kind if span is None else span.kind
        out.append(
            f'<g class="{cls} pick" data-detail="{index}" data-kind="{_e(shown_kind)}">'
            f"<title>{_e(details[index]['text'])}</title>"
            f'<text class="label d{depth}" x="{6 + depth * 14}" y="{y + 15}">'
            f"{_e(_cut(label, 36 - depth * 2))}</text>"
        )
        start, finish = _bounds(kind, item)
        if start is None:
            out.append(f'<text class="never" x="{LABEL_W + 4}" y="{y + 15}">{_e(status)}</text>')
        else:
            x = LABEL_W + (start - view.started_at).total_seconds() * scale
            stop = finish or end
            w = max((stop - start).total_seconds() * scale, 2.0)
            fill = (
                _color(status)
                if kind in ("task", "run")
                else KIND_COLORS.get(span.kind if span else "", "#8a8a8a")
            )
            stroke = ' stroke="#a00" stroke-width="2"' if status in ("failed", "timed_out") else ""
            took = seconds_text((stop - start).total_seconds()) if finish else "running"
            out.append(
                f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{ROW_H - 6}" rx="3" '
                f'fill="{fill}"{stroke}/>'
                f'<text class="dur" x="{x + w + 4:.1f}" y="{y + 15}">{_e(took)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    legend = "".join(
        f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in KIND_COLORS.items()
    )
    return f'<div class="legend">{legend}</div>' + "".join(out)


def _span_of(kind: str, item: Any) -> Span | None:
    if kind == "span":
        return item  # type: ignore[no-any-return]
    if kind == "run":
        return item.span  # type: ignore[no-any-return]
    return None


def _bounds(kind: str, item: Any) -> tuple[datetime | None, datetime | None]:
    if kind == "task":
        return item.started_at, item.closed_at
    span = _span_of(kind, item)
    assert span is not None
    return span.started_at, span.closed_at


# -- tables ---------------------------------------------------------------------


def _task_table(view: RunView, page: Page) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "task",
            "title",
            "assignee",
            "status",
            "depends on",
            "start",
            "duration",
            "tries",
            "cost",
        )
    )
    rows = []
    for t in page.tasks:
        cost = "unknown" if t.cost_usd is None else usd(t.cost_usd, view.total_cost_usd)
        took = seconds_text(t.duration_s) if t.duration_s is not None else ""
        cells = [
            f"<code>{_e(t.id)}</code>",
            _e(t.title),
            _e(t.assignee or ""),
            f'<span class="badge" style="background:{_color(t.shown_status)}">'
            f"{_e(t.shown_status)}</span>"
            + (f' <span class="mark">{_e(t.recorded_mark)}</span>' if t.recorded_mark else ""),
            _e(", ".join(t.depends_on)),
            _e(_offset(view, t.started_at)),
            _e(took),
            _e(t.tries),
            _e(cost),
        ]
        rows.append(
            f'<tr data-task="{_e(t.id)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
        )
    more = "" if page.whole else f'<p class="hint">{_e(page.left_text())}: {_MORE}</p>'
    return f'<table class="tasks"><tr>{head}</tr>{"".join(rows)}</table>{more}'


_MORE = "oma show RUN --task ID shows one whole, oma show RUN --json has them all."


def _status_map(view: RunView, page: Page) -> str:
    """Every task (the first ``MAP_MOST``) as a square of its status's color,
    in the view's order (dependency layers), with its id and status as a
    tooltip; a count of each status above it."""
    counts: dict[str, int] = {}
    for t in view.tasks:
        counts[t.shown_status] = counts.get(t.shown_status, 0) + 1
    legend = "".join(
        f'<span><i style="background:{_color(k)}"></i>{_e(k)} {n:,}</span>'
        for k, n in counts.items()
    )
    drawn = view.tasks[:MAP_MOST]
    lines = math.ceil(len(drawn) / MAP_COLUMNS)
    width, height = MAP_COLUMNS * MAP_CELL, lines * MAP_CELL
    cells = "".join(
        f'<rect data-task="{_e(t.id)}" x="{i % MAP_COLUMNS * MAP_CELL}" '
        f'y="{i // MAP_COLUMNS * MAP_CELL}" width="{MAP_CELL - 1}" height="{MAP_CELL - 1}" '
        f'fill="{_color(t.shown_status)}">'
        f"<title>{_e(t.id)}: {_e(t.shown_status)}</title></rect>"
        for i, t in enumerate(drawn)
    )
    cut = len(view.tasks) - len(drawn)
    notes = [
        f"{len(view.tasks):,} tasks, in dependency order, each a square (its id and status "
        f"on hover); this page shows {len(page.tasks):,} of them whole: those that failed or "
        "have not ended, then the first."
    ]
    if cut:
        notes.append(f"The map stops at {MAP_MOST:,} tasks: {cut:,} more are not drawn.")
    return (
        f'<div class="legend">{legend}</div>'
        + "".join(f'<p class="hint">{_e(n)}</p>' for n in notes)
        + f'<svg id="status-map" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{cells}</svg>'
    )


def _outputs(tasks: list[TaskView]) -> str:
    """Each task's output as a ``<details>``: closed, its summary the task and
    the output's first line; opened, the whole output."""
    parts = []
    for t in tasks:
        if t.output is None:
            continue
        first = next((line.strip() for line in t.output.splitlines() if line.strip()), "")
        if len(first) > OUTPUT_SUMMARY_CHARS:
            first = first[: OUTPUT_SUMMARY_CHARS - 1] + "…"
        parts.append(
            f'<details class="output" data-task="{_e(t.id)}"><summary><code>{_e(t.id)}</code> · '
            f"{_e(t.title)} · {len(t.output)} characters"
            f' <span class="first">{_e(first)}</span></summary><pre>{_e(t.output)}</pre></details>'
        )
    return "".join(parts) or '<p class="hint">None.</p>'


def _failures(view: RunView, tasks: list[TaskView]) -> str:
    failed = [t for t in tasks if t.status == "failed"]
    failed_steps = [c for c in view.coordinator if c.span.status == "failed"]
    if not failed and not failed_steps:
        return '<p class="hint">None.</p>'
    parts = []
    for t in failed:
        code = f" · {t.error_code}" if t.error_code else ""
        parts.append(
            f'<div class="failure" data-task="{_e(t.id)}"><h3>{_e(t.id)} · {_e(t.title)}'
            f"{_e(code)}</h3><pre>{_e(t.error or '(no error recorded)')}</pre></div>"
        )
    for c in failed_steps:
        parts.append(_step_failure(c))
    return "".join(parts)


def _step_failure(child: ChildRunView) -> str:
    s = child.span
    code = f" · {s.error_code}" if s.error_code else ""
    return (
        f'<div class="failure"><h3>{_e(s.label)}{_e(code)}</h3>'
        f"<pre>{_e(s.error or '(no error recorded)')}</pre></div>"
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body>
{body}
<script type="application/json" id="run-data">{data}</script>
<script>{js}</script>
</body></html>
"""

_CSS = """
body{
  font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;
  margin:0;
  color:#222;
  background:#f6f7f9;
}
header{background:#fff;border-bottom:1px solid #ddd;padding:12px 20px}
h1{font-size:20px;margin:0 0 6px}
h2{font-size:16px;margin:0 0 8px}
h3{font-size:14px;margin:0 0 4px}
.facts span{margin-right:18px;color:#444} .facts b{color:#777;font-weight:600}
.badge{color:#fff;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600}
.mark{color:#555;font-size:90%}
.error{color:#a00;white-space:pre-wrap} .note{color:#8a6d00} .goal{margin:6px 0}
main{display:flex;gap:16px;padding:16px 20px;align-items:flex-start}
.left{flex:1;min-width:0}
section{
  background:#fff;
  border:1px solid #ddd;
  border-radius:6px;
  padding:12px;
  margin-bottom:16px;
  overflow-x:auto;
}
aside{
  width:380px;
  position:sticky;
  top:16px;
  background:#fff;
  border:1px solid #ddd;
  border-radius:6px;
  padding:12px;
}
aside pre{
  white-space:pre-wrap;
  word-break:break-word;
  font-size:12px;
  max-height:80vh;
  overflow:auto;
}
.hint{color:#888}
svg text{font-size:12px;font-family:system-ui,sans-serif}
.nid{font-weight:700} .sub{font-size:11px}
.edge{fill:none;stroke:#778;stroke-width:1.5}
.pick{cursor:pointer} .pick.selected rect{stroke:#111;stroke-width:3}
.node:hover rect{filter:brightness(1.1)}
.row:hover{fill-opacity:.8} .row.task .label{font-weight:700}
.label{fill:#333} .dur,.axis,.never{fill:#666;font-size:11px}
.tick{stroke:#eee}
.legend span{margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
table.tasks{border-collapse:collapse;width:100%}
.tasks td,.tasks th{
  border-bottom:1px solid #eee;
  padding:4px 8px;
  text-align:left;
  vertical-align:top;
}
.output summary{cursor:pointer;padding:3px 0}
.output .first{color:#777;margin-left:8px}
.output pre{
  background:#f7f9fb;
  border:1px solid #dde3ea;
  padding:8px;
  white-space:pre-wrap;
  word-break:break-word;
  font-size:12px;
  max-height:60vh;
  overflow:auto;
}
.failure pre{
  background:#fff4f4;
  border:1px solid #f0caca;
  padding:8px;
  white-space:pre-wrap;
  word-break:break-word;
  font-size:12px;
}
"""

_JS = """
(function(){
  var data = JSON.parse(document.getElementById('run-data').textContent);
  var text = document.getElementById('detail-text');
  function select(el){
    document.querySelectorAll('.pick.selected').forEach(function(s){s.classList.remove('selected');});
    var i = Number(el.getAttribute('data-detail'));
    el.classList.add('selected');
    text.textContent = data.details[i] ? data.details[i].text : '';
    document.body.setAttribute('data-selected', String(i));
  }
  document.querySelectorAll('.pick').forEach(function(el){
    el.addEventListener('click', function(){ select(el); });
  });
  var first = document.querySelector('.pick[data-detail="' + data.initial + '"]');
  if (first) select(first);
})();
"""
