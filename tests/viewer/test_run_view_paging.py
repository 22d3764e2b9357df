"""The views of a many-task run (oma/viewer/paging.py): a terminal table
and an HTML page of a bounded size that still show every task's status, the
tasks that failed or have not ended whole. Pure: views built in memory."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from oma.cli import show
from oma.core.contracts.names import ActivityName
from oma.viewer import paging
from oma.viewer.html import render_html
from oma.viewer.model import ChildRunView, RunView, Span, TaskView

START = datetime(2026, 1, 1, tzinfo=UTC)


def task(chain: int, step: int, status: str) -> TaskView:
    """Step ``step`` of chain ``chain``: one run with one model turn when it ran."""
    task_id = f"c{chain}-t{step}"
    at = START + timedelta(seconds=step)
    runs = []
    if status in ("completed", "failed"):
        span = Span(
            kind="task",
            label=f"task {task_id}",
            workflow_id=f"run/{task_id}",
            task_id=task_id,
            agent=f"agent-{chain}",
            status=status,
            started_at=at,
            closed_at=at + timedelta(seconds=0.5),
        )
        turn = span.model_copy(update={"kind": ActivityName.LLM_TURN, "label": "model turn 1"})
        runs.append(ChildRunView(span=span, activities=[turn]))
    return TaskView(
        id=task_id,
        title=f"Step {step} of chain {chain}",
        assignee=f"agent-{chain}",
        depends_on=[f"c{chain}-t{step - 1}"] if step else [],
        status=status,
        output="ok" if status == "completed" else None,
        error="exited with status 3" if status == "failed" else None,
        attempts=len(runs),
        layer=step,
        runs=runs,
    )


def run_of(chains: int, length: int) -> RunView:
    """``chains`` chains of ``length`` steps; chain 0 failed at step 10 and
    skipped the rest."""
    tasks = [
        task(c, i, "completed" if c or i < 10 else "failed" if i == 10 else "skipped")
        for i in range(length)
        for c in range(chains)
    ]
    return RunView(
        workflow_id="run",
        execution_status="FAILED",
        status="failed",
        team="bench",
        started_at=START,
        closed_at=START + timedelta(seconds=length + 1),
        tasks=tasks,
    )


def test_the_page_of_a_5000_task_run_stays_small_and_shows_every_tasks_status() -> None:
    view = run_of(50, 100)

    page = render_html(view)

    # every task whole, as before: 12.7 MB
    assert len(page.encode()) < 2_000_000, f"{len(page.encode()):,} bytes"
    # every task in the status map, with its status
    drawn = dict(re.findall(r"<title>([\w-]+): (\w+)</title></rect>", page))
    assert drawn == {t.id: t.status for t in view.tasks}
    # the failed task whole: in the table and with its error
    rows = re.findall(r'<tr data-task="([\w-]+)">', page)
    assert len(rows) == paging.MOST_TASKS and "c0-t10" in rows
    assert '<div class="failure" data-task="c0-t10">' in page
    assert "exited with status 3" in page
    assert "4,800 more tasks (4,711 completed, 89 skipped)" in page


def test_the_terminal_view_of_a_5000_task_run_prints_its_notable_tasks_and_counts_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = run_of(50, 100)

    show.print_view(view, "oma show run --task ID")

    out = capsys.readouterr().out
    table = out[: out.index("Outputs")]
    rows = [line.split()[0] for line in table.splitlines() if re.match(r"\s+c\d+-t\d+ ", line)]
    assert len(rows) == paging.MOST_TASKS
    assert rows[:3] == ["c0-t0", "c1-t0", "c2-t0"] and "c0-t10" in rows
    assert (
        "… 4,800 more tasks (4,711 completed, 89 skipped): one whole with "
        "oma show run --task ID, all with --json"
    ) in out
    assert "c0-t10 (Step 10 of chain 0):" in out[out.index("Failures") :]
    assert len(out.splitlines()) < 1_000


def test_a_run_of_at_most_whole_tasks_is_shown_whole() -> None:
    view = run_of(20, paging.WHOLE_TASKS // 20)

    page = render_html(view)

    assert paging.page_of(view).whole
    assert '<svg id="dag"' in page and 'id="status-map"' not in page
    assert len(re.findall(r'<tr data-task="', page)) == paging.WHOLE_TASKS
    assert "more task" not in page
