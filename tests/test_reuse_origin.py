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
from temporalio.client import Client
from temporalio.service import RPCError

from oma.client.runs import read_outputs
from oma.core.schema.results import TeamRunResult
from oma.runtime.dev_server import DevServer
from tests._runs import assert_replays, run_team, task, team_result
from tests.test_cli_control import table_rows
from tests.test_fork import GOAL_PLAN, fork, oma

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
