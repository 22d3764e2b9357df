"""The run viewer's time scrubber: drag to any moment of a run and the DAG's
statuses and the shared memory are as they were then.

Built from the view alone (no replay): each task's attempts start and close
at their child runs' events (``in_progress``, then the attempt's outcome),
a task the run skipped turns ``skipped`` as the dependency that failed it
closed (else as the run ended), and a completed task's output joins the
shared memory (``<assignee>/task:<id>:result``) as it completes. The page
applies the moments up to the scrubber's position; ``html.render_html``
adds it as a section of its own (its data and script inside it).
"""

from __future__ import annotations

import html
import json
from collections.abc import Collection
from datetime import datetime
from typing import Any

from oma.viewer.model import RunView, TaskView

MEMORY_CHARS = 160
"""How much of a task's output a shared memory entry shows (the Outputs
section has it whole): the page stays small at thousands of tasks."""


def moments(view: RunView) -> list[dict[str, Any]]:
    """The changes of the run over time, oldest first: ``t`` (seconds from
    the run's start), ``task``, ``status``, ``label`` (in words), and, for
    a completion, ``memory`` (the shared memory key and the output's start)."""
    found: list[tuple[datetime, int, dict[str, Any]]] = []
    closed_at = {t.id: t.closed_at for t in view.tasks}
    order = 0

    def add(at: datetime | None, change: dict[str, Any]) -> None:
        nonlocal order
        if at is not None:
            found.append((at, order, change))
            order += 1

    for t in view.tasks:
        for attempt, run in enumerate(t.runs, start=1):
            add(
                run.span.started_at,
                {"task": t.id, "status": "in_progress", "label": f"task {t.id} attempt {attempt}"},
            )
            last = attempt == len(t.runs)
            status = t.status if last else run.span.status
            if run.span.closed_at is not None:
                change: dict[str, Any] = {
                    "task": t.id,
                    "status": status,
                    "label": f"task {t.id} {status}",
                }
                if last and t.status == "completed":
                    change["memory"] = [_key(t), _cut(t.output or "")]
                add(run.span.closed_at, change)
        if t.status == "skipped" and not t.runs:
            at = _skipped_at(t, closed_at) or view.closed_at
            closed_at[t.id] = at  # its own dependents are skipped with it
            add(at, {"task": t.id, "status": "skipped", "label": f"task {t.id} skipped"})
    found.sort(key=lambda f: (f[0], f[1]))
    start = view.started_at
    return [{"t": round((at - start).total_seconds(), 3), **c} for at, _, c in found]


def _key(t: TaskView) -> str:
    return f"{t.assignee or '?'}/task:{t.id}:result"


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MEMORY_CHARS else flat[: MEMORY_CHARS - 1] + "…"


def _skipped_at(t: TaskView, closed_at: dict[str, datetime | None]) -> datetime | None:
    times = [closed_at[d] for d in t.depends_on if closed_at.get(d) is not None]
    return min(times) if times else None  # type: ignore[type-var]


def scrubber_html(
    view: RunView,
    colors: dict[str, str],
    whole: Collection[str] | None = None,
    drawn: Collection[str] | None = None,
) -> str:
    """The scrubber's section content: a range input over ``moments``, the
    moment's words, the shared memory then; ``colors`` fill the DAG's nodes
    by status (``html.STATUS_COLORS``). A many-task run's page
    (``oma.viewer.paging``) gives the tasks it shows whole (``whole``)
    and those its status map draws (``drawn``): the moments are the drawn
    tasks', and only the whole ones' carry words (the page makes them from
    the task and the status) and a shared memory entry, so the page stays
    small (5,000 tasks' moments were 1.2 MB)."""
    changes = moments(view)
    heading = "Shared memory then"
    if whole is not None:
        keep = set(drawn) if drawn is not None else None
        changes = [m for m in changes if keep is None or m["task"] in keep]
        for m in changes:
            if m["task"] not in whole:
                del m["label"]
                m.pop("memory", None)
        heading += f" (of the {len(whole):,} tasks shown whole)"
    if not changes:
        return '<p class="hint">No moment to scrub (no task ran).</p>'
    start = {t.id: ("reused" if t.reused_from is not None else "pending") for t in view.tasks}
    data = json.dumps(
        {"moments": changes, "start": start, "colors": colors}, ensure_ascii=False
    ).replace("<", "\\u003c")
    last = len(changes)
    return (
        f'<input type="range" id="scrub" min="0" max="{last}" value="{last}" '
        'style="width:100%" aria-label="the run at a moment">'
        f'<p id="scrub-at" class="hint"></p><h3>{html.escape(heading)}</h3>'
        '<pre id="scrub-memory"></pre>'
        f'<script type="application/json" id="scrub-data">{data}</script>'
        f"<script>{_JS}</script>"
    )


_JS = """
(function(){
  var data = JSON.parse(document.getElementById('scrub-data').textContent);
  var input = document.getElementById('scrub');
  var at = document.getElementById('scrub-at');
  var memory = document.getElementById('scrub-memory');
  var nodes = {};
  // a DAG's nodes, or the status map's squares (a many-task run's page)
  document.querySelectorAll('#dag .node, #status-map rect[data-task]').forEach(function(n){
    nodes[n.getAttribute('data-task')] = n;
  });
  function show(){
    var upto = Number(input.value), status = {}, mem = [], k;
    for (k in data.start) status[k] = data.start[k];
    for (var i = 0; i < upto; i++) {
      var m = data.moments[i];
      status[m.task] = m.status;
      if (m.memory) mem.push(m.memory[0] + ' = ' + m.memory[1]);
    }
    for (k in status) {
      var n = nodes[k];
      if (!n) continue;
      n.setAttribute('data-status', status[k]);
      var rect = n.tagName.toLowerCase() === 'rect' ? n : n.querySelector('rect');
      if (rect) rect.setAttribute('fill', data.colors[status[k]] || '#999999');
    }
    var shown = upto ? data.moments[upto - 1] : null;
    var label = shown && (shown.label || ('task ' + shown.task + ' ' + shown.status));
    at.textContent = shown ? ('+' + shown.t + ' s: ' + label + ' (' + upto + ' of ' +
      data.moments.length + ')') : 'the run\\'s start';
    memory.textContent = mem.join('\\n') || '(empty)';
  }
  input.addEventListener('input', show);
  show();
})();
"""
