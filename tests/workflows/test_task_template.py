"""Tasks made from one template (oma.core.schema.task_template): a run input's
``task_template`` and ``items``, expanded by the TeamRun workflow; ``oma run
--items FILE.jsonl``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from oma.core.rules.fork import fork_run
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.fork import parse_fork_input
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import checked_team_run_input
from oma.core.schema.task import TaskState, TaskStatus
from oma.runtime.dev_server import DevServer
from tests.support.cli import oma, table_rows
from tests.support.runs import assert_replays, run_team, scripted, task

TEAM = {"name": "t", "agents": [scripted("a", "x"), scripted("b", "y")]}

TEMPLATE = {
    "id": "review-{n}",
    "title": "Review {file}",
    "description": 'Review {file} ({lines} lines, {{strict}} {x.__class__} {"k": 1})',
    "assignee": "{agent}",
}


def template_run(items: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    return {"team": TEAM, "task_template": TEMPLATE, "items": items, **rest}


def refused(run_input: dict[str, Any]) -> str:
    with pytest.raises(InvalidRunInputError) as error:
        checked_team_run_input(run_input)
    return error.value.message


def test_each_item_makes_a_task_of_the_template() -> None:
    items = [
        {"n": 1, "file": "a.py", "lines": 10, "agent": "a"},
        {"n": 2, "file": "b.py", "lines": 2.5, "agent": "b", "unused": {"any": "thing"}},
    ]
    tasks = checked_team_run_input(template_run(items)).given_tasks()
    assert [(t.id, t.title, t.assignee) for t in tasks] == [
        ("review-1", "Review a.py", "a"),
        ("review-2", "Review b.py", "b"),
    ]
    # braces that are not a {field} stay; a format string reaches no attribute
    assert tasks[1].description == 'Review b.py (2.5 lines, {strict} {x.__class__} {"k": 1})'


def test_given_tasks_come_first_and_may_depend_on_made_ones() -> None:
    summary = task("summary", "a", "review-1", "review-2")
    run_input = {
        **template_run([{"n": n, "file": "f", "lines": 1, "agent": "a"} for n in (1, 2)]),
        "tasks": [summary],
    }
    tasks = checked_team_run_input(run_input).given_tasks()
    assert [t.id for t in tasks] == ["summary", "review-1", "review-2"]


def test_an_item_without_a_field_the_template_names_is_refused_naming_both() -> None:
    assert refused(template_run([{"n": 1, "file": "a", "lines": 1, "agent": "a"}, {"n": 2}])) == (
        "invalid TeamRun input: (input): items[1] has no field 'file', which "
        "task_template.title names (its fields: n)"
    )


def test_two_items_that_make_one_id_are_refused() -> None:
    same = [{"n": 1, "file": f, "lines": 1, "agent": "a"} for f in ("a", "b")]
    assert "items[0] and items[1] both make task id 'review-1'" in refused(template_run(same))


def test_a_made_id_with_a_slash_and_a_field_that_is_an_object_are_refused() -> None:
    slash = [{"n": "a/b", "file": "f", "lines": 1, "agent": "a"}]
    assert "items[0] makes task id 'review-a/b', which contains '/'" in refused(template_run(slash))
    nested = [{"n": 1, "file": {"path": "a"}, "lines": 1, "agent": "a"}]
    assert "items[0].file is an object: a field of an item is a string, a number or a boolean" in (
        refused(template_run(nested))
    )


def test_a_template_without_items_and_a_template_with_a_goal_are_refused() -> None:
    assert "'task_template' and 'items' go together" in refused(
        {"team": TEAM, "task_template": TEMPLATE}
    )
    one = [{"n": 1, "file": "f", "lines": 1, "agent": "a"}]
    assert "(got goal, task_template)" in refused(template_run(one, goal="do it"))


def test_a_fork_that_edits_a_made_task_writes_the_tasks_out() -> None:
    items = [{"n": n, "file": "f", "lines": 1, "agent": "a"} for n in (1, 2)]
    source = template_run(items)
    result = TeamRunResult(
        success=False,
        status="failed",
        tasks=[
            TaskState(id="review-1", assignee="a", status=TaskStatus.COMPLETED, output="ok"),
            TaskState(id="review-2", assignee="a", status=TaskStatus.FAILED),
        ],
    )
    spec = parse_fork_input({"fork": {"run_id": "src", "edit": {"review-2": {"title": "Again"}}}})
    forked = fork_run(spec, source, result, workflow_id="f", now=datetime.now(UTC))
    assert "task_template" not in forked.input and "items" not in forked.input
    assert [t["title"] for t in forked.input["tasks"]] == ["Review f", "Again"]


@pytest.mark.usefixtures("worker")
async def test_a_run_of_a_template_and_its_items_runs_one_task_each(
    client: Client, workflow_id: str
) -> None:
    items = [{"n": n, "file": f"m{n}.py", "lines": n, "agent": "a"} for n in range(5)]
    result = await run_team(client, workflow_id, template_run(items))
    assert result.success, result
    assert [(t.id, t.output) for t in result.tasks] == [(f"review-{n}", "x") for n in range(5)]
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_oma_run_reads_the_items_of_a_jsonl_file(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"team": TEAM, "task_template": TEMPLATE}))
    items = tmp_path / "items.jsonl"
    lines = [json.dumps({"n": n, "file": f"m{n}.py", "lines": n, "agent": "b"}) for n in (1, 2)]
    items.write_text("\n".join(lines[:1]) + "\n\n" + lines[1] + "\n")
    args = ("run", str(run_file), "--items", str(items), "--no-worker")
    proc = await oma(dev_server, *args, "--workflow-id", workflow_id)
    assert proc.returncode == 0, proc.stderr
    assert [row[0] for row in table_rows(proc.stdout)] == ["review-1", "review-2"]
    items.write_text(lines[0] + "\n[1, 2]\n")
    bad = await oma(dev_server, *args)
    assert bad.returncode == 2
    assert f"{items} line 2 is not a JSON object" in bad.stderr
    items.write_text(lines[0] + "\n{nope\n")
    bad = await oma(dev_server, *args)
    assert bad.returncode == 2
    assert f"{items} line 2 is not valid JSON: Expecting property name" in bad.stderr
