"""Run input validation: the messages a user gets for a malformed input."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from oma.core.contracts.names import WorkflowName
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.approvals import decision_of
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.limits import MAX_SHARDED_RUN_TASKS
from oma.core.schema.results import AcpSessionInfo
from oma.core.schema.run_input import (
    AgentRunInput,
    parse_agent_run_input,
    parse_team_run_input,
)
from oma.core.schema.validation import single_input
from tests.support.paths import ROOT

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
        "id is '<run id>/<task id>', so task ids may not contain '/'"
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
        "give exactly one of 'goal', 'tasks' (or 'task_template' and 'items') or 'plan' "
        "(got goal, tasks)"
    )
    assert refusal().endswith(
        "give exactly one of 'goal', 'tasks' (or 'task_template' and 'items') or 'plan'"
    )


def test_a_workflow_or_handler_takes_exactly_one_input() -> None:
    assert single_input(({"a": 1},), WorkflowName.TEAM_RUN) == {"a": 1}
    with pytest.raises(InvalidRunInputError, match="got 0 \\(pass it with --input"):
        single_input((), WorkflowName.TEAM_RUN)
    with pytest.raises(InvalidRunInputError, match=r"a decision takes exactly one input.*got 2"):
        single_input(({}, {}), "a decision")


def test_a_misspelled_option_names_its_path_and_the_option_meant() -> None:
    message = refusal(tasks=TASKS, options={"max_concurency": 2})
    assert message == (
        "invalid TeamRun input: options.max_concurency: Extra inputs are not permitted "
        "(did you mean 'max_concurrency'?)"
    )


def test_a_misspelled_field_deep_in_the_team_gets_the_field_of_the_model_there() -> None:
    agents = [
        {"name": "a", "provider": "scripted", "script": ["x"]},
        {"name": "c", "backend": {"kind": "process", "command": "true", "argz": []}},
        {"name": "b", "provider": "scripted", "scirpt": ["x"], "system_promt": "hi"},
    ]
    message = refusal(team={"name": "t", "agents": agents}, tasks=TASKS)
    assert message == (
        "invalid TeamRun input: "
        "team.agents[1].backend.argz: Extra inputs are not permitted (did you mean 'args'?); "
        "team.agents[2].scirpt: Extra inputs are not permitted (did you mean 'script'?); "
        "team.agents[2].system_promt: Extra inputs are not permitted "
        "(did you mean 'system_prompt'?)"
    )


def test_a_misspelled_task_field_and_an_approval_gate_get_their_names() -> None:
    tasks = [{"id": "one", "title": "One", "assignee": "a", "depends_onn": []}]
    message = refusal(tasks=tasks, options={"approvals": {"dispach": ["one"]}})
    assert "tasks[0].depends_onn: Extra inputs are not permitted (did you mean 'depends_on'?)" in (
        message
    )
    assert (
        "options.approvals.dispach: Extra inputs are not permitted (did you mean 'dispatch'?)"
        in message
    )


def test_an_unknown_field_with_nothing_close_gets_no_guess() -> None:
    message = refusal(tasks=TASKS, options={"colour": "blue"})
    assert message == "invalid TeamRun input: options.colour: Extra inputs are not permitted"


def test_a_misspelled_decision_field_gets_the_field_meant() -> None:
    with pytest.raises(InvalidRunInputError) as info:
        decision_of(
            ({"request_id": "plan", "request_hash": "h", "decison": "approve", "reviewer": {}},)
        )
    assert "decison: Extra inputs are not permitted (did you mean 'decision'?)" in (
        info.value.message
    )


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "examples").glob("*.json")),
    ids=lambda p: p.name,
)
def test_every_example_is_a_valid_run_input(path: Path) -> None:
    run_input = parse_team_run_input(json.loads(path.read_text()))
    if run_input.goal is None:
        run_input.check_tasks(run_input.given_tasks())
    else:
        assert run_input.coordinator is not None  # goal examples set the coordinator's brief


# -- bounds: what each field becomes in Temporal ------------------------------


def test_a_timeout_longer_than_a_temporal_timer_holds_is_refused_naming_the_field() -> None:
    message = refusal(
        tasks=[{**TASKS[0], "timeout_s": 1e30, "retry_delay_s": 1e30}],
        options={"timeout_s": 1e30, "approvals": {"timeout_s": 1e30}},
    )
    limit = "Input should be less than or equal to 3153600000"
    assert message == (
        f"invalid TeamRun input: tasks[0].retry_delay_s: {limit}; "
        f"tasks[0].timeout_s: {limit}; options.timeout_s: {limit}; "
        f"options.approvals.timeout_s: {limit}"
    )


def test_an_infinite_timeout_is_refused() -> None:
    assert refusal(tasks=TASKS, options={"timeout_s": float("inf")}) == (
        "invalid TeamRun input: options.timeout_s: Input should be a finite number"
    )


def test_a_price_whose_turns_could_cost_more_than_a_float_holds_is_refused() -> None:
    message = refusal(
        tasks=TASKS,
        options={"pricing": {"m": {"input": 1e308, "output": "inf", "cache_read": 2e6}}},
    )
    limit = "Input should be less than or equal to 1000000"
    assert message == (
        f"invalid TeamRun input: options.pricing.m.input: {limit}; "
        "options.pricing.m.output: Input should be a finite number; "
        f"options.pricing.m.cache_read: {limit}"
    )


def test_a_task_id_longer_than_its_workflow_id_may_grow_is_refused() -> None:
    message = refusal(tasks=[{**TASKS[0], "id": "x" * 1001}])
    assert message == (
        "invalid TeamRun input: tasks[0].id: String should have at most 100 characters"
    )


def test_team_and_agent_names_longer_than_a_search_attribute_holds_are_refused() -> None:
    agent = {"name": "a" * 3000, "provider": "scripted", "script": ["x"]}
    message = refusal(team={"name": "t" * 3000, "agents": [agent]}, goal="g")
    assert message == (
        "invalid TeamRun input: team.name: String should have at most 100 characters; "
        "team.agents[0].name: String should have at most 100 characters"
    )


def test_more_tasks_in_flight_than_temporal_lets_a_run_start_children_is_refused() -> None:
    assert refusal(tasks=TASKS, options={"max_concurrency": 5000}) == (
        "invalid TeamRun input: options.max_concurrency: Input should be less than or equal to 1000"
    )


def test_a_history_event_limit_past_temporals_own_is_refused() -> None:
    assert refusal(tasks=TASKS, options={"history_event_limit": 100_000}) == (
        "invalid TeamRun input: options.history_event_limit: "
        "Input should be less than or equal to 51200"
    )


def test_a_retry_delay_that_backs_off_past_what_a_timer_holds_waits_the_longest_it_can() -> None:
    from oma.core.schema.limits import MAX_DURATION_S
    from oma.core.schema.task import TaskSpec

    spec = TaskSpec(id="t", title="T", retry_delay_s=1, retry_backoff=10.0, max_retries=100)
    assert spec.retry_delay(3) == 100
    assert spec.retry_delay(100) == MAX_DURATION_S
    assert spec.retry_delay(2000) == MAX_DURATION_S  # 10.0 ** 1999 overflows a float


def test_nine_thousand_tasks_whose_carried_state_cannot_fit_are_refused() -> None:
    from oma.core.schema.run_input import checked_team_run_input

    title = "T" * 100  # under the payload limit, over the budget with the tasks' states
    tasks = [{"id": f"t{n}", "title": title, "assignee": "a"} for n in range(9_000)]
    with pytest.raises(InvalidRunInputError) as info:
        checked_team_run_input({"team": TEAM, "tasks": tasks})
    message = info.value.message
    assert message.startswith("the TeamRun input is ")
    assert "its 9000 task(s) take at least" in message
    assert "over the run's budget of 1572864 bytes" in message
    assert "OMA_PAYLOAD_STORE, raises the budget to 134217728 bytes" in message
    checked_team_run_input({"team": TEAM, "tasks": tasks}, stored=True)  # with a store, it fits


def test_a_description_under_the_payload_limit_but_over_the_runs_budget_is_refused() -> None:
    from oma.core.schema.run_input import checked_team_run_input

    tasks = [{**TASKS[0], "description": "word " * 360_000}]  # 1.8 MB
    with pytest.raises(InvalidRunInputError) as info:
        checked_team_run_input({"team": TEAM, "tasks": tasks})
    assert "over the run's budget of 1572864 bytes" in info.value.message
    assert "its largest field is tasks[0].description (1800002 bytes)" in info.value.message


def test_a_goal_a_run_would_hold_three_times_past_its_budget_is_refused_naming_its_limit() -> None:
    # 1.4 MB passes the payload limit and, once, the budget; the result holds
    # it twice and the state a run carries three times
    from oma.core.schema.run_input import checked_team_run_input

    run = {"team": TEAM, "goal": "g" * 1_400_000}
    with pytest.raises(InvalidRunInputError) as info:
        checked_team_run_input(run)
    message = info.value.message
    assert message.startswith("goal: the goal is 1400002 bytes of JSON and a goal run holds it 3")
    assert "over the run's budget of 1572864 bytes" in message
    most = int(message.split("this run's goal may be at most ")[1].split()[0])
    assert 500_000 < most < 1_572_864 // 3
    checked_team_run_input({**run, "goal": "g" * (most - 2)})  # its JSON: most bytes
    with pytest.raises(InvalidRunInputError, match=f"may be at most {most} bytes"):
        checked_team_run_input({**run, "goal": "g" * (most - 1)})


def _accepts_null(annotation: Any) -> bool:
    return annotation is None or type(None) in typing.get_args(annotation)


@pytest.mark.parametrize("model", [AgentRunInput, AgentConfig])
def test_every_field_that_may_be_null_defaults_to_null(model: type[BaseModel]) -> None:
    # what AgentRunInput.wire() leaves out the child must read back the same
    nullable = [n for n, f in model.model_fields.items() if _accepts_null(f.annotation)]
    assert nullable
    assert [n for n in nullable if model.model_fields[n].default is not None] == []


def test_an_agent_run_input_on_the_wire_has_no_nulls_and_reads_back_the_same() -> None:
    agent = AgentConfig.model_validate(
        {
            "name": "coder",
            "backend": {"kind": "process", "command": "cat"},
            "max_turns": 3,
        }
    )
    run_input = AgentRunInput(
        agent=agent,
        input="do it",
        task_id="t1",
        attempt=2,
        acp_session=AcpSessionInfo(session_id="s", worker_task_queue="q", new_session=False),
        token_budget=0,
    )
    wire = run_input.wire()
    assert None not in wire.values() and None not in wire["agent"].values()
    assert wire["token_budget"] == 0 and wire["agent"]["backend"]["kind"] == "process"
    assert AgentRunInput.model_validate(wire) == run_input


def test_an_agent_run_input_takes_as_patched_only_the_patch_a_team_run_passes_on() -> None:
    agent = {"name": "a", "provider": "scripted", "script": ["x"]}
    taken = parse_agent_run_input({"agent": agent, "input": "x", "patched": ["oma-one-marker-2"]})
    assert taken.patched == ["oma-one-marker-2"]
    with pytest.raises(InvalidRunInputError, match=r"patched\[0\]"):
        parse_agent_run_input({"agent": agent, "input": "x", "patched": ["oma-failed-state"]})


@pytest.mark.parametrize(
    "listed",
    [
        {"tasks": [{}] * (MAX_SHARDED_RUN_TASKS + 1)},
        {"task_template": {}, "items": [{}] * MAX_SHARDED_RUN_TASKS, "tasks": [{}]},
        {"plan": {"tasks": [{}] * (MAX_SHARDED_RUN_TASKS + 1)}},
    ],
    ids=["tasks", "template-items-and-tasks", "plan"],
)
def test_a_run_of_too_many_tasks_is_refused_before_its_tasks_are_validated(
    listed: dict[str, Any],
) -> None:
    # TeamRun validates its input in its first activation, under the SDK's 2 s
    # deadlock timer: validating 100,001 tasks first took longer than that on
    # a slow machine, and the run retried instead of failing. Every task here
    # is invalid ({}), so a count said after validation would never be seen.
    raw = {"team": {"name": "t", "agents": []}, **listed}
    with pytest.raises(InvalidRunInputError) as raised:
        parse_team_run_input(raw)
    assert raised.value.message.startswith(
        f"tasks: the run has {MAX_SHARDED_RUN_TASKS + 1} tasks; a run may have at most "
        f"{MAX_SHARDED_RUN_TASKS}"
    )
