"""Reuse by content on the session's dev server (docs/fork.md): a run with
``options.reuse`` keeps the outputs of its reference run's tasks that would
come out the same, against the local Anthropic API (the requests it gets are
the tasks that ran)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.runtime.dev_server import DevServer
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import WAIT_S, result_within, start_run
from tests.support.cli import oma, table_rows
from tests.support.fork import counted_agent, five_tasks, runs
from tests.support.runs import (
    TASK_QUEUE,
    assert_replays,
    run_team,
    start_team,
    task,
    team_result,
)
from tests.support.terminal import Terminal

pytestmark = pytest.mark.usefixtures("worker")


def team_input(b_prompt: str) -> dict[str, Any]:
    """a: t1, t3, t4, t5; b: t2. t1 -> (t2, t3) -> t4; t5 alone."""
    agents = [
        {"name": "a", "provider": "anthropic", "system_prompt": "You are A."},
        {"name": "b", "provider": "anthropic", "system_prompt": b_prompt},
    ]
    tasks = [
        task("t1", "a"),
        task("t2", "b", "t1"),
        task("t3", "a", "t1"),
        task("t4", "a", "t2", "t3"),
        task("t5", "a"),
    ]
    return {"team": {"name": "ab", "agents": agents}, "tasks": tasks}


def _task_of(body: Any) -> str:
    """The task a request to the model server was for (its prompt's ``do tN``)."""
    text = json.dumps(body["messages"][-1])
    return next(f"t{n}" for n in range(9, 0, -1) if f"do t{n}" in text)


async def test_a_changed_prompt_reruns_exactly_that_agents_tasks_and_their_dependents(
    client: Client,
    workflow_id: str,
    tmp_path: Path,
    dev_server: DevServer,
    anthropic_server: AnthropicServer,
) -> None:
    source = await run_team(client, workflow_id, team_input("You are B."))
    assert source.success
    assert len(anthropic_server.requests) == 5
    anthropic_server.reset()
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(team_input("You are B, and brief.")))
    dry = await oma(dev_server, "run", str(changed), "--reuse", workflow_id, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    decisions = {row[0]: (row[1], row[2]) for row in table_rows(dry.stdout)}
    assert decisions == {
        "t1": ("reused", f"same content as in {workflow_id} (task t1)"),
        "t2": ("runs again", "agent 'b' changed: system_prompt"),
        "t3": ("reused", f"same content as in {workflow_id} (task t3)"),
        "t4": ("runs again", "depends on t2, which runs again"),
        "t5": ("reused", f"same content as in {workflow_id} (task t5)"),
    }
    assert anthropic_server.requests == []  # the dry run ran nothing
    assert "estimated cost of those" in dry.stdout
    again = await run_team(
        client,
        f"{workflow_id}-again",
        {**team_input("You are B, and brief."), "options": {"reuse": {"from": workflow_id}}},
    )
    assert again.status == "completed", again
    assert sorted(_task_of(r.body) for r in anthropic_server.requests) == ["t2", "t4"]
    assert [t.id for t in again.tasks if t.reused_from is not None] == ["t1", "t3", "t5"]
    assert again.total_token_usage.input_tokens == 2 * 10  # what this run spent
    await assert_replays(client, f"{workflow_id}-again")
    # the views say the reused rows' figures are not in the run's totals
    shown = await oma(dev_server, "show", f"{workflow_id}-again")
    assert shown.returncode == 0, shown.stderr
    note = f"3 task(s) reused from {workflow_id}, not run here: their tokens and cost are not in"
    assert note in " ".join(shown.stdout.split())
    # oma run --reuse, on a terminal, counts the reused tasks as settled from the start
    term = Terminal(
        dev_server,
        "run",
        str(changed),
        "--reuse",
        workflow_id,
        "--workflow-id",
        f"{workflow_id}-cli",
    )
    try:
        assert await term.exit_code() == 0, term.screen
    finally:
        term.kill()
    settled = re.findall(r"task_complete +(t\d) .*\[(\d)/5\]", term.screen)
    assert sorted(settled) == [("t2", "4"), ("t4", "5")], term.screen


async def test_a_reused_task_that_called_a_consequential_tool_says_so(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    deploy = {"type": "tool_use", "id": "u1", "name": "deploy", "input": {"environment": "prod"}}
    agent = {
        "name": "deployer",
        "provider": "scripted",
        "script": [[deploy], "deployed"],
        "tools": ["tests.support.tools:deploy"],
        "cwd": str(tmp_path),
    }
    run_input = {"team": {"name": "t", "agents": [agent]}, "tasks": [task("d", "deployer")]}
    run = await start_run(client, workflow_id, run_input)
    await run.decide(await run.request("tool-d-1"))
    assert (await result_within(run, WAIT_S)).success
    again_id = f"{workflow_id}-again"
    again = await run_team(
        client, again_id, {**run_input, "options": {"reuse": {"from": workflow_id}}}
    )
    reused = again.task("d")
    assert reused.reused_from is not None
    assert reused.reused_consequential == ["deploy"]
    events = await client.get_workflow_handle(again_id).query(
        QueryName.EVENTS, result_type=list[RunEvent]
    )
    assert [e.detail for e in events if e.type == "warning"] == [
        f"task d is reused: it called the consequential tool(s) deploy in {workflow_id}/d, "
        "which are not called again"
    ]


async def test_reuse_of_an_unknown_run_fails_naming_the_option(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    team = {"name": "five", "agents": [counted_agent(tmp_path)]}
    run_input = {"team": team, "tasks": five_tasks(), "options": {"reuse": {"from": "nope"}}}
    handle = await start_team(client, workflow_id, run_input)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_FORK"
    assert "no run 'nope'" in cause.message
    assert "(options.reuse.from names the run whose completed tasks to reuse)" in cause.message
    assert runs(tmp_path) == []


async def test_an_abort_while_a_reuse_run_reads_stops_it_before_any_task_runs(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    team = {"name": "five", "agents": [counted_agent(tmp_path)]}
    source = await run_team(client, workflow_id, {"team": team, "tasks": five_tasks()})
    assert not source.success  # t4 needs the file ok
    (tmp_path / "ok").touch()
    run_input = {"team": team, "tasks": five_tasks(), "options": {"reuse": {"from": workflow_id}}}
    # signal-with-start: the abort is in the run's first workflow task, before its read
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        run_input,
        id=f"{workflow_id}-r",
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
        start_signal=SignalName.ABORT,
        start_signal_args=[{"reason": "not now"}],
    )
    reused = await team_result(handle)
    assert (reused.status, reused.error_code) == ("cancelled", "ABORTED")
    assert {t.id: t.status for t in reused.tasks} == {
        "t1": "completed",
        "t2": "completed",
        "t3": "completed",
        "t4": "skipped",
        "t5": "skipped",
    }
    assert sorted(runs(tmp_path)) == ["t1", "t2", "t3", "t4"]  # nothing ran again
    events = await handle.query(QueryName.EVENTS, result_type=list[RunEvent])
    assert [e.detail for e in events if e.type == "abort"] == ["aborted: not now"]
    await assert_replays(client, handle.id)


async def test_a_reuse_run_whose_input_is_invalid_fails_with_its_error(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    team = {"name": "five", "agents": [counted_agent(tmp_path)]}
    tasks = [task("i" * 80, "worker", description="TASK=t1")]
    assert (await run_team(client, workflow_id, {"team": team, "tasks": tasks})).success
    # a stock-CLI start the client's checks did not see: a workflow id of
    # 945 bytes, so its task's run's would pass Temporal's limit (the read,
    # which keeps the task, checks only its coordinator's and the tasks to
    # run again); it fails with the error of its input as given
    run_input = {"team": team, "tasks": tasks, "options": {"reuse": {"from": workflow_id}}}
    long_id = f"{workflow_id}-r".ljust(945, "w")
    handle = await start_team(client, long_id, run_input)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_RUN_INPUT"
    assert "over Temporal's limit of 1000 bytes on a workflow id" in cause.message
    assert runs(tmp_path) == ["t1"]  # the reference run's
    await assert_replays(client, handle.id)
