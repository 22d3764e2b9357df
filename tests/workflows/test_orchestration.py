"""TeamRun orchestration: the coordinator (plan, correction, synthesis), plan-only
runs and frozen plans, scheduling strategies and requirements, what tasks read
from shared memory, retries, timeouts and the token budget, the events query,
and continue-as-new."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma import worker as oma_worker
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.plan import PlanArtifact, planning_prompt
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.task import TaskStatus
from oma.core.schema.team import TeamConfig
from oma.worker import plugin
from tests.support.approvals import WAIT_S, eventually
from tests.support.orchestration import (
    ECHO,
    child_ids,
    child_result,
    events_of,
    failure_of,
    plan_answer,
    planned,
    prompts_of,
    started_task_ids,
    unassigned,
)
from tests.support.procs import alive
from tests.support.runs import (
    TASK_QUEUE,
    assert_replays,
    process,
    run_team,
    scripted,
    start_team,
    task,
    team_result,
)

pytestmark = pytest.mark.usefixtures("worker")

GOAL = "Write a short note about how cats sleep"
FACTS = "cats sleep sixteen hours a day"
SYNTHESIS = "Cats sleep for most of the day."
WRITER_OUTPUT = (
    "# Task: Write\n\ndo write\n\n## Results of the tasks this one depends on\n\n"
    f"### Research\n{FACTS}"
)
PLAN = plan_answer(
    planned("Research", "researcher"),
    planned("Write", "writer", "Research", key="dependsOn"),
)


def cat_team() -> dict[str, Any]:
    return {
        "name": "cats",
        "agents": [
            scripted("researcher", FACTS),
            process("writer", ECHO),
        ],
    }


def goal_input(*script: str, **options: Any) -> dict[str, Any]:
    """A goal run of the cat team whose scripted coordinator answers ``script``."""
    run_input: dict[str, Any] = {
        "team": cat_team(),
        "goal": GOAL,
        "coordinator": {"provider": "scripted", "script": list(script)},
    }
    if options:
        run_input["options"] = options
    return run_input


def graph(tasks: Any) -> list[tuple[str, str, str | None, list[str]]]:
    return [(t.id, t.title, t.assignee, t.depends_on) for t in tasks]


async def fails_with(
    client: Client, workflow_id: str, run_input: dict[str, Any]
) -> ApplicationError:
    """Run ``run_input``, which must fail the workflow; its ApplicationError."""
    with pytest.raises(WorkflowFailureError) as info:
        await run_team(client, workflow_id, run_input)
    return failure_of(info.value)


def new_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# -- the coordinator ---------------------------------------------------------


@dataclass
class Run:
    """A finished run that several tests read."""

    workflow_id: str
    result: TeamRunResult


@pytest.fixture(scope="module")
async def goal_run(client: Client, worker: oma_worker.OmaWorker) -> Run:
    """One goal run shared by the tests that read it: plan, two tasks, synthesis."""
    workflow_id = new_id("goal-run")
    return Run(workflow_id, await run_team(client, workflow_id, goal_input(PLAN, SYNTHESIS)))


async def test_coordinator_plan_in_a_fence_with_prose_becomes_tasks_t1_to_tn(
    client: Client, goal_run: Run
) -> None:
    result = goal_run.result
    expected = [("t1", "Research", "researcher", []), ("t2", "Write", "writer", ["t1"])]
    assert result.plan is not None
    assert (result.plan.version, result.plan.goal) == (1, GOAL)
    assert graph(result.plan.tasks) == expected
    assert graph(result.tasks) == expected
    assert [t.status for t in result.tasks] == [TaskStatus.COMPLETED, TaskStatus.COMPLETED]
    assert result.task("t2").output == WRITER_OUTPUT
    wid = goal_run.workflow_id
    assert await child_ids(client, wid) == [
        f"{wid}/coordinator/plan",
        f"{wid}/t1",
        f"{wid}/t2",
        f"{wid}/coordinator/synthesis",
    ]
    assert await assert_replays(client, wid) == 5


async def test_coordinator_synthesis_is_the_final_output(goal_run: Run) -> None:
    result = goal_run.result
    assert (result.status, result.success, result.error_code) == ("completed", True, None)
    assert result.final_output == SYNTHESIS


async def test_goal_run_result_names_its_goal(goal_run: Run) -> None:
    assert goal_run.result.goal == GOAL


async def test_synthesis_prompt_holds_every_task_output(client: Client, goal_run: Run) -> None:
    synthesis = await child_result(client, f"{goal_run.workflow_id}/coordinator/synthesis")
    assert prompts_of(synthesis) == [
        f"## Goal\n{GOAL}\n\n## Task results\n"
        f"### Research (completed)\n{FACTS}\n\n"
        f"### Write (completed)\n{WRITER_OUTPUT}\n\n"
        "Write the final answer to the goal from these results. If a failed or skipped "
        "task matters to the answer, say so."
    ]
    assert synthesis.output == SYNTHESIS


async def test_coordinator_usage_is_planning_plus_synthesis(client: Client, goal_run: Run) -> None:
    wid, result = goal_run.workflow_id, goal_run.result
    plan = await child_result(client, f"{wid}/coordinator/plan")
    synthesis = await child_result(client, f"{wid}/coordinator/synthesis")
    # the scripted provider counts words: the prompt in, the answer out
    team = TeamConfig.model_validate(cat_team())
    assert plan.token_usage.model_dump(include={"input_tokens", "output_tokens"}) == {
        "input_tokens": len(planning_prompt(team, GOAL, None).split()),
        "output_tokens": len(PLAN.split()),
    }
    coordinator = result.agent_results["coordinator"]
    assert list(result.agent_results) == ["coordinator"]
    assert coordinator.turns == 2
    assert coordinator.messages == []
    assert coordinator.token_usage == plan.token_usage + synthesis.token_usage
    assert result.total_token_usage == (
        coordinator.token_usage + result.task("t1").token_usage + result.task("t2").token_usage
    )


async def test_goal_run_events_name_the_goal_and_the_plan(client: Client, goal_run: Run) -> None:
    events = await events_of(client, goal_run.workflow_id)
    assert [(e.type, e.task_id, e.detail) for e in events] == [
        ("run_start", None, f"goal: {GOAL}"),
        ("plan_ready", None, "2 task(s)"),
        ("task_start", "t1", "agent researcher"),
        ("task_complete", "t1", None),
        ("task_start", "t2", "agent writer"),
        ("task_complete", "t2", None),
        ("run_end", None, "completed"),
    ]


async def test_invalid_plan_json_gets_one_correction_turn_that_lists_the_error(
    client: Client, workflow_id: str
) -> None:
    bad = 'Plan:\n[{"title": "Research", "assignee": "researcher",]'
    result = await run_team(client, workflow_id, goal_input(bad, PLAN, SYNTHESIS))
    assert (result.status, result.final_output) == ("completed", SYNTHESIS)
    assert graph(result.tasks) == [
        ("t1", "Research", "researcher", []),
        ("t2", "Write", "writer", ["t1"]),
    ]
    assert f"{workflow_id}/coordinator/plan-correction" in await child_ids(client, workflow_id)
    correction = await child_result(client, f"{workflow_id}/coordinator/plan-correction")
    [_planning, correction_prompt] = prompts_of(correction)
    assert correction_prompt.startswith(
        "Your plan cannot be run as it is:\n- the answer holds no valid JSON array of tasks ("
    )
    assert correction_prompt.endswith(
        "Answer again with the whole corrected JSON array of tasks only, in the same "
        "format, with no prose around it."
    )
    assert result.agent_results["coordinator"].turns == 3
    await assert_replays(client, workflow_id)


async def test_unknown_assignee_after_the_correction_fails_the_run_with_invalid_plan(
    client: Client, workflow_id: str
) -> None:
    ghostly = plan_answer(planned("Research", "ghost"), planned("Write", "writer", "Research"))
    error = await fails_with(client, workflow_id, goal_input(ghostly, ghostly, SYNTHESIS))
    assert (error.type, error.non_retryable) == ("INVALID_PLAN", True)
    assert error.message == (
        "the coordinator's plan is invalid after one correction turn: "
        'task 1 ("Research"): assignee "ghost" is not in the team (agents: researcher, writer)'
    )
    # no task ran
    assert await child_ids(client, workflow_id) == [
        f"{workflow_id}/coordinator/plan",
        f"{workflow_id}/coordinator/plan-correction",
    ]
    await assert_replays(client, workflow_id)


async def test_plan_cycle_is_named_in_the_correction_prompt(
    client: Client, workflow_id: str
) -> None:
    cyclic = plan_answer(
        planned("Research", "researcher", "Write"), planned("Write", "writer", "Research")
    )
    result = await run_team(client, workflow_id, goal_input(cyclic, PLAN, SYNTHESIS))
    assert result.status == "completed"
    correction = await child_result(client, f"{workflow_id}/coordinator/plan-correction")
    assert prompts_of(correction)[1].startswith(
        'Your plan cannot be run as it is:\n- dependency cycle: "Research" -> "Write" -> '
        '"Research"\n\n'
    )
    await assert_replays(client, workflow_id)


async def test_unknown_assignee_is_left_to_the_scheduler_when_not_strict(
    client: Client, workflow_id: str
) -> None:
    ghostly = plan_answer(planned("Research", "ghost"), planned("Write", "writer", "Research"))
    result = await run_team(
        client, workflow_id, goal_input(ghostly, SYNTHESIS, strict_assignees=False)
    )
    assert result.status == "completed"
    assert result.plan is not None
    assert [t.assignee for t in result.plan.tasks] == [None, "writer"]
    # dependency-first assigns agents round-robin: the first of the roster
    assert [t.assignee for t in result.tasks] == ["researcher", "writer"]
    assert result.task("t1").output == FACTS
    assert f"{workflow_id}/coordinator/plan-correction" not in await child_ids(client, workflow_id)
    await assert_replays(client, workflow_id)


# -- plan-only runs and frozen plans -----------------------------------------


@pytest.fixture(scope="module")
async def plan_only_run(client: Client, worker: oma_worker.OmaWorker) -> Run:
    workflow_id = new_id("plan-only")
    result = await run_team(client, workflow_id, goal_input(PLAN, plan_only=True))
    return Run(workflow_id, result)


async def test_plan_only_returns_the_plan_without_running_a_task(
    client: Client, plan_only_run: Run
) -> None:
    wid, result = plan_only_run.workflow_id, plan_only_run.result
    assert (result.status, result.success, result.final_output) == ("planned", True, None)
    assert isinstance(result.plan, PlanArtifact)
    assert (result.plan.version, result.plan.goal) == (1, GOAL)
    assert graph(result.plan.tasks) == graph(result.tasks)
    assert [t.attempts for t in result.tasks] == [0, 0]
    assert list(result.agent_results) == ["coordinator"]
    assert result.total_token_usage == result.agent_results["coordinator"].token_usage
    assert await child_ids(client, wid) == [f"{wid}/coordinator/plan"]
    assert await assert_replays(client, wid) == 2


async def test_plan_only_leaves_every_task_pending(plan_only_run: Run) -> None:
    assert [t.status for t in plan_only_run.result.tasks] == [
        TaskStatus.PENDING,
        TaskStatus.PENDING,
    ]


async def test_frozen_plan_runs_the_same_graph_without_a_coordinator(
    client: Client, workflow_id: str, plan_only_run: Run
) -> None:
    plan = plan_only_run.result.plan
    assert plan is not None
    result = await run_team(
        client, workflow_id, {"team": cat_team(), "plan": plan.model_dump(mode="json")}
    )
    assert (result.status, result.final_output, result.agent_results) == ("completed", None, {})
    assert graph(result.tasks) == graph(plan_only_run.result.tasks)
    assert result.task("t2").output == WRITER_OUTPUT
    assert await child_ids(client, workflow_id) == [f"{workflow_id}/t1", f"{workflow_id}/t2"]
    await assert_replays(client, workflow_id)


async def test_edited_plan_with_an_unknown_dependency_fails_before_any_task_runs(
    client: Client, workflow_id: str, plan_only_run: Run
) -> None:
    assert plan_only_run.result.plan is not None
    plan = plan_only_run.result.plan.model_dump(mode="json")
    plan["tasks"][1]["depends_on"] = ["t9"]
    error = await fails_with(client, workflow_id, {"team": cat_team(), "plan": plan})
    assert (error.type, error.message) == (
        "INVALID_TASK_GRAPH",
        "unknown dependency: task 't2' depends on 't9'",
    )
    assert await child_ids(client, workflow_id) == []
    await assert_replays(client, workflow_id)


async def test_edited_plan_with_a_duplicate_id_and_an_unknown_dependency_names_both(
    client: Client, workflow_id: str, plan_only_run: Run
) -> None:
    assert plan_only_run.result.plan is not None
    plan = plan_only_run.result.plan.model_dump(mode="json")
    plan["tasks"][1]["id"] = "t1"
    plan["tasks"][1]["depends_on"] = ["t9"]
    error = await fails_with(client, workflow_id, {"team": cat_team(), "plan": plan})
    assert (error.type, error.message) == (
        "INVALID_TASK_GRAPH",
        "duplicate task id(s): t1; unknown dependency: task 't1' depends on 't9'",
    )
    assert await child_ids(client, workflow_id) == []


async def test_plan_of_another_version_is_refused_with_a_clear_message(
    client: Client, workflow_id: str, plan_only_run: Run
) -> None:
    assert plan_only_run.result.plan is not None
    plan = plan_only_run.result.plan.model_dump(mode="json") | {"version": 2}
    error = await fails_with(client, workflow_id, {"team": cat_team(), "plan": plan})
    assert (error.type, error.message) == (
        "INVALID_RUN_INPUT",
        "invalid TeamRun input: plan.version: unsupported plan version 2: this OMA reads "
        "version 1 (make the plan again with `oma plan`)",
    )
    await assert_replays(client, workflow_id)


# -- scheduling --------------------------------------------------------------


async def test_dependency_first_starts_the_task_with_most_dependents_first(
    client: Client, workflow_id: str
) -> None:
    # "lone" comes first in the input, but "root" unblocks two tasks
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("w", "ok")]},
            "tasks": [
                task("lone", "w"),
                task("root", "w"),
                task("middle", "w", "root"),
                task("leaf", "w", "middle"),
            ],
            "options": {"max_concurrency": 1},
        },
    )
    assert result.status == "completed"
    events = await events_of(client, workflow_id)
    assert started_task_ids(events) == ["root", "middle", "lone", "leaf"]
    await assert_replays(client, workflow_id)


def three_agents() -> dict[str, Any]:
    return {"name": "t", "agents": [scripted(n, f"{n} did it") for n in ("x", "y", "z")]}


async def test_round_robin_assigns_unassigned_tasks_in_roster_order(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": three_agents(),
            "tasks": [task("pinned", "x"), unassigned("f1"), unassigned("f2"), unassigned("f3")],
            "options": {"scheduling": "round-robin"},
        },
    )
    assert [t.assignee for t in result.tasks] == ["x", "x", "y", "z"]
    assert [t.output for t in result.tasks] == ["x did it", "x did it", "y did it", "z did it"]
    await assert_replays(client, workflow_id)


async def test_least_busy_assigns_the_agent_with_fewest_tasks_in_flight(
    client: Client, workflow_id: str
) -> None:
    # "pinned" keeps x busy, so the free tasks go to y and z first
    result = await run_team(
        client,
        workflow_id,
        {
            "team": three_agents(),
            "tasks": [task("pinned", "x"), unassigned("f1"), unassigned("f2"), unassigned("f3")],
            "options": {"scheduling": "least-busy"},
        },
    )
    assert [t.assignee for t in result.tasks] == ["x", "y", "z", "x"]
    await assert_replays(client, workflow_id)


async def test_capability_match_assigns_the_agent_whose_capabilities_fit(
    client: Client, workflow_id: str
) -> None:
    writer = scripted("writer", "prose") | {
        "capabilities": ["prose"],
        "description": "writes documentation",
    }
    coder = scripted("coder", "code") | {
        "capabilities": ["python"],
        "description": "writes code",
    }
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [writer, coder]},
            "tasks": [
                unassigned("parser", description="Fix the python parser"),
                unassigned("guide", description="Update the documentation for users"),
                unassigned("script", requires={"capabilities": ["python"]}),
            ],
            "options": {"scheduling": "capability-match"},
        },
    )
    assert [t.assignee for t in result.tasks] == ["coder", "writer", "coder"]
    await assert_replays(client, workflow_id)


@pytest.mark.parametrize(
    ("tasks", "code", "message"),
    [
        (
            [task("a", "w"), unassigned("b", requires={"capabilities": ["rust"]})],
            "NO_ELIGIBLE_AGENT",
            "no agent of team 't' is eligible: task 'b' requires {\"capabilities\":[\"rust\"]}",
        ),
        (
            [task("a", "w"), task("b", "p") | {"requires": {"backend": "llm"}}],
            "ASSIGNEE_REQUIREMENTS_MISMATCH",
            "task 'b': 'p' does not satisfy {\"backend\":\"llm\"}",
        ),
    ],
    ids=["no-eligible-agent", "assignee-mismatch"],
)
async def test_unsatisfiable_requirements_fail_the_run_before_any_task_runs(
    client: Client, workflow_id: str, tasks: list[dict[str, Any]], code: str, message: str
) -> None:
    team = {"name": "t", "agents": [scripted("w", "ok"), process("p", ECHO)]}
    error = await fails_with(client, workflow_id, {"team": team, "tasks": tasks})
    assert (error.type, error.message, error.non_retryable) == (code, message, True)
    assert await child_ids(client, workflow_id) == []
    assert await assert_replays(client, workflow_id) == 1


# -- data flow ---------------------------------------------------------------


async def test_memory_scope_all_sees_a_summary_of_the_whole_shared_memory(
    client: Client, workflow_id: str
) -> None:
    # "reader" depends on "first" only; with max_concurrency 1, "second" ran before it
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [scripted("x", "alpha result"), process("echo", ECHO)],
            },
            "tasks": [
                task("first", "x"),
                task("second", "x"),
                task("reader", "echo", "first") | {"memory_scope": "all"},
            ],
            "options": {"max_concurrency": 1},
        },
    )
    assert started_task_ids(await events_of(client, workflow_id)) == ["first", "second", "reader"]
    assert result.task("reader").output == (
        "# Task: Reader\n\ndo reader\n\n## Shared memory of the run\n\n"
        "- x/task:first:result: alpha result\n- x/task:second:result: alpha result"
    )
    await assert_replays(client, workflow_id)


def structured_record(output: Any) -> str:
    record = {
        "task_id": "answer",
        "title": "Answer",
        "assignee": "x",
        "status": "completed",
        "output": output,
    }
    return f"```json\n{json.dumps(record, indent=2)}\n```"


@pytest.mark.parametrize(
    ("payload", "received"),
    [
        ("structured", structured_record({"answer": 42})),
        ("both", '{"answer": 42}\n\n' + structured_record({"answer": 42})),
    ],
)
async def test_dependency_payload_shapes_what_the_dependent_receives(
    client: Client, workflow_id: str, payload: str, received: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [scripted("x", '{"answer": 42}'), process("echo", ECHO)],
            },
            "tasks": [
                task("answer", "x"),
                task("use", "echo", "answer") | {"dependency_payload": payload},
            ],
        },
    )
    assert result.task("use").output == (
        "# Task: Use\n\ndo use\n\n## Results of the tasks this one depends on\n\n"
        f"### Answer\n{received}"
    )
    await assert_replays(client, workflow_id)


async def test_dependency_output_over_64_kib_fails_the_dependent(
    client: Client, workflow_id: str
) -> None:
    big = "import sys; sys.stdin.read(); sys.stdout.write('x' * 70000)"
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("big", big), process("echo", ECHO)]},
            "tasks": [
                task("large", "big"),
                task("use", "echo", "large"),
                task("last", "echo", "use"),
            ],
        },
    )
    assert [t.status for t in result.tasks] == [
        TaskStatus.COMPLETED,
        TaskStatus.FAILED,
        TaskStatus.SKIPPED,
    ]
    assert len(result.task("large").output or "") == 70000
    use = result.task("use")
    assert (use.error_code, use.attempts) == ("DEPENDENCY_PAYLOAD_TOO_LARGE", 1)
    assert (use.error or "").startswith(
        "task 'use' would receive 70000 bytes from dependency 'large'; a payload may be at "
        "most 65536 bytes"
    )
    # it failed without running: no AgentRun child
    assert await child_ids(client, workflow_id) == [f"{workflow_id}/large"]
    await assert_replays(client, workflow_id)


async def test_shared_memory_query_keys_outputs_by_agent_and_task(
    client: Client, workflow_id: str
) -> None:
    await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [
                    scripted("x", "alpha"),
                    process("p", "import sys; sys.stdin.read(); sys.stdout.write('beta')"),
                ],
            },
            "tasks": [task("a", "x"), task("b", "p", "a")],
        },
    )
    memory = await client.get_workflow_handle(workflow_id).query(
        QueryName.SHARED_MEMORY, result_type=dict[str, str]
    )
    assert memory == {"x/task:a:result": "alpha", "p/task:b:result": "beta"}
    await assert_replays(client, workflow_id)


# -- retries, timeouts, the token budget --------------------------------------


def hangs_once(marker: Path, seconds: int) -> str:
    """Code for a process agent: the first run starts a child, writes its own
    pid and its child's to ``marker`` and sleeps ``seconds``; a run that finds
    ``marker`` prints ``done`` at once."""
    return (
        "import os, pathlib, subprocess, sys, time\n"
        "sys.stdin.read()\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if marker.exists():\n"
        "    sys.stdout.write('done')\n"
        "else:\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
        "    marker.write_text(f'{os.getpid()} {child.pid}')\n"
        f"    time.sleep({seconds})\n"
    )


def pids_in(marker: Path) -> list[int]:
    pids = [int(pid) for pid in marker.read_text().split()]
    assert len(pids) == 2, pids
    return pids


async def test_task_timeout_is_retried_and_the_retry_completes(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # the first attempt (a process and its child) outlives timeout_s; the second
    # finishes at once
    marker = tmp_path / "first-attempt"
    flaky = hangs_once(marker, 10)
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("flaky", flaky)]},
            "tasks": [
                task("job", "flaky") | {"timeout_s": 2, "max_retries": 1, "retry_delay_s": 0.1}
            ],
        },
    )
    job = result.task("job")
    assert (job.status, job.attempts, job.output, job.error_code) == (
        TaskStatus.COMPLETED,
        2,
        "done",
        None,
    )
    # the command ran twice: the timed-out run counts too
    assert job.backend_attempts == 2
    # the timed-out attempt was killed, its child with it, not left to sleep on
    assert [pid for pid in pids_in(marker) if alive(pid)] == []
    retries = [e for e in await events_of(client, workflow_id) if e.type == "task_retry"]
    assert [(e.task_id, e.detail) for e in retries] == [
        (
            "job",
            "attempt 2 in 0.1 s after TASK_TIMEOUT: task 'job' ran longer than its timeout_s (2 s)",
        )
    ]
    await assert_replays(client, workflow_id)


async def test_terminal_failure_is_not_retried(client: Client, workflow_id: str) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [process("broken", "import sys; sys.stdin.read(); sys.exit(1)")],
            },
            "tasks": [task("job", "broken") | {"max_retries": 3, "retry_delay_s": 0.1}],
        },
    )
    job = result.task("job")
    assert (job.status, job.attempts, job.error_code) == (TaskStatus.FAILED, 1, "PROCESS_FAILED")
    events = await events_of(client, workflow_id)
    assert [e.type for e in events if e.type == "task_retry"] == []
    await assert_replays(client, workflow_id)


async def test_token_budget_crossed_mid_run_skips_the_rest(
    client: Client, workflow_id: str
) -> None:
    # words: "a" uses 5 in + 3 out; "b" 19 in (its prompt holds a's output) + 3 out
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("w", "one two three")]},
            "tasks": [
                task("a", "w"),
                task("b", "w", "a"),
                task("c", "w", "b"),
                task("d", "w", "c"),
            ],
            "options": {"max_concurrency": 1, "max_token_budget": 20},
        },
    )
    assert (result.status, result.success, result.budget_exceeded) == ("failed", False, True)
    assert (result.error_code, result.error) == (
        "BUDGET_EXCEEDED",
        "the token budget of 20 is used up",
    )
    assert [t.status for t in result.tasks] == [
        TaskStatus.COMPLETED,
        TaskStatus.COMPLETED,
        TaskStatus.SKIPPED,
        TaskStatus.SKIPPED,
    ]
    assert result.task("c").error == "skipped: the token budget of 20 is used up"
    assert result.total_token_usage.model_dump(include={"input_tokens", "output_tokens"}) == {
        "input_tokens": 24,
        "output_tokens": 6,
    }
    events = await events_of(client, workflow_id)
    assert [(e.type, e.detail) for e in events if e.type == "budget_exceeded"] == [
        ("budget_exceeded", "30 tokens of 20")
    ]
    assert started_task_ids(events) == ["a", "b"]
    await assert_replays(client, workflow_id)


async def test_the_synthesis_starts_only_within_the_budget(client: Client, goal_run: Run) -> None:
    # the shared goal run, unbudgeted: what the plan and the tasks used
    synthesis = await child_result(client, f"{goal_run.workflow_id}/coordinator/synthesis")
    used = goal_run.result.total_token_usage
    before_synthesis = (
        used.input_tokens
        + used.output_tokens
        - synthesis.token_usage.input_tokens
        - synthesis.token_usage.output_tokens
    )

    # one token left when the tasks are done: the synthesis runs, and its
    # own usage may pass the budget without failing the finished run
    within = new_id("budget-synthesis")
    result = await run_team(
        client, within, goal_input(PLAN, SYNTHESIS, max_token_budget=before_synthesis + 1)
    )
    assert (result.status, result.final_output, result.error_code) == (
        "completed",
        SYNTHESIS,
        None,
    )

    # used up by the tasks (the researcher's turn reaches it; the writer, a
    # process agent, uses no tokens but no longer starts): no synthesis
    spent = new_id("budget-no-synthesis")
    result = await run_team(
        client, spent, goal_input(PLAN, SYNTHESIS, max_token_budget=before_synthesis)
    )
    assert (result.status, result.error_code, result.final_output) == (
        "failed",
        "BUDGET_EXCEEDED",
        None,
    )
    assert f"{spent}/coordinator/synthesis" not in await child_ids(client, spent)
    await assert_replays(client, within)
    await assert_replays(client, spent)


async def test_token_budget_lets_tasks_in_flight_settle(client: Client, workflow_id: str) -> None:
    slow = "import sys, time; sys.stdin.read(); time.sleep(2); sys.stdout.write('slow done')"
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [scripted("talker", " ".join(["word"] * 30)), process("slow", slow)],
            },
            "tasks": [
                task("talk", "talker"),
                task("wait", "slow"),
                task("after", "talker", "talk"),
            ],
            "options": {"max_token_budget": 10},
        },
    )
    assert (result.status, result.error_code, result.budget_exceeded) == (
        "failed",
        "BUDGET_EXCEEDED",
        True,
    )
    wait = result.task("wait")
    assert (wait.status, wait.output) == (TaskStatus.COMPLETED, "slow done")
    assert result.task("after").status == TaskStatus.SKIPPED
    # "wait" was in flight when the budget ran out, and settled after
    events = [(e.type, e.task_id) for e in await events_of(client, workflow_id)]
    assert events.index(("budget_exceeded", None)) < events.index(("task_complete", "wait"))
    await assert_replays(client, workflow_id)


async def test_run_timeout_fails_the_task_in_flight_and_skips_the_rest(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pids"
    sleepy = hangs_once(marker, 30)
    started = time.monotonic()
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("sleepy", sleepy)]},
            "tasks": [task("slow", "sleepy"), task("next", "sleepy", "slow")],
            "options": {"timeout_s": 1},
        },
    )
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"the run took {elapsed:.1f} s"
    assert (result.status, result.success, result.error_code) == ("failed", False, "RUN_TIMEOUT")
    assert result.error == "the run passed options.timeout_s (1 s)"
    slow = result.task("slow")
    assert (slow.status, slow.error_code) == (TaskStatus.FAILED, "RUN_TIMEOUT")
    assert result.task("next").status == TaskStatus.SKIPPED
    child = await client.get_workflow_handle(f"{workflow_id}/slow").describe()
    assert child.status == WorkflowExecutionStatus.CANCELED
    # the task's process and its child were killed, not left to sleep on
    assert [pid for pid in pids_in(marker) if alive(pid)] == []
    await assert_replays(client, workflow_id)


# -- the events query --------------------------------------------------------


def chain_input() -> dict[str, Any]:
    return {
        "team": {"name": "t", "agents": [scripted("w", "ok")]},
        "tasks": [task("a", "w"), task("b", "w", "a")],
    }


async def test_events_go_from_run_start_to_run_end_in_order(
    client: Client, workflow_id: str
) -> None:
    await run_team(client, workflow_id, chain_input())
    events = await events_of(client, workflow_id)
    assert [(e.seq, e.type, e.task_id) for e in events] == [
        (0, "run_start", None),
        (1, "task_start", "a"),
        (2, "task_complete", "a"),
        (3, "task_start", "b"),
        (4, "task_complete", "b"),
        (5, "run_end", None),
    ]
    assert events[-1].detail == "completed"
    assert [e.at for e in events] == sorted(e.at for e in events)
    await assert_replays(client, workflow_id)


async def test_events_after_a_seq_returns_only_later_events(
    client: Client, workflow_id: str
) -> None:
    await run_team(client, workflow_id, chain_input())
    later = await events_of(client, workflow_id, after_seq=3)
    assert [(e.seq, e.type, e.task_id) for e in later] == [
        (4, "task_complete", "b"),
        (5, "run_end", None),
    ]
    await assert_replays(client, workflow_id)


# -- continue-as-new ---------------------------------------------------------


async def test_long_run_continues_as_new_and_completes_every_task(
    client: Client, workflow_id: str
) -> None:
    # chain 3 runs on a process agent: its backend's 'kind' tag must survive
    # the carried input
    tasks = [
        task(f"c{c}s{s}", "p" if c == 3 else "w", *([f"c{c}s{s - 1}"] if s else []))
        for c in range(4)
        for s in range(10)
    ]
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {
            "team": {"name": "t", "agents": [scripted("w", "ok"), process("p", ECHO)]},
            "tasks": tasks,
            "options": {"history_event_limit": 100},
        },
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
    )
    first_run_id = handle.first_execution_run_id
    assert first_run_id is not None
    result = await handle.result()
    assert (result.status, len(result.tasks)) == ("completed", 40)
    assert {t.status for t in result.tasks} == {TaskStatus.COMPLETED}
    assert {t.attempts for t in result.tasks} == {1}

    first = await client.get_workflow_handle(workflow_id, run_id=first_run_id).fetch_history()
    assert first.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    latest = await client.get_workflow_handle(workflow_id).describe()
    assert latest.run_id != first_run_id

    # the events of the first run carry over, and seq goes on counting
    first_events = await client.get_workflow_handle(workflow_id, run_id=first_run_id).query(
        QueryName.EVENTS, result_type=list[RunEvent]
    )
    events = await events_of(client, workflow_id)
    assert 0 < len(first_events) < len(events)
    assert events[: len(first_events)] == first_events
    assert [e.seq for e in events] == list(range(len(events)))
    assert (events[0].type, events[-1].type) == ("run_start", "run_end")
    assert sum(e.type == "run_start" for e in events) == 1
    assert sum(e.type == "task_complete" for e in events) == 40
    assert sum(e.type == "task_start" for e in events) == 40

    replayer = plugin.replayer()
    await replayer.replay_workflow(first)
    await assert_replays(client, workflow_id)


async def test_an_abort_during_a_retry_delay_ends_the_run_at_once(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    marker = tmp_path / "first-attempt"
    handle = await start_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("flaky", hangs_once(marker, 10))]},
            "tasks": [
                task("job", "flaky") | {"timeout_s": 1, "max_retries": 1, "retry_delay_s": 120}
            ],
        },
    )

    async def retrying() -> bool | None:
        events = await events_of(client, workflow_id)
        return True if any(e.type == "task_retry" for e in events) else None

    # the first attempt timed out and the 120 s delay began
    await eventually(retrying, "the task's retry", WAIT_S)
    started = time.monotonic()
    await handle.signal(SignalName.ABORT, {"reason": "enough"})
    result = await team_result(handle)
    assert time.monotonic() - started < 15
    job = result.task("job")
    assert (job.status, job.attempts, job.error_code) == (TaskStatus.FAILED, 1, "TASK_TIMEOUT")
    assert (result.status, result.error) == ("cancelled", "aborted: enough")
    await assert_replays(client, workflow_id)
