"""A reused or kept result is the one its inputs made (docs/fork.md): a kept
task's content key (and a kept plan's) is carried from the run that made it,
never recomputed from a later run's input, and every reference to another run
names its execution. On the session's dev server, with process agents whose
output is their system prompt, so an output made under other inputs shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from oma.client.runs import read_outputs
from oma.core.schema.results import TeamRunResult
from oma.runtime.dev_server import DevServer
from tests.support.approvals import WAIT_S, eventually, result_within, start_run
from tests.support.cli import oma, table_rows
from tests.support.fork import GOAL_PLAN, fork
from tests.support.runs import assert_replays, run_team, start_team, task, team_result

pytestmark = pytest.mark.usefixtures("worker")

SAYS_ITS_PROMPT = "import sys; print(sys.stdin.read().splitlines()[0])"
"""A process agent's code: it answers with the first line of its prompt (its system prompt)."""


def prompted(name: str, system_prompt: str) -> dict[str, Any]:
    return {
        "name": name,
        "system_prompt": system_prompt,
        "backend": {"kind": "process", "command": "python3", "args": ["-c", SAYS_ITS_PROMPT]},
    }


def write_review(writer_prompt: str) -> dict[str, Any]:
    """write (writer) -> review (reviewer)."""
    team = {
        "name": "wr",
        "agents": [prompted("writer", writer_prompt), prompted("reviewer", "You review.")],
    }
    return {"team": team, "tasks": [task("write", "writer"), task("review", "reviewer", "write")]}


async def test_a_run_reusing_a_fork_made_with_another_team_runs_what_the_fork_kept_again(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    a = await run_team(client, workflow_id, write_review("You are W1."))
    assert a.task("write").output == "You are W1.\n"
    b_id = f"{workflow_id}-b"
    b = await fork(
        client, b_id, {"run_id": workflow_id, "rerun": ["review"]}, team=write_review("W2")["team"]
    )
    assert b.task("write").output == "You are W1.\n"  # kept: made under A's prompt
    assert b.task("write").reused_from is not None
    c_input = write_review("W2")
    changed = tmp_path / "c.json"
    changed.write_text(json.dumps(c_input))
    dry = await oma(dev_server, "run", str(changed), "--reuse", b_id, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    decisions = {row[0]: (row[1], row[2]) for row in table_rows(dry.stdout)}
    assert decisions["write"][0] == "runs again", dry.stdout
    assert workflow_id in decisions["write"][1]  # the run where its output was made
    assert decisions["review"] == ("runs again", "depends on write, which runs again")
    c_id = f"{workflow_id}-c"
    c = await run_team(client, c_id, {**c_input, "options": {"reuse": {"from": b_id}}})
    assert c.success, c
    assert c.task("write").reused_from is None
    assert c.task("write").output == "W2\n"
    # a run with A's team reuses B's kept task: made under A's prompt, its key came along
    d = await run_team(
        client,
        f"{workflow_id}-d",
        {**write_review("You are W1."), "options": {"reuse": {"from": b_id}}},
    )
    reused = d.task("write").reused_from
    assert reused is not None and (reused.run_id, reused.task_id) == (workflow_id, "write")
    await assert_replays(client, c_id)


def goal_input(writer_prompt: str) -> dict[str, Any]:
    agents = [
        {"name": "researcher", "provider": "scripted", "script": ["facts"]},
        {"name": "writer", "provider": "scripted", "system_prompt": writer_prompt, "script": ["d"]},
    ]
    return {
        "team": {"name": "writers", "agents": agents},
        "goal": "Write about the sky.",
        "coordinator": {"provider": "scripted", "script": [GOAL_PLAN, "final answer"]},
    }


async def planned(client: Client, run_id: str) -> bool:
    """Whether the run's coordinator planned (its plan step's AgentRun exists)."""
    try:
        await client.get_workflow_handle(f"{run_id}/coordinator/plan").describe()
    except RPCError:
        return False
    return True


async def test_a_goal_run_reusing_a_fork_made_with_another_team_plans_anew(
    client: Client, workflow_id: str
) -> None:
    a = await run_team(client, workflow_id, goal_input("Write well."))
    assert a.status == "completed", a
    b_id = f"{workflow_id}-b"
    changed = goal_input("Write better.")
    b = await fork(client, b_id, {"run_id": workflow_id, "rerun": ["t2"]}, team=changed["team"])
    assert b.status == "completed", b
    assert not await planned(client, b_id)  # B keeps the plan A's coordinator made
    c_id = f"{workflow_id}-c"
    c = await run_team(client, c_id, {**changed, "options": {"reuse": {"from": b_id}}})
    assert c.status == "completed", c
    assert await planned(client, c_id)  # B's plan was made for another team
    assert [t.id for t in c.tasks if t.reused_from is not None] == []
    # the same goal, team and coordinator as A's: it reuses the plan B kept, and its tasks
    d_id = f"{workflow_id}-d"
    d = await run_team(
        client, d_id, {**goal_input("Write well."), "options": {"reuse": {"from": b_id}}}
    )
    assert d.status == "completed", d
    assert not await planned(client, d_id)
    assert [t.id for t in d.tasks if t.reused_from is not None] == ["t1"]
    await assert_replays(client, c_id)


async def test_a_goal_run_reusing_a_fork_with_a_hand_edited_plan_plans_anew(
    client: Client, workflow_id: str
) -> None:
    a = await run_team(client, workflow_id, goal_input("Write well."))
    assert a.status == "completed", a
    b_id = f"{workflow_id}-b"
    edit = {"t2": {"description": "draft it in verse"}}
    b = await fork(client, b_id, {"run_id": workflow_id, "edit": edit})
    assert b.status == "completed", b
    assert b.plan is not None and b.plan.tasks[1].description == "draft it in verse"
    c_id = f"{workflow_id}-c"
    c = await run_team(
        client, c_id, {**goal_input("Write well."), "options": {"reuse": {"from": b_id}}}
    )
    assert c.status == "completed", c
    assert await planned(client, c_id)  # nobody planned B's plan from this goal and team
    assert c.plan is not None and c.plan.tasks[1].description == "draft it"


ANSWER = "import pathlib; print(pathlib.Path('answer').read_text())"
"""A process agent's code: it answers with the file ``answer`` in its cwd."""


def answers(cwd: Path) -> dict[str, Any]:
    """t1 answers the file ``answer``; t2 fails until a file ``ok`` exists."""
    agents = [
        {
            "name": "a",
            "backend": {
                "kind": "process",
                "command": "python3",
                "args": ["-c", ANSWER],
                "cwd": str(cwd),
            },
        },
        {
            "name": "b",
            "backend": {
                "kind": "process",
                "command": "python3",
                "args": ["-c", "import pathlib; print(pathlib.Path('ok').read_text())"],
                "cwd": str(cwd),
            },
        },
    ]
    return {"team": {"name": "ab", "agents": agents}, "tasks": [task("t1", "a"), task("t2", "b")]}


async def test_a_forks_short_kept_output_is_its_sources_after_the_source_id_is_reused(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    (tmp_path / "answer").write_text("first")
    first = await run_team(client, workflow_id, answers(tmp_path))
    assert first.task("t1").output == "first\n" and first.task("t2").status == "failed"
    (tmp_path / "ok").write_text("fine")
    f_id = f"{workflow_id}-f"
    f = await fork(client, f_id, {"run_id": workflow_id})
    assert f.success, f
    (tmp_path / "answer").write_text("second")
    again = await run_team(client, workflow_id, answers(tmp_path))  # the id used again
    assert again.task("t1").output == "second\n"
    result = await team_result(client.get_workflow_handle(f_id, result_type=TeamRunResult))
    await read_outputs(client, result)  # as oma.client, oma show and oma acp read it
    assert result.task("t1").output == "first\n"


async def test_a_run_under_its_references_workflow_id_reuses_its_predecessor(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    (tmp_path / "answer").write_text("daily")
    (tmp_path / "ok").write_text("fine")
    job = tmp_path / "job.json"
    job.write_text(json.dumps(answers(tmp_path)))
    first = await run_team(client, workflow_id, answers(tmp_path))
    assert first.success, first
    args = ("run", str(job), "--no-worker", "--workflow-id", workflow_id, "--reuse", workflow_id)
    dry = await oma(dev_server, *args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [row[1] for row in table_rows(dry.stdout)] == ["reused", "reused"], dry.stdout
    proc = await oma(dev_server, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [t["reused_from"]["run_id"] for t in result["tasks"]] == [workflow_id, workflow_id]
    # started as the stock CLI starts it, naming no execution: the newest one before its own
    third = await run_team(
        client, workflow_id, {**answers(tmp_path), "options": {"reuse": {"from": workflow_id}}}
    )
    assert [t.reused_from is not None for t in third.tasks] == [True, True], third


def deployer(cwd: Path, *script: Any) -> dict[str, Any]:
    agent = {
        "name": "deployer",
        "provider": "scripted",
        "script": list(script),
        "tools": ["tests.support.tools:deploy"],
        "cwd": str(cwd),
    }
    return {"team": {"name": "t", "agents": [agent]}, "tasks": [task("d", "deployer")]}


async def test_a_reused_consequential_call_is_read_from_the_execution_that_made_it(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    deploy = {"type": "tool_use", "id": "u1", "name": "deploy", "input": {"environment": "prod"}}
    deployed = deployer(tmp_path, [deploy], "ok")  # a short output: it travels inline
    run = await start_run(client, workflow_id, deployed)
    await run.decide(await run.request("tool-d-1"))
    assert (await result_within(run, WAIT_S)).success
    first = (await client.get_workflow_handle(workflow_id).describe()).run_id
    # the id used again, by a run whose task d calls nothing
    assert (await run_team(client, workflow_id, deployer(tmp_path, "nothing to do"))).success
    reuse = {"from": workflow_id, "temporal_run_id": first}
    again = await run_team(
        client, f"{workflow_id}-again", {**deployed, "options": {"reuse": reuse}}
    )
    reused = again.task("d")
    assert reused.reused_from is not None and reused.reused_from.temporal_run_id == first
    assert reused.reused_consequential == ["deploy"]


async def test_a_fork_whose_inline_source_has_a_cycle_fails_invalid_task_graph(
    client: Client, workflow_id: str
) -> None:
    team = {"name": "t", "agents": [{"name": "a", "provider": "scripted", "script": ["x"]}]}
    looped = [task("t1", "a", "t2"), task("t2", "a", "t1")]
    source = {
        "input": {"team": team, "tasks": looped},
        "result": {"success": False, "status": "failed", "tasks": []},
    }
    handle = await start_team(client, workflow_id, {"fork": {"run_id": "x", "source": source}})
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_TASK_GRAPH"
    assert cause.message == (
        "the task graph of run 'x' is invalid: dependency cycle: t1 -> t2 -> t1"
    )


async def test_a_fork_reading_a_kept_output_whose_run_is_gone_says_so(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # t1 -> t2, t3 fails: the fork F1 keeps t1 and t2 by reference (nothing it runs reads them)
    (tmp_path / "answer").write_text("x" * 300)
    run_input = answers(tmp_path)
    run_input["tasks"] = [task("t1", "a"), task("t2", "a", "t1"), task("t3", "b")]
    source = await run_team(client, workflow_id, run_input)
    assert source.task("t3").status == "failed"
    # the dev server deletes a closed run some 30 s after it is asked: ask now, fork meanwhile
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=f"{workflow_id}/t1"),
        )
    )
    (tmp_path / "ok").write_text("fine")
    f1 = await fork(client, f"{workflow_id}-f1", {"run_id": workflow_id})
    assert f1.success and f1.task("t1").output_ref == f"{workflow_id}/t1", f1
    await eventually(lambda: gone(client, f"{workflow_id}/t1"), "t1's AgentRun deleted", 90)
    f2 = await fork(client, f"{workflow_id}-f2", {"run_id": f"{workflow_id}-f1", "rerun": ["t2"]})
    t2 = f2.task("t2")
    assert t2.error_code == "DEPENDENCY_OUTPUT_UNAVAILABLE", t2
    assert t2.error is not None
    assert f"in the result of {workflow_id}/t1 (execution " in t2.error
    assert f"made in run {workflow_id}); it could not be read back: that run is gone" in t2.error


async def gone(client: Client, workflow_id: str) -> bool | None:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return True
    return None
