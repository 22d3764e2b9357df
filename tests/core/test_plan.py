"""Plans: the coordinator, parsing and validating its plan, frozen plans (oma/plan.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.backends import ProcessBackendConfig
from oma.core.schema.errors import ScriptExhaustedError
from oma.core.schema.plan import (
    COORDINATOR,
    COORDINATOR_SYSTEM_PROMPT,
    CoordinatorConfig,
    PlanArtifact,
    coordinator_agent,
    correction_prompt,
    parse_plan,
    plan_artifact,
    plan_tasks,
    planning_prompt,
    synthesis_prompt,
)
from oma.core.schema.task import TaskRequirements, TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig


def process_agent(name: str) -> AgentConfig:
    return AgentConfig(name=name, backend=ProcessBackendConfig(command="echo"))


def team(*agents: AgentConfig) -> TeamConfig:
    return TeamConfig(name="crew", agents=list(agents))


TEAM = team(AgentConfig(name="a"), AgentConfig(name="b"))


def task(title: str, assignee: str | None = "a", **extra: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignee": assignee, **extra}


# coordinator_agent


def test_coordinator_takes_the_first_llm_agents_provider_and_model() -> None:
    crew = team(
        process_agent("shell"),
        AgentConfig(name="writer", provider="anthropic", model="claude-opus-4-1"),
        AgentConfig(name="other", provider="anthropic", model="claude-haiku-4-5"),
    )

    agent = coordinator_agent(CoordinatorConfig(), crew)

    assert (agent.provider, agent.model) == ("anthropic", "claude-opus-4-1")


def test_coordinator_of_a_team_without_llm_agents_has_no_provider_or_model() -> None:
    agent = coordinator_agent(CoordinatorConfig(), team(process_agent("shell")))

    assert (agent.provider, agent.model) == (None, None)
    assert agent.resolved_provider == "anthropic"


def test_coordinator_uses_its_own_provider_and_model_when_set() -> None:
    config = CoordinatorConfig(provider="anthropic", model="claude-haiku-4-5")
    crew = team(AgentConfig(name="writer", model="claude-opus-4-1"))

    agent = coordinator_agent(config, crew)

    assert (agent.provider, agent.model) == ("anthropic", "claude-haiku-4-5")


def test_coordinator_with_another_provider_does_not_borrow_the_agents_model() -> None:
    config = CoordinatorConfig(provider="scripted", script=["[]"])
    crew = team(AgentConfig(name="writer", model="claude-opus-4-1"))

    agent = coordinator_agent(config, crew)

    assert (agent.provider, agent.model) == ("scripted", None)


def test_coordinator_has_its_name_description_and_limits() -> None:
    config = CoordinatorConfig(max_turns=2, max_tokens=500)

    agent = coordinator_agent(config, TEAM)

    assert agent.name == COORDINATOR == "coordinator"
    assert agent.description == "Plans the team's work and synthesizes the final answer."
    assert agent.system_prompt == COORDINATOR_SYSTEM_PROMPT
    assert (agent.max_turns, agent.max_tokens, agent.script) == (2, 500, None)


def test_coordinator_system_prompt_replaces_the_built_in_one() -> None:
    agent = coordinator_agent(CoordinatorConfig(system_prompt="Plan tersely."), TEAM)

    assert agent.system_prompt == "Plan tersely."


def test_scripted_coordinator_uses_its_own_script_not_the_agents() -> None:
    crew = team(AgentConfig(name="writer", provider="scripted", script=["agent answer"]))

    agent = coordinator_agent(CoordinatorConfig(script=["plan", "synthesis"]), crew)

    assert (agent.provider, agent.script) == ("scripted", ["plan", "synthesis"])


def test_scripted_coordinator_starts_after_the_turns_used() -> None:
    config = CoordinatorConfig(provider="scripted", script=["plan", "fix", "synthesis"])

    agent = coordinator_agent(config, TEAM, turns_used=2)

    assert agent.script == ["synthesis"]


def test_exhausted_coordinator_script_is_a_plan_error_naming_the_turn() -> None:
    config = CoordinatorConfig(provider="scripted", script=["plan", "synthesis"])

    with pytest.raises(ScriptExhaustedError) as raised:
        coordinator_agent(config, TEAM, turns_used=2)

    assert raised.value.message == (
        "the scripted coordinator's script has 2 response(s) but turn 3 was asked for; "
        "add responses to coordinator.script"
    )


def test_scripted_coordinator_without_script_fails_at_its_first_turn() -> None:
    crew = team(AgentConfig(name="writer", provider="scripted", script=["agent answer"]))

    with pytest.raises(ScriptExhaustedError, match="has 0 response\\(s\\) but turn 1"):
        coordinator_agent(CoordinatorConfig(), crew)


# planning_prompt


def test_planning_prompt_lists_the_roster_goal_instructions_and_format() -> None:
    crew = team(
        AgentConfig(
            name="coder",
            description="Writes Python.",
            system_prompt="You write\ntested code.",
            capabilities=["python", "tests"],
        ),
        AgentConfig(name="shell", backend=ProcessBackendConfig(command="sh")),
    )

    prompt = planning_prompt(crew, "Ship the CLI.", "At most 3 tasks.")

    assert "## Team\n- coder (llm, capabilities: python, tests): Writes Python.\n" in prompt
    assert "\n  system prompt: You write tested code.\n- shell (process)\n" in prompt
    assert "## Goal\nShip the CLI.\n\n## Instructions\nAt most 3 tasks.\n" in prompt
    assert "JSON array only" in prompt
    assert '{"title": "...", "description": "...", "assignee": "...", "depends_on": ["..."]}' in (
        prompt
    )
    assert "one of: coder, shell." in prompt


def test_planning_prompt_without_instructions_has_no_instructions_section() -> None:
    assert "## Instructions" not in planning_prompt(TEAM, "Ship it.", None)


def test_planning_prompt_cuts_a_long_system_prompt_to_300_characters() -> None:
    crew = team(AgentConfig(name="a", system_prompt="x" * 400))

    prompt = planning_prompt(crew, "Ship it.", None)

    assert f"  system prompt: {'x' * 299}…\n" in prompt


# parse_plan


def test_parse_plan_reads_a_bare_array() -> None:
    assert parse_plan('[{"title": "A"}]') == [{"title": "A"}]


def test_parse_plan_reads_a_json_code_fence() -> None:
    text = 'Here is the plan:\n```json\n[{"title": "A"}]\n```\nDone.'

    assert parse_plan(text) == [{"title": "A"}]


def test_parse_plan_prefers_the_fenced_array_over_an_example_in_prose() -> None:
    text = 'Format: [{"title": "example"}]\n```\n[{"title": "A"}, {"title": "B"}]\n```'

    assert parse_plan(text) == [{"title": "A"}, {"title": "B"}]


def test_parse_plan_ignores_prose_and_brackets_around_the_array() -> None:
    text = '[note] here is the plan: [{"title": "A", "depends_on": []}] hope it helps [1]'

    assert parse_plan(text) == [{"title": "A", "depends_on": []}]


def test_parse_plan_prefers_an_array_of_objects_over_an_earlier_array() -> None:
    assert parse_plan('Agents: ["a", "b"]. Plan: [{"title": "A"}]') == [{"title": "A"}]


def test_parse_plan_accepts_an_object_with_a_tasks_array() -> None:
    assert parse_plan('{"tasks": [{"title": "A"}]}') == [{"title": "A"}]


def test_parse_plan_returns_an_empty_array() -> None:
    assert parse_plan("```json\n[]\n```") == []


def test_parse_plan_without_an_array_raises_a_message_for_the_coordinator() -> None:
    with pytest.raises(ValueError) as raised:
        parse_plan("I would split this into two tasks.")

    assert str(raised.value).startswith(
        "the answer holds no JSON array of tasks; answer with the JSON array only"
    )


def test_parse_plan_reports_a_malformed_array_rather_than_its_inner_list() -> None:
    text = '[{"title": "A", "depends_on": ["B"],}]'

    with pytest.raises(ValueError) as raised:
        parse_plan(text)

    assert str(raised.value).startswith(
        "the answer holds no valid JSON array of tasks (Expecting property name enclosed "
        "in double quotes at line 1 column 37); answer with the JSON array only"
    )


# plan_tasks


def test_plan_tasks_numbers_tasks_and_turns_dependency_titles_into_ids() -> None:
    items = [
        task("Research"),
        {"title": "Write", "assignee": "b", "depends_on": ["Research"]},
    ]

    tasks, errors = plan_tasks(items, TEAM)

    assert errors == []
    assert tasks == [
        TaskSpec(id="t1", title="Research", description="do Research", assignee="a"),
        TaskSpec(id="t2", title="Write", assignee="b", depends_on=["t1"]),
    ]


def test_plan_tasks_accepts_depends_on_in_camel_case() -> None:
    tasks, errors = plan_tasks([task("A"), task("B", dependsOn=["A"])], TEAM)

    assert (errors, tasks[1].depends_on) == ([], ["t1"])


def test_dependency_titles_match_ignoring_case_and_whitespace() -> None:
    tasks, errors = plan_tasks([task("Write code"), task("B", depends_on=[" write  CODE "])], TEAM)

    assert (errors, tasks[1].depends_on) == ([], ["t1"])


def test_repeated_dependency_counts_once() -> None:
    tasks, errors = plan_tasks([task("A"), task("B", depends_on=["A", "a", "A"])], TEAM)

    assert (errors, tasks[1].depends_on) == ([], ["t1"])


def test_task_without_assignee_is_unassigned() -> None:
    tasks, errors = plan_tasks([{"title": "A"}, task("B", assignee=None)], TEAM)

    assert errors == []
    assert [(t.assignee, t.description) for t in tasks] == [(None, ""), (None, "do B")]


def test_unknown_assignee_is_an_error_naming_the_team() -> None:
    tasks, errors = plan_tasks([task("A"), task("Write code", assignee="bob")], TEAM)

    assert tasks == []
    assert errors == ['task 2 ("Write code"): assignee "bob" is not in the team (agents: a, b)']


def test_unknown_assignee_is_left_unassigned_when_not_strict() -> None:
    tasks, errors = plan_tasks([task("A", assignee="bob")], TEAM, strict_assignees=False)

    assert errors == []
    assert tasks[0].assignee is None


def test_assignee_matches_ignoring_case() -> None:
    tasks, errors = plan_tasks([task("A", assignee=" B ")], TEAM)

    assert (errors, tasks[0].assignee) == ([], "b")


def test_unknown_dependency_is_an_error() -> None:
    tasks, errors = plan_tasks([task("A"), task("X", depends_on=["Y"])], TEAM)

    assert tasks == []
    assert errors == ['task 2 ("X"): depends on "Y", which no task has as its title']


def test_dependency_on_a_shared_title_is_ambiguous() -> None:
    items = [task("Draft"), task("Draft"), task("Review", depends_on=["Draft"])]

    tasks, errors = plan_tasks(items, TEAM)

    assert tasks == []
    assert errors == [
        'task 3 ("Review"): depends on "Draft", the title of more than one task (t1, t2); '
        "make titles unique"
    ]


def test_shared_title_nobody_depends_on_is_fine() -> None:
    tasks, errors = plan_tasks([task("Draft"), task("Draft")], TEAM)

    assert (errors, [t.id for t in tasks]) == ([], ["t1", "t2"])


def test_task_depending_on_itself_is_an_error() -> None:
    tasks, errors = plan_tasks([task("A", depends_on=["A"])], TEAM)

    assert (tasks, errors) == ([], ['task 1 ("A"): depends on itself'])


def test_dependency_cycle_is_named_by_titles() -> None:
    items = [task("A", depends_on=["B"]), task("B", depends_on=["A"])]

    tasks, errors = plan_tasks(items, TEAM)

    assert (tasks, errors) == ([], ['dependency cycle: "A" -> "B" -> "A"'])


def test_empty_plan_is_an_error() -> None:
    assert plan_tasks([], TEAM) == ([], ["the plan has no tasks"])


def test_item_that_is_not_an_object_or_has_no_title_is_an_error() -> None:
    items = ["Research", {"description": "untitled"}, {"title": "  "}, task("A")]

    tasks, errors = plan_tasks(items, TEAM)

    assert tasks == []
    assert errors == ["task 1: not an object", "task 2: no title", "task 3: no title"]


def test_every_error_of_the_plan_is_reported() -> None:
    items = [
        task("A", assignee="bob"),
        task("B", description=7, depends_on="A"),
        task("C", depends_on=["Z"]),
    ]

    _, errors = plan_tasks(items, TEAM)

    assert errors == [
        'task 1 ("A"): assignee "bob" is not in the team (agents: a, b)',
        'task 2 ("B"): description must be a string',
        'task 2 ("B"): depends_on must be a list of task titles',
        'task 3 ("C"): depends on "Z", which no task has as its title',
    ]


def test_requires_is_validated_as_task_requirements() -> None:
    tasks, errors = plan_tasks([task("A", requires={"capabilities": ["python"]})], TEAM)

    assert (errors, tasks[0].requires) == ([], TaskRequirements(capabilities=["python"]))


def test_invalid_requires_is_an_error() -> None:
    _, errors = plan_tasks([task("A", requires={"backend": "docker"})], TEAM)

    assert len(errors) == 1
    assert errors[0].startswith('task 1 ("A"): requires is not valid (backend: ')


def test_unknown_item_keys_are_ignored() -> None:
    tasks, errors = plan_tasks([task("A", priority="high")], TEAM)

    assert (errors, [t.title for t in tasks]) == ([], ["A"])


# correction_prompt and synthesis_prompt


def test_correction_prompt_lists_the_errors_and_asks_for_the_whole_array() -> None:
    prompt = correction_prompt(["task 1: no title", "the plan has no tasks"])

    assert "\n- task 1: no title\n- the plan has no tasks\n" in prompt
    assert "whole corrected JSON array of tasks only" in prompt


def test_synthesis_prompt_holds_each_tasks_output_or_error() -> None:
    tasks = [
        TaskState(id="t1", title="Research", status=TaskStatus.COMPLETED, output="Found X."),
        TaskState(id="t2", title="Build", status=TaskStatus.FAILED, error="exit 1"),
        TaskState(id="t3", title="Ship", status=TaskStatus.SKIPPED),
    ]

    prompt = synthesis_prompt("Ship the CLI.", tasks)

    assert prompt.startswith("## Goal\nShip the CLI.\n")
    assert (
        "### Research (completed)\nFound X.\n\n"
        "### Build (failed)\nerror: exit 1\n\n"
        "### Ship (skipped)\n(no output)\n"
    ) in prompt
    assert "Write the final answer to the goal from these results." in prompt


# PlanArtifact


def test_plan_artifact_has_the_current_version() -> None:
    spec = TaskSpec(id="t1", title="A", assignee="a")

    artifact = plan_artifact("Ship it.", [spec])

    assert artifact == PlanArtifact(version=1, goal="Ship it.", tasks=[spec])


def test_plan_artifact_of_another_version_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(ValidationError) as raised:
        PlanArtifact.model_validate({"version": 2, "tasks": [{"id": "t1", "title": "A"}]})

    assert "unsupported plan version 2: this OMA reads version 1" in str(raised.value)
