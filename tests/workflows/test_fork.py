"""Forks: a new TeamRun keeps what a run did and runs the rest again
(docs/fork.md), on the session's dev server with real process agents whose
side effects are counted in files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from oma.client import OpenMultiAgent
from oma.client.fork import history_source, preview, start_fork
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.errors import InvalidForkError
from oma.core.schema.fork import ForkInput, ForkSpec, parse_fork_input
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.task import TaskStatus
from oma.runtime.dev_server import DevServer, temporal_binary
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import eventually
from tests.support.cli import oma, run_cmd, table_rows
from tests.support.fork import GOAL_PLAN, counted_agent, five_tasks, fork, runs
from tests.support.runs import TASK_QUEUE, assert_replays, run_team, start_team, task, team_result

pytestmark = pytest.mark.usefixtures("worker")


def statuses(result: TeamRunResult) -> dict[str, str]:
    return {t.id: t.status.value for t in result.tasks}


async def failed_source(client: Client, workflow_id: str, cwd: Path) -> TeamRunResult:
    """The 5-task run whose 4th task fails."""
    team = {"name": "five", "agents": [counted_agent(cwd)]}
    result = await run_team(client, workflow_id, {"team": team, "tasks": five_tasks()})
    assert statuses(result) == {
        "t1": "completed",
        "t2": "completed",
        "t3": "completed",
        "t4": "failed",
        "t5": "skipped",
    }
    assert sorted(runs(cwd)) == ["t1", "t2", "t3", "t4"]
    return result


async def test_a_fork_runs_the_failed_task_and_its_dependents_and_keeps_the_rest(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    source_history = await client.get_workflow_handle(workflow_id).fetch_history()
    (tmp_path / "ok").touch()
    forked = await fork(client, f"{workflow_id}-fork", {"run_id": workflow_id})
    assert forked.status == "completed", forked
    assert forked.forked_from == workflow_id
    # the first three ran once (in the source), t4 twice, t5 once (in the fork)
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5"]
    kept = {t.id: t.reused_from for t in forked.tasks if t.reused_from is not None}
    assert {k: (r.run_id, r.task_id) for k, r in kept.items()} == {
        "t1": (workflow_id, "t1"),
        "t2": (workflow_id, "t2"),
        "t3": (workflow_id, "t3"),
    }
    assert [t.output for t in forked.tasks] == [
        "done t1 after -\n",
        "done t2 after t1\n",
        "done t3 after t1\n",
        "done t4 after t2,t3\n",
        "done t5 after t4\n",
    ]
    # the source is untouched, and both still replay
    again = await client.get_workflow_handle(workflow_id).fetch_history()
    assert again.events == source_history.events
    await assert_replays(client, workflow_id)
    await assert_replays(client, f"{workflow_id}-fork")


async def test_a_fork_from_a_task_reruns_it_and_everything_downstream(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    (tmp_path / "ok").touch()
    team = {"name": "five", "agents": [counted_agent(tmp_path)]}
    source = await run_team(client, workflow_id, {"team": team, "tasks": five_tasks()})
    assert source.success
    forked = await fork(client, f"{workflow_id}-f", {"run_id": workflow_id, "rerun": ["t3"]})
    assert forked.status == "completed"
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t3", "t4", "t4", "t5", "t5"]
    assert [t.id for t in forked.tasks if t.reused_from is not None] == ["t1", "t2"]


async def test_a_fork_of_a_fork_keeps_each_output_from_the_run_that_made_it(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    (tmp_path / "ok").touch()
    first = await fork(client, f"{workflow_id}-f", {"run_id": workflow_id})
    assert first.status == "completed", first
    # the first fork's own input is a fork's: its team and tasks are what it read
    second = await fork(
        client, f"{workflow_id}-ff", {"run_id": f"{workflow_id}-f", "rerun": ["t5"]}
    )
    assert second.status == "completed", second
    assert second.forked_from == f"{workflow_id}-f"
    origins = {
        t.id: (t.reused_from.run_id, t.reused_from.task_id) for t in second.tasks if t.reused_from
    }
    assert origins == {
        "t1": (workflow_id, "t1"),
        "t2": (workflow_id, "t2"),
        "t3": (workflow_id, "t3"),
        "t4": (f"{workflow_id}-f", "t4"),
    }
    assert second.task("t5").output == "done t5 after t4\n"
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5", "t5"]
    await assert_replays(client, f"{workflow_id}-ff")
    # the same out of the first fork's exported history
    exported = tmp_path / "fork.json"
    exported.write_text(
        (await client.get_workflow_handle(f"{workflow_id}-f").fetch_history()).to_json()
    )
    found, source = await history_source(exported, client.data_converter)
    assert found == f"{workflow_id}-f"
    assert [t["id"] for t in source.input["tasks"]] == ["t1", "t2", "t3", "t4", "t5"]
    assert "fork" not in source.input and source.input["tasks"] == five_tasks()
    assert source.result.forked_from == workflow_id


async def test_a_run_near_its_size_budget_can_be_forked(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # 5 descriptions of 270 kB: the run fits its budget (1.5 MiB), but its
    # fork's read carried them twice (input and task states): over 2 MB
    team = {"name": "five", "agents": [counted_agent(tmp_path)]}
    tasks = five_tasks()
    for spec in tasks:
        spec["description"] += " " + "y" * 270_000
    source = await run_team(client, workflow_id, {"team": team, "tasks": tasks})
    assert statuses(source)["t4"] == "failed"
    (tmp_path / "ok").touch()
    forked = await fork(client, f"{workflow_id}-f", {"run_id": workflow_id})
    assert forked.status == "completed", forked.error
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5"]
    assert forked.task("t5").output == "done t5 after t4\n"
    assert forked.task("t4").description == tasks[3]["description"]  # the state shows it
    await assert_replays(client, f"{workflow_id}-f")
    # inline, out of its exported history: the task states' descriptions are left out
    exported = tmp_path / "source.json"
    exported.write_text((await client.get_workflow_handle(workflow_id).fetch_history()).to_json())
    _, inline = await history_source(exported, client.data_converter)
    again = await fork(
        client,
        f"{workflow_id}-h",
        {"run_id": workflow_id, "source": inline.model_dump(mode="json")},
    )
    assert again.status == "completed", again.error
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t4", "t5", "t5"]
    # one that cannot fit inline is refused before it starts, naming the way out
    inline.result.tasks[0].output = "z" * 600_000
    too_big = parse_fork_input(
        {"fork": {"run_id": workflow_id, "source": inline.model_dump(mode="json")}}
    )
    with pytest.raises(InvalidForkError, match="fork it by its workflow id"):
        await start_fork(client, too_big, id=f"{workflow_id}-big", task_queue=TASK_QUEUE)


async def test_an_abort_while_the_fork_reads_its_source_stops_it_before_any_task_runs(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    (tmp_path / "ok").touch()
    # signal-with-start: the abort is in the fork's first workflow task, before its read
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {"fork": {"run_id": workflow_id}},
        id=f"{workflow_id}-f",
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
        start_signal=SignalName.ABORT,
        start_signal_args=[{"reason": "not now"}],
    )
    forked = await team_result(handle)
    assert forked.status == "cancelled"
    assert forked.error_code == "ABORTED"
    assert statuses(forked)["t4"] == statuses(forked)["t5"] == "skipped"
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4"]  # nothing ran again
    events = await handle.query(QueryName.EVENTS, result_type=list[RunEvent])
    assert [e.detail for e in events if e.type == "abort"] == ["aborted: not now"]
    await assert_replays(client, handle.id)


async def test_an_unknown_task_fails_the_fork_before_anything_runs(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    handle = await start_team(
        client, f"{workflow_id}-f", {"fork": {"run_id": workflow_id, "rerun": ["t33"]}}
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "INVALID_FORK"
    assert "has no task 't33' (did you mean 't3'?)" in cause.message
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4"]


async def test_a_task_to_run_again_on_a_missing_agent_fails_the_fork_naming_it(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    team = {"name": "five", "agents": [counted_agent(tmp_path, name="other")]}
    handle = await start_team(
        client, f"{workflow_id}-f", {"fork": {"run_id": workflow_id}, "team": team}
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "INVALID_FORK"
    assert "task 't4' runs again on agent 'worker', which the fork's team does not have" in (
        cause.message
    )
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4"]


# -- a goal run, against the local Anthropic API ------------------------------------


def goal_team(writer_prompt: str) -> dict[str, Any]:
    return {
        "name": "writers",
        "agents": [
            {"name": "researcher", "provider": "anthropic", "system_prompt": "Research well."},
            {"name": "writer", "provider": "anthropic", "system_prompt": writer_prompt},
        ],
    }


async def test_a_fork_of_a_goal_run_keeps_its_plan_and_runs_the_synthesis_again(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    for text in ("facts: the sky is blue", "draft one", "polished one"):
        anthropic_server.reply_text(text)
    source = await run_team(
        client,
        workflow_id,
        {
            "team": goal_team("Write well."),
            "goal": "Write about the sky.",
            "coordinator": {"provider": "scripted", "script": [GOAL_PLAN, "final answer"]},
        },
    )
    assert source.status == "completed", source
    anthropic_server.reset()
    for text in ("draft two", "polished two"):
        anthropic_server.reply_text(text)
    fork_id = f"{workflow_id}-f"
    forked = await fork(
        client, fork_id, {"run_id": workflow_id, "rerun": ["t2"]}, team=goal_team("Write better.")
    )
    assert forked.status == "completed", forked
    assert [(t.id, t.output, t.reused_from is not None) for t in forked.tasks] == [
        ("t1", "facts: the sky is blue", True),
        ("t2", "draft two", False),
        ("t3", "polished two", False),
    ]
    sent = [json.dumps(r.body) for r in anthropic_server.requests]
    assert len(sent) == 2  # the research did not run again
    assert all("Write better." in body for body in sent)
    assert "facts: the sky is blue" in sent[0]  # the kept output, read back
    assert forked.final_output == "final answer"
    synthesis = await client.get_workflow_handle(f"{fork_id}/coordinator/synthesis").describe()
    assert synthesis.status is not None
    with pytest.raises(RPCError):  # planned once, in the source
        await client.get_workflow_handle(f"{fork_id}/coordinator/plan").describe()
    await assert_replays(client, fork_id)


# -- a run still running ------------------------------------------------------------


async def test_a_fork_of_a_running_run_keeps_what_settled(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    waits = "import pathlib, time\nwhile not pathlib.Path('go').exists(): time.sleep(0.05)\n"
    team = {
        "name": "slow",
        "agents": [
            counted_agent(tmp_path),
            {
                "name": "waiter",
                "backend": {
                    "kind": "process",
                    "command": "python3",
                    "args": ["-c", waits],
                    "cwd": str(tmp_path),
                },
            },
        ],
    }
    tasks = [task("t1", "worker", description="TASK=t1"), task("t2", "waiter", "t1")]
    source = await start_team(client, workflow_id, {"team": team, "tasks": tasks})

    async def t1_done() -> bool | None:
        state = await source.query(QueryName.STATE, result_type=TeamRunResult)
        return True if state.task("t1").status == TaskStatus.COMPLETED else None

    await eventually(t1_done, "t1 to complete", 30)
    handle = await start_team(client, f"{workflow_id}-f", {"fork": {"run_id": workflow_id}})

    async def fork_read_its_source() -> bool | None:
        state = await handle.query(QueryName.STATE, result_type=TeamRunResult)
        return True if state.tasks and state.task("t1").reused_from is not None else None

    await eventually(fork_read_its_source, "the fork to read its source", 30)
    (tmp_path / "go").touch()
    forked, first = await team_result(handle), await team_result(source)
    assert (forked.status, first.status) == ("completed", "completed")
    assert [t.reused_from is not None for t in forked.tasks] == [True, False]
    assert runs(tmp_path) == ["t1"]


async def test_a_fork_under_its_source_workflow_id_reads_the_execution_it_names(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    """What oma acp's /retry does: the fork takes its source's workflow id
    (a new execution of it), so it reads its source by Temporal run id: by
    workflow id alone it would read itself."""
    await failed_source(client, workflow_id, tmp_path)
    source = await client.get_workflow_handle(workflow_id).describe()
    source_history = await client.get_workflow_handle(
        workflow_id, run_id=source.run_id
    ).fetch_history()
    (tmp_path / "ok").touch()
    spec = ForkSpec(run_id=workflow_id, temporal_run_id=source.run_id)
    checked = await preview(client, ForkInput(fork=spec), workflow_id)
    assert (checked.reused, checked.rerun) == (["t1", "t2", "t3"], ["t4", "t5"])
    handle = await start_fork(client, ForkInput(fork=spec), id=workflow_id, task_queue=TASK_QUEUE)
    assert handle.first_execution_run_id != source.run_id
    forked = await team_result(handle)
    assert forked.status == "completed", forked
    assert forked.forked_from == workflow_id
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5"]
    assert forked.task("t4").output == "done t4 after t2,t3\n"
    # again, from the fork (a fork of the same workflow id), the execution
    # to read left to start_fork: the latest, before the new one starts
    again = ForkSpec(run_id=workflow_id, rerun=["t5"])
    handle = await start_fork(client, ForkInput(fork=again), id=workflow_id, task_queue=TASK_QUEUE)
    twice = await team_result(handle)
    assert twice.status == "completed", twice
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5", "t5"]
    assert [t.id for t in twice.tasks if t.reused_from is not None] == ["t1", "t2", "t3", "t4"]
    # the source's execution is untouched
    unchanged = await client.get_workflow_handle(workflow_id, run_id=source.run_id).fetch_history()
    assert unchanged.events == source_history.events
    # a run id that is not one of the workflow id's is refused before anything starts
    wrong = ForkSpec(run_id=workflow_id, temporal_run_id="00000000-0000-0000-0000-000000000000")
    with pytest.raises(InvalidForkError, match="no run"):
        await preview(client, ForkInput(fork=wrong), f"{workflow_id}-x")


# -- the stock temporal CLI, search attributes ---------------------------------------


async def test_the_stock_cli_starts_a_fork_findable_by_its_source(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    (tmp_path / "ok").touch()
    fork_id = f"{workflow_id}-stock"
    started = await run_cmd(
        temporal_binary(),
        "workflow",
        "start",
        "--address",
        dev_server.address,
        "--type",
        "TeamRun",
        "--task-queue",
        TASK_QUEUE,
        "--workflow-id",
        fork_id,
        "--input",
        json.dumps({"fork": {"run_id": workflow_id, "rerun": ["t4"]}}),
    )
    assert started.returncode == 0, started.stderr
    forked = await team_result(client.get_workflow_handle(fork_id, result_type=TeamRunResult))
    assert forked.status == "completed"
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5"]
    described = await client.get_workflow_handle(fork_id).describe()
    assert described.search_attributes.get("OmaForkedFrom") == [workflow_id]
    assert described.search_attributes.get("OmaStatus") == ["completed"]

    async def listed() -> list[str] | None:
        found = [w.id async for w in client.list_workflows(f'OmaForkedFrom="{workflow_id}"')]
        return found or None

    assert set(await eventually(listed, "the fork in the list", 10)) == {fork_id}


# -- oma fork, oma show --------------------------------------------------------------


async def test_oma_fork_sets_a_task_warns_of_a_dropped_agent_and_shows_what_it_reused(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    (tmp_path / "ok").touch()
    team = {"name": "two", "agents": [counted_agent(tmp_path), counted_agent(tmp_path, "b")]}
    tasks = five_tasks()
    tasks[2]["assignee"] = "b"  # t3 on b
    source = await run_team(client, workflow_id, {"team": team, "tasks": tasks})
    assert source.success
    new_team = tmp_path / "team.json"
    new_team.write_text(json.dumps({"team": {"name": "two", "agents": [counted_agent(tmp_path)]}}))
    fork_id = f"{workflow_id}-cli"
    proc = await oma(
        dev_server,
        "fork",
        workflow_id,
        "--no-worker",
        "--workflow-id",
        fork_id,
        "--team",
        str(new_team),
        "--set",
        "t2.description=TASK=t2 again",
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "warning: agent 'b' is not in the fork's team: its task(s) t3 keep their outputs from "
        f"run '{workflow_id}' and do not run again" in proc.stderr
    )
    assert f"fork of {workflow_id}: keeps t1, t3; runs t2, t4, t5 again" in proc.stderr
    rows = {row[0]: row for row in table_rows(proc.stdout)}
    assert (rows["t1"][3], rows["t3"][3], rows["t2"][3]) == ("reused", "reused", "completed")
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t2", "t3", "t4", "t4", "t5", "t5"]
    events = await client.get_workflow_handle(fork_id).query(
        QueryName.EVENTS, result_type=list[RunEvent]
    )
    assert [e.detail for e in events if e.type == "warning"] == [
        f"agent 'b' is not in the fork's team: its task(s) t3 keep their outputs from run "
        f"'{workflow_id}' and do not run again"
    ]
    shown = await oma(dev_server, "show", fork_id, "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["forked_from"] == workflow_id
    reused = {t["id"]: (t["reused_from"], t["output"]) for t in view["tasks"] if t["reused_from"]}
    execution = (await client.get_workflow_handle(workflow_id).describe()).run_id
    keys = {task_id: origin.pop("content_key") for task_id, (origin, _) in reused.items()}
    assert all(re.fullmatch("[0-9a-f]{64}", key) for key in keys.values()), keys
    assert reused == {
        "t1": (
            {"run_id": workflow_id, "task_id": "t1", "temporal_run_id": execution},
            "done t1 after -\n",
        ),
        "t3": (
            {"run_id": workflow_id, "task_id": "t3", "temporal_run_id": execution},
            "done t3 after t1\n",
        ),
    }
    terminal = await oma(dev_server, "show", fork_id)
    assert f"fork of {workflow_id}" in terminal.stdout
    assert "reused" in terminal.stdout
    page = tmp_path / "fork.html"
    drawn = await oma(dev_server, "show", fork_id, "--html", str(page))
    assert drawn.returncode == 0, drawn.stderr
    assert f"reused from: {workflow_id} (task t1)" in page.read_text()


async def test_the_python_client_forks_a_run(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    (tmp_path / "ok").touch()
    oma_client = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    forked = await oma_client.fork(workflow_id, rerun=["t2"], workflow_id=f"{workflow_id}-py")
    assert forked.status == "completed"
    assert [t.id for t in forked.tasks if t.reused_from is not None] == ["t1", "t3"]
    assert forked.task("t3").output == "done t3 after t1\n"  # read back by the client
    with pytest.raises(InvalidForkError, match="has no task 'x'"):
        await oma_client.fork(workflow_id, rerun=["x"])


async def test_oma_fork_refuses_an_unknown_task_before_anything_starts(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    proc = await oma(dev_server, "fork", workflow_id, "--no-worker", "--from", "t9")
    assert proc.returncode == 2
    assert f"INVALID_FORK: run '{workflow_id}' has no task 't9'" in proc.stderr
    for flag, text in [("--team", "null"), ("--team", '{"team": null}'), ("--options", "null")]:
        given = tmp_path / "given.json"
        given.write_text(text)
        proc = await oma(dev_server, "fork", workflow_id, "--no-worker", flag, str(given))
        assert proc.returncode == 2, proc.stderr
        assert f"{given} holds no {flag[2:]}: a JSON object" in proc.stderr
    proc = await oma(
        dev_server, "fork", workflow_id, "--no-worker", "--models", "live", "--on-miss", "fallback"
    )
    assert proc.returncode == 2
    assert "--on-miss says what a recorded turn's miss does: it needs --models recorded" in (
        proc.stderr
    )
    listed = [w.id async for w in client.list_workflows(f'OmaForkedFrom="{workflow_id}"')]
    assert listed == []


async def test_oma_fork_of_an_exported_history(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    exported = await run_cmd(
        temporal_binary(),
        "workflow",
        "show",
        "--address",
        dev_server.address,
        "--workflow-id",
        workflow_id,
        "--output",
        "json",
    )
    assert exported.returncode == 0, exported.stderr
    history = tmp_path / "source.json"
    history.write_text(exported.stdout)
    (tmp_path / "ok").touch()
    proc = await oma(dev_server, "fork", "--history", str(history), "--no-worker", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["forked_from"] == workflow_id
    assert [t["reused_from"] is not None for t in result["tasks"]] == [True] * 3 + [False] * 2
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4", "t4", "t5"]


async def test_oma_fork_dry_run_says_what_it_would_keep_and_why_and_starts_nothing(
    client: Client, workflow_id: str, tmp_path: Path, dev_server: DevServer
) -> None:
    await failed_source(client, workflow_id, tmp_path)
    proc = await oma(dev_server, "fork", workflow_id, "--dry-run", "--no-worker", "--from", "t3")
    assert proc.returncode == 0, proc.stderr
    decisions = {row[0]: (row[1], row[2]) for row in table_rows(proc.stdout)}
    assert decisions == {
        "t1": ("reused", f"kept from {workflow_id} (task t1)"),
        "t2": ("reused", f"kept from {workflow_id} (task t2)"),
        "t3": ("runs again", "named to run again"),
        "t4": ("runs again", f"failed in run {workflow_id}"),
        "t5": ("runs again", f"skipped in run {workflow_id}"),
    }
    listed = [w.id async for w in client.list_workflows(f'OmaForkedFrom="{workflow_id}"')]
    assert listed == []
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4"]
