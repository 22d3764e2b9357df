"""Reuse by content (oma.core.rules.reuse): which tasks of a run keep a
reference run's outputs, which run, and why."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from oma.core.rules.content_key import content_keys
from oma.core.rules.fork import fork_run
from oma.core.rules.reuse import reuse_run
from oma.core.schema.fork import parse_fork_input
from oma.core.schema.plan import PlanArtifact
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import parse_team_run_input
from oma.core.schema.task import TaskState, TaskStatus
from tests.support.orchestration import plan_answer, planned
from tests.support.runs import scripted, task

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def run_input(b_prompt: str = "B1") -> dict[str, Any]:
    return {
        "team": {
            "name": "ab",
            "agents": [
                scripted("a", "x", system_prompt="A1"),
                scripted("b", "y", system_prompt=b_prompt),
            ],
        },
        "tasks": [
            task("t1", "a"),
            task("t2", "b", "t1"),
            task("t3", "a", "t1"),
            task("t4", "a", "t2", "t3"),
            task("t5", "a"),
        ],
    }


def completed(inp: dict[str, Any]) -> TeamRunResult:
    specs = inp["plan"]["tasks"] if "plan" in inp else inp["tasks"]
    return TeamRunResult(
        success=True,
        status="completed",
        tasks=[
            TaskState(
                id=t["id"],
                assignee=t["assignee"],
                status=TaskStatus.COMPLETED,
                output=f"out {t['id']}",
                cost_usd=0.25,
            )
            for t in specs
        ],
    )


def reuse(new: dict[str, Any], reference: dict[str, Any], **ref_result: Any) -> Any:
    payload = {**new, "options": {**new.get("options", {}), "reuse": {"from": "ref"}}}
    result = ref_result.get("result") or completed(reference)
    return reuse_run(payload, reference, result, workflow_id="new", now=NOW)


def test_the_same_input_reuses_every_task() -> None:
    run = reuse(run_input(), run_input())
    assert (run.reused, run.rerun) == (["t1", "t2", "t3", "t4", "t5"], [])
    assert run.resume is not None
    t4 = run.resume.result.task("t4")
    assert t4.reused_from is not None
    assert (t4.reused_from.run_id, t4.reused_from.task_id) == ("ref", "t4")
    assert run.resume.result.forked_from is None


def test_a_changed_prompt_reruns_that_agents_tasks_and_their_dependents() -> None:
    run = reuse(run_input(b_prompt="B2"), run_input())
    assert (run.reused, run.rerun) == (["t1", "t3", "t5"], ["t2", "t4"])
    assert run.reasons == {
        "t2": "agent 'b' changed: system_prompt",
        "t4": "depends on t2, which runs again",
    }
    assert (run.estimated_cost_usd, run.cost_unknown) == (0.5, [])


def test_a_changed_description_names_the_field() -> None:
    new = run_input()
    new["tasks"][4]["description"] = "do it otherwise"
    run = reuse(new, run_input())
    assert run.rerun == ["t5"]
    assert run.reasons == {"t5": "task changed: description"}


def test_a_task_the_reference_did_not_complete_runs() -> None:
    result = completed(run_input())
    result.tasks[4].status = TaskStatus.FAILED
    run = reuse(run_input(), run_input(), result=result)
    assert run.rerun == ["t5"]
    assert run.reasons == {"t5": "failed in run ref"}


def test_a_renamed_task_with_the_same_content_is_reused() -> None:
    new = copy.deepcopy(run_input())
    new["tasks"][4]["id"] = "t5b"
    run = reuse(new, run_input())
    assert run.rerun == []
    assert run.resume is not None
    origin = run.resume.result.task("t5b").reused_from
    assert origin is not None
    assert (origin.run_id, origin.task_id) == ("ref", "t5")


def test_a_renamed_upstream_task_reruns_a_task_whose_prompt_names_its_upstream_ids() -> None:
    # a structured dependency payload is a record with the upstream's task_id in the prompt
    reference = run_input()
    reference["tasks"][1]["dependency_payload"] = "structured"  # t2 reads t1 as a record
    new = copy.deepcopy(reference)
    new["tasks"][0]["id"] = "first"
    for spec in new["tasks"][1:3]:
        spec["depends_on"] = ["first"]
    run = reuse(new, reference)
    assert run.reused == ["first", "t3", "t5"]  # t3 reads only t1's output: same prompt
    assert run.rerun == ["t2", "t4"]
    assert run.reasons["t2"] == (
        "the ids of its upstream tasks changed (its dependency_payload 'structured' shows them)"
    )


def test_a_task_that_reads_the_whole_memory_always_runs() -> None:
    new = run_input()
    new["tasks"][4]["memory_scope"] = "all"
    ref = copy.deepcopy(new)
    run = reuse(new, ref)
    assert run.rerun == ["t5"]
    assert "memory_scope 'all'" in run.reasons["t5"]


def test_keys_follow_the_upstream_whatever_the_order_of_the_tasks() -> None:
    inp = parse_team_run_input(run_input())
    keys = content_keys(inp.given_tasks(), inp.team)
    shuffled = content_keys(list(reversed(inp.given_tasks())), inp.team)
    assert keys == shuffled
    assert len(set(keys.values())) == 5


GOAL_PLAN = plan_answer(planned("Research", "a"), planned("Write", "b", "Research"))


def goal_input(goal: str = "Write about the sky.") -> dict[str, Any]:
    return {
        "team": run_input()["team"],
        "goal": goal,
        "coordinator": {"provider": "scripted", "script": [GOAL_PLAN, "final"]},
    }


def goal_result() -> TeamRunResult:
    plan = {
        "version": 1,
        "goal": "Write about the sky.",
        "tasks": [task("t1", "a"), task("t2", "b", "t1")],
    }
    result = completed({"plan": plan})
    result.plan = PlanArtifact.model_validate(plan)
    return result


def test_a_goal_run_that_would_plan_the_same_reuses_the_plan_and_its_tasks() -> None:
    run = reuse(goal_input(), goal_input(), result=goal_result())
    assert (run.reused, run.rerun) == (["t1", "t2"], [])
    assert run.resume is not None
    assert run.resume.result.plan is not None


def test_a_goal_run_with_another_goal_plans_anew_and_reuses_nothing() -> None:
    run = reuse(goal_input("Write about the sea."), goal_input(), result=goal_result())
    assert run.resume is None
    assert run.note is not None
    assert run.note.startswith("the goal changed: the run plans anew")


def forked_with(team_input: dict[str, Any], source: dict[str, Any], rerun: list[str]) -> Any:
    """The fork ``ref`` of ``source`` (completed) with ``team_input``'s team, as its
    input and state read back: what a run that reuses the fork reads."""
    spec = parse_fork_input({"fork": {"run_id": "src", "rerun": rerun}, "team": team_input["team"]})
    fork = fork_run(spec, source, completed(source), workflow_id="ref", now=NOW)
    assert fork.resume is not None
    result = fork.resume.result.model_copy(deep=True)
    for t in result.tasks:  # the fork ran what it did not keep
        t.status, t.output = TaskStatus.COMPLETED, t.output or f"out {t.id} in the fork"
    return fork.input, result


def test_a_task_a_fork_kept_is_matched_on_the_key_it_was_made_with() -> None:
    # the fork ran t2 and t4 with b's new prompt, and kept the rest, made with the old one
    fork_input, fork_result = forked_with(run_input("B2"), run_input("B1"), ["t2"])
    run = reuse(run_input("B2"), fork_input, result=fork_result)
    assert (run.reused, run.rerun) == (["t1", "t2", "t3", "t4", "t5"], [])
    # a's prompt changed in the fork: what it kept was made with A1, so it runs again
    changed = copy.deepcopy(run_input("B1"))
    changed["team"]["agents"][0]["system_prompt"] = "A2"
    fork_input, fork_result = forked_with(changed, run_input("B1"), ["t5"])
    run = reuse(changed, fork_input, result=fork_result)
    assert run.reused == ["t5"]  # the only one the fork made with A2
    assert run.reasons["t1"] == "its output in run ref was made in run src with other inputs"
    # and a run with the source's team reuses what the fork kept, as made in src
    run = reuse(run_input("B1"), fork_input, result=fork_result)
    assert run.reused == ["t1", "t2", "t3", "t4"]
    assert run.resume is not None
    origin = run.resume.result.task("t1").reused_from
    assert origin is not None and origin.run_id == "src"


def test_a_task_kept_before_keys_were_carried_matches_nothing() -> None:
    fork_input, fork_result = forked_with(run_input("B1"), run_input("B1"), ["t5"])
    for t in fork_result.tasks:
        if t.reused_from is not None:
            t.reused_from.content_key = None
    run = reuse(run_input("B1"), fork_input, result=fork_result)
    assert run.reused == ["t5"]
    assert run.reasons["t1"] == (
        "run ref kept it from run src without the key of what made it (a run from before "
        "keys were carried)"
    )
