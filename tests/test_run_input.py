"""Run input validation: the messages a user gets for a malformed input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oma.core.errors import InvalidRunInputError
from oma.core.run_input import parse_team_run_input
from oma.core.validation import single_input

TEAM = {"name": "t", "agents": [{"name": "a", "provider": "scripted", "script": ["x"]}]}
TASKS = [{"id": "one", "title": "One", "assignee": "a"}]


def refusal(**fields: Any) -> str:
    with pytest.raises(InvalidRunInputError) as info:
        parse_team_run_input({"team": TEAM, **fields})
    return info.value.message


def test_a_blank_goal_is_refused() -> None:
    assert refusal(goal="   ").endswith("'goal' is blank: say what the team should achieve")


def test_a_task_id_with_a_slash_says_why_it_may_not() -> None:
    message = refusal(tasks=[{"id": "a/b", "title": "T", "assignee": "a"}])
    assert message == (
        "invalid TeamRun input: tasks[0].id: task id 'a/b' contains '/': a task's workflow "
        "id is '<run id>/<task id>', so ids may not"
    )


def test_a_dispatch_gate_given_as_a_string_names_the_two_forms() -> None:
    message = refusal(tasks=TASKS, options={"approvals": {"dispatch": "one"}})
    assert message == (
        'invalid TeamRun input: options.approvals.dispatch: must be "all" or a list of '
        "task ids and/or agent names, not the string 'one'"
    )


def test_options_that_only_apply_to_a_goal_are_refused_without_one() -> None:
    assert refusal(tasks=TASKS, options={"strict_assignees": False}).endswith(
        "options.strict_assignees checks a coordinator's plan: it needs a 'goal'"
    )
    assert refusal(tasks=TASKS, options={"plan_only": True}).endswith(
        "options.plan_only needs a 'goal' (there is nothing to plan)"
    )


def test_exactly_one_source_of_tasks() -> None:
    assert refusal(goal="g", tasks=TASKS).endswith(
        "give exactly one of 'goal', 'tasks' or 'plan' (got goal, tasks)"
    )
    assert refusal().endswith("give exactly one of 'goal', 'tasks' or 'plan'")


def test_a_workflow_or_handler_takes_exactly_one_input() -> None:
    assert single_input(({"a": 1},), "TeamRun") == {"a": 1}
    with pytest.raises(InvalidRunInputError, match="got 0 \\(pass it with --input"):
        single_input((), "TeamRun")
    with pytest.raises(InvalidRunInputError, match=r"a decision takes exactly one input.*got 2"):
        single_input(({}, {}), "a decision")


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).parent.parent / "examples").glob("*.json")),
    ids=lambda p: p.name,
)
def test_every_example_is_a_valid_run_input(path: Path) -> None:
    run_input = parse_team_run_input(json.loads(path.read_text()))
    if run_input.goal is None:
        run_input.check_tasks(run_input.given_tasks())
    else:
        assert run_input.coordinator is not None  # goal examples set the coordinator's brief
