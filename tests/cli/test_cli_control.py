"""Goal runs, plans, approvals and abort from the `oma` CLI and the stock `temporal` CLI.

Every `oma` here runs as a subprocess with `--no-worker` (or connect-only
commands) against the session's dev server; the session's worker, in this
process, runs the workflows.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import uuid
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError

from oma.cli import run as _cli_run
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.approvals import ApprovalRequest
from oma.core.schema.plan import PlanArtifact
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import TaskStatus
from oma.runtime.dev_server import DevServer, free_port, is_listening
from oma.worker import build_worker
from tests.support.approvals import DRAFT, draft_then_publish, gated_run, start_run, write
from tests.support.cli import (
    OMA,
    cells,
    cli_env,
    events_in,
    input_file,
    normalized,
    oma,
    oma_run,
    run_cmd,
    table_rows,
    temporal,
)
from tests.support.procs import Processes
from tests.support.runs import TASK_QUEUE, process, run_team, scripted, task, team_result

pytestmark = pytest.mark.usefixtures("worker")

PLAN_ANSWER = json.dumps(
    [
        {"title": "Draft", "description": "draft it", "assignee": "writer", "depends_on": []},
        {"title": "Edit", "description": "edit it", "assignee": "editor", "depends_on": ["Draft"]},
    ]
)


def writers() -> dict[str, Any]:
    return {
        "name": "writers",
        "agents": [scripted("writer", "a draft"), scripted("editor", "an edit")],
    }


def goal_input() -> dict[str, Any]:
    """A goal run whose scripted coordinator plans Draft -> Edit, then answers."""
    return {
        "team": writers(),
        "goal": "Write and edit a haiku.",
        "coordinator": {"provider": "scripted", "script": [PLAN_ANSWER, "The final haiku."]},
    }


def gated_input(*task_ids: str) -> dict[str, Any]:
    """Independent tasks, each of whose dispatch waits for an approval."""
    return {
        "team": {"name": "gated", "agents": [scripted("a", "done")]},
        "tasks": [task(t, "a") for t in task_ids],
        "options": {"approvals": {"dispatch": list(task_ids)}},
    }


async def start_gated(client: Client, workflow_id: str, *task_ids: str) -> None:
    """Start a run gating ``task_ids`` and wait until all their requests are open."""
    await client.start_workflow(
        WorkflowName.TEAM_RUN, gated_input(*task_ids), id=workflow_id, task_queue=TASK_QUEUE
    )
    await wait_for_requests(client, workflow_id, *(f"dispatch-{t}" for t in task_ids))


async def wait_for_requests(client: Client, workflow_id: str, *request_ids: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    for _ in range(200):
        try:
            pending = await handle.query(
                QueryName.PENDING_APPROVALS, result_type=list[ApprovalRequest]
            )
        except RPCError:  # the run has not taken its first workflow task yet
            pending = []
        if {r.request_id for r in pending} >= set(request_ids):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id}: requests {request_ids} never opened")


async def result_of(client: Client, workflow_id: str) -> TeamRunResult:
    return await team_result(client.get_workflow_handle(workflow_id, result_type=TeamRunResult))


async def pending_via_stock_cli(dev_server: DevServer, workflow_id: str) -> list[dict[str, Any]]:
    query = await temporal(
        dev_server,
        "workflow",
        "query",
        "--workflow-id",
        workflow_id,
        "--type",
        "pending_approvals",
        "--output",
        "json",
    )
    assert query.returncode == 0, query.stderr
    [pending] = json.loads(query.stdout)["queryResult"]
    return list(pending)


# -- oma run and oma plan ------------------------------------------------------


async def test_oma_run_of_a_goal_prints_progress_the_task_table_and_the_final_output(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    proc = await oma_run(dev_server, workflow_id, tmp_path, goal_input())
    assert proc.returncode == 0, proc.stderr
    assert events_in(proc.stderr) == [
        ("run_start", "-"),
        ("plan_ready", "-"),
        ("task_start", "t1"),
        ("task_complete", "t1"),
        ("task_start", "t2"),
        ("task_complete", "t2"),
        ("run_end", "-"),
    ]
    assert "plan_ready - 2 task(s)" in normalized(proc.stderr)
    # a goal run's titles, known once planned, name its tasks as they go
    assert "task_start t1 Draft · writer" in normalized(proc.stderr)
    assert "task_complete t2 Edit · 0.0s [2/2]" in [
        re.sub(r"\d+\.\ds", "0.0s", line) for line in normalized(proc.stderr)
    ]
    # the scripted provider counts words: 5 in "# Task: Draft\n\ndraft it", 2 out
    assert table_rows(proc.stdout) == [
        ["t1", "Draft", "writer", "completed", "5/2", "$0.00", "a draft"],
        ["t2", "Edit", "editor", "completed", "18/2", "$0.00", "an edit"],
    ]
    assert "total cost: $0.00\n" in proc.stdout  # scripted turns cost nothing
    assert "final output" in proc.stdout
    assert proc.stdout.rstrip().endswith("The final haiku.")
    assert "output of t2" not in proc.stdout


async def test_oma_plan_prints_an_artifact_that_runs_as_the_same_task_graph(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    planned = await oma(
        dev_server,
        "plan",
        "--no-worker",
        "--workflow-id",
        workflow_id,
        input_file(tmp_path, goal_input()),
    )
    assert planned.returncode == 0, planned.stderr
    assert normalized(planned.stderr)[-1] == "run_end - planned"
    artifact = PlanArtifact.model_validate_json(planned.stdout)
    graph = [(t.id, t.assignee, t.depends_on) for t in artifact.tasks]
    assert graph == [("t1", "writer", []), ("t2", "editor", ["t1"])]

    frozen = {"team": writers(), "plan": json.loads(planned.stdout)}
    ran = await oma(
        dev_server,
        "run",
        "--no-worker",
        "--json",
        "--workflow-id",
        f"{workflow_id}-run",
        input_file(tmp_path, frozen, "frozen.json"),
    )
    assert ran.returncode == 0, ran.stderr
    result = TeamRunResult.model_validate_json(ran.stdout)
    assert [(t.id, t.assignee, t.depends_on) for t in result.tasks] == graph
    assert [t.status for t in result.tasks] == [TaskStatus.COMPLETED] * 2
    assert (result.final_output, result.plan) == (None, None)


async def test_oma_plan_of_an_input_without_a_goal_exits_2(
    dev_server: DevServer, tmp_path: Path
) -> None:
    proc = await oma(dev_server, "plan", input_file(tmp_path, gated_input("x")))
    assert proc.returncode == 2
    assert "`oma plan` plans a 'goal'; this input has none" in proc.stderr


async def test_oma_run_rejects_an_assignee_without_what_its_task_requires(
    dev_server: DevServer, tmp_path: Path
) -> None:
    run_input = {
        "team": {"name": "t", "agents": [scripted("a", "x")]},
        "tasks": [{**task("build", "a"), "requires": {"backend": "process"}}],
    }
    proc = await oma(dev_server, "run", input_file(tmp_path, run_input))
    assert proc.returncode == 2
    assert "ASSIGNEE_REQUIREMENTS_MISMATCH: task 'build': 'a' does not satisfy" in proc.stderr


async def test_oma_run_hints_once_at_the_command_that_approves_a_waiting_task(
    processes: Processes, client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run = processes.start(
        [
            OMA,
            "run",
            "--no-worker",
            "--workflow-id",
            workflow_id,
            input_file(tmp_path, gated_input("x")),
        ],
        env=cli_env(dev_server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await wait_for_requests(client, workflow_id, "dispatch-x")
        await asyncio.sleep(1.2)  # two polls of `oma run` with the request open
        approved = await oma(
            dev_server, "approve", workflow_id, "dispatch-x", "--reviewer", "alice"
        )
        assert approved.returncode == 0, approved.stderr
        _, stderr = await asyncio.to_thread(run.communicate, None, 60)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    hint = f"approval needed: oma approve {workflow_id} dispatch-x"
    assert stderr.count(hint) == 1
    assert events_in(stderr) == [
        ("run_start", "-"),
        ("approval_request", "x"),
        ("approval_decision", "x"),
        ("task_start", "x"),
        ("task_complete", "x"),
        ("run_end", "-"),
    ]


OUTAGE_S = 3.0
"""How long no worker can answer a query in the test of the last events."""


async def ended_with_no_worker(client: Client, workflow_id: str) -> tuple[WorkflowHandle, str]:
    """A one-task run that completed on a worker that has stopped since: a
    query of it gets no answer until a worker polls its task queue again.
    Returns its handle and task queue."""
    queue = f"{TASK_QUEUE}-last-events-{uuid.uuid4().hex[:8]}"
    run_input = {
        "team": {"name": "t", "agents": [scripted("a", "done")]},
        "tasks": [task("x", "a")],
    }
    async with build_worker(client, queue):
        handle = await client.start_workflow(
            WorkflowName.TEAM_RUN,
            run_input,
            id=workflow_id,
            task_queue=queue,
            result_type=TeamRunResult,
        )
        assert (await handle.result()).success
    return handle, queue


async def test_the_last_events_of_an_ended_run_are_printed_once_a_worker_answers(
    client: Client, workflow_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `oma run`'s follower once the result is in, with no worker to answer yet
    handle, queue = await ended_with_no_worker(client, workflow_id)
    finishing = asyncio.create_task(_cli_run.Progress(handle).finish())

    await asyncio.sleep(OUTAGE_S)
    assert not finishing.done(), "it stopped asking for the events while no worker answered"
    async with build_worker(client, queue):
        await asyncio.wait_for(finishing, 30)

    assert events_in(capsys.readouterr().err) == [
        ("run_start", "-"),
        ("task_start", "x"),
        ("task_complete", "x"),
        ("run_end", "-"),
    ]


async def test_last_events_that_never_come_are_reported_missing_after_the_bound(
    client: Client,
    workflow_id: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_cli_run, "LAST_EVENTS_WAIT", timedelta(seconds=4))
    handle, _ = await ended_with_no_worker(client, workflow_id)
    finishing = asyncio.create_task(_cli_run.Progress(handle).finish())

    # one-sided: a follower that gives up early (the old single 2 s query)
    # is done well before the bound; one that keeps asking is not
    await asyncio.sleep(2.5)
    assert not finishing.done(), "it gave up before LAST_EVENTS_WAIT"
    await asyncio.wait_for(finishing, 10)

    err = capsys.readouterr().err
    assert events_in(err) == []
    assert f"could not read the last events of TeamRun {workflow_id} (" in err
    assert f"temporal workflow query --workflow-id {workflow_id} --type events" in err


async def test_oma_replay_reads_a_goal_runs_id_from_its_coordinator_children(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    result = await run_team(client, workflow_id, goal_input())
    assert result.final_output == "The final haiku."
    shown = await temporal(
        dev_server, "workflow", "show", "--workflow-id", workflow_id, "--output", "json"
    )
    assert shown.returncode == 0, shown.stderr
    history = tmp_path / "goal-run.json"
    history.write_text(shown.stdout)
    assert f'"{workflow_id}/coordinator/plan"' in shown.stdout
    replayed = await run_cmd(OMA, "replay", str(history))
    assert replayed.returncode == 0, replayed.stderr
    assert "no mismatch" in replayed.stdout
    # the id matters: the children's ids are made from it
    wrong = await run_cmd(
        OMA, "replay", str(history), "--workflow-id", f"{workflow_id}/coordinator"
    )
    assert wrong.returncode == 1
    assert "REPLAY_MISMATCH" in wrong.stderr


# -- oma approvals, approve, reject, abort -----------------------------------


async def test_oma_approvals_lists_the_request_and_oma_approve_lets_the_task_run(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    [request] = await client.get_workflow_handle(workflow_id).query(
        QueryName.PENDING_APPROVALS, result_type=list[ApprovalRequest]
    )
    # wide enough that no cell wraps (the time is on a line of its own by design)
    wide = {**cli_env(dev_server), "COLUMNS": "200"}
    listed = await run_cmd(OMA, "approvals", workflow_id, env=wide)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    [row] = [i for i, line in enumerate(lines) if line.strip().startswith("dispatch-x ")]
    requested = request.requested_at.astimezone(UTC)
    assert cells(lines[row]) == [
        "dispatch-x",
        "dispatch",
        "options.approvals.dispatch: review task 'x' before it starts",
        requested.strftime("%Y-%m-%d"),
        "never",
    ]
    assert cells(lines[row + 1]) == [requested.strftime("%H:%M:%S")]
    # the one request, named: the command to copy
    assert f"decide with: oma approve|reject {workflow_id} dispatch-x" in lines
    # then what it reviews: the task, as the run holds it
    content = listed.stdout.split(" dispatch-x (dispatch) ")[1].split("decide with:")[0]
    assert (
        json.loads(content.lstrip("─\n"))
        == request.content
        == {
            "id": "x",
            "title": "X",
            "description": "do x",
            "assignee": "a",
            "depends_on": [],
        }
    )

    approved = await oma(
        dev_server,
        "approve",
        workflow_id,
        "dispatch-x",
        "--reviewer",
        "alice",
        "--display-name",
        "Alice",
        "--comment",
        "looks fine",
    )
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.index('"id": "x"') < approved.stdout.index("recorded:")
    assert "recorded: approve of dispatch-x (dispatch) by alice (Alice) at " in approved.stdout
    assert approved.stdout.rstrip().endswith(": looks fine")

    result = await result_of(client, workflow_id)
    assert (result.status, result.task("x").output) == ("completed", "done")
    [decision] = result.approval_decisions
    assert (decision.reviewer.id, decision.reviewer.display_name, decision.comment) == (
        "alice",
        "Alice",
        "looks fine",
    )
    assert decision.source == "update"


async def test_oma_approve_without_reviewer_records_the_current_user(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    env = {**cli_env(dev_server), "USER": "ana", "LOGNAME": "ana"}
    approved = await run_cmd(OMA, "approve", workflow_id, "dispatch-x", env=env)
    assert approved.returncode == 0, approved.stderr
    assert "recorded: approve of dispatch-x (dispatch) by ana at " in approved.stdout
    [decision] = (await result_of(client, workflow_id)).approval_decisions
    assert decision.reviewer.id == "ana"


async def test_oma_reject_ends_the_run_rejected(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    rejected = await oma(
        dev_server, "reject", workflow_id, "dispatch-x", "--reviewer", "bob", "--comment", "no"
    )
    assert rejected.returncode == 0, rejected.stderr
    assert "recorded: reject of dispatch-x (dispatch) by bob at " in rejected.stdout
    result = await result_of(client, workflow_id)
    assert (result.status, result.success, result.error_code) == (
        "rejected",
        False,
        "APPROVAL_REJECTED",
    )
    assert result.error == "rejected: dispatch-x by bob (no)"
    assert result.task("x").status == TaskStatus.SKIPPED
    assert f"TeamRun {workflow_id} stops: it ends rejected" in rejected.stdout


async def test_oma_run_prints_a_small_cost_budget_with_the_decimals_it_needs(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    use = [{"type": "tool_use", "id": f"u{i}", "name": "add", "input": {"a": i}} for i in range(3)]
    adder = {
        "name": "adder",
        "provider": "scripted",
        "script": [[block] for block in use] + ["done"],
        "tools": ["tests.support.tools:add"],
    }
    proc = await oma_run(
        dev_server,
        workflow_id,
        tmp_path,
        {
            "team": {"name": "t", "agents": [adder]},
            "tasks": [task("loop", "adder")],
            # $0.00001 a token: the first turn's 7 tokens spend $0.00007
            "options": {
                "max_cost_usd": 0.00005,
                "pricing": {"scripted": {"input": 10, "output": 10}},
            },
        },
    )

    assert proc.returncode == 1, proc.stderr
    out = " ".join(proc.stdout.split())
    assert (
        "agent 'adder' spent $0.00007 of the $0.00007 left to it of the run's cost budget "
        "(options.max_cost_usd), and asked for more tool calls"
    ) in out
    assert "COST_BUDGET_EXCEEDED: the cost budget of $0.00005 is used up" in out
    assert "total cost: $0.00007" in out
    assert [row[5] for row in table_rows(proc.stdout)] == ["$0.00007"]


async def test_oma_run_piped_prints_its_task_table_with_whole_headings_and_cells(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    agent = "a-reviewer-with-a-long-name"
    output = "a first line of output that is longer than any column of an 80-column table"
    first = {**task("summarize-the-quarterly-report", agent), "title": "Summarize the report"}
    proc = await oma_run(
        dev_server,
        workflow_id,
        tmp_path,
        {
            "team": {"name": "t", "agents": [scripted(agent, output)]},
            "tasks": [first],
        },
    )

    assert proc.returncode == 0, proc.stderr
    [heading] = [line for line in proc.stdout.splitlines() if line.startswith("┃")]
    assert [c.strip() for c in heading.split("┃")[1:-1]] == [
        "task",
        "title",
        "assignee",
        "status",
        "tokens",
        "cost",
        "output or error",
    ]
    assert table_rows(proc.stdout) == [
        [
            "summarize-the-quarterly-report",
            "Summarize the report",
            agent,
            "completed",
            "7/15",
            "$0.00",
            output,
        ]
    ]


async def test_an_interrupted_oma_run_prints_its_task_table_as_the_run_ended(
    dev_server: DevServer, processes: Processes, workflow_id: str, tmp_path: Path
) -> None:
    run_input = {
        "team": {
            "name": "t",
            "agents": [
                scripted("quick", "done quickly"),
                process("sleeper", "import time; time.sleep(60)"),
            ],
        },
        "tasks": [task("quick", "quick"), task("slow", "sleeper")],
    }
    proc = processes.start(
        [OMA, "run", "--no-worker", "--workflow-id", workflow_id, input_file(tmp_path, run_input)],
        env=cli_env(dev_server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = ""
    while ("task_complete" not in said) and proc.poll() is None:
        said += await asyncio.to_thread(proc.stderr.readline)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = await asyncio.to_thread(proc.communicate, None, 60)

    assert proc.returncode == 130
    assert "TeamRun: cancelled" in stdout, stderr
    assert [(row[0], row[3]) for row in table_rows(stdout)] == [
        ("quick", "completed"),
        ("slow", "failed"),
    ]


async def test_oma_reject_of_a_tool_call_says_the_run_goes_on(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run = await start_run(
        client, workflow_id, gated_run(tmp_path, [write("u1", "out.txt", "hi")], "understood")
    )
    await run.request("tool-w-1")
    rejected = await oma(dev_server, "reject", workflow_id, "tool-w-1", "--reviewer", "bob")

    assert rejected.returncode == 0, rejected.stderr
    assert "ends rejected" not in rejected.stdout
    assert (
        "the tool call is not run: its agent reads the rejection as the call's result, "
        f"and TeamRun {workflow_id} goes on"
    ) in " ".join(rejected.stdout.split())
    result = await result_of(client, workflow_id)
    assert (result.status, result.error_code) == ("completed", None)
    assert not (tmp_path / "out.txt").exists()


async def test_approving_twice_the_second_exits_1_with_approval_conflict(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x", "y")  # y keeps the run waiting
    first = await oma(dev_server, "approve", workflow_id, "dispatch-x", "--reviewer", "alice")
    assert first.returncode == 0, first.stderr
    second = await oma(dev_server, "approve", workflow_id, "dispatch-x", "--reviewer", "bob")
    assert second.returncode == 1
    assert second.stderr.startswith(
        "error: APPROVAL_CONFLICT: request 'dispatch-x' was already decided: approve by alice at "
    )
    unknown = await oma(dev_server, "reject", workflow_id, "dispatch-z", "--reviewer", "bob")
    assert unknown.returncode == 1
    assert (
        f"TeamRun {workflow_id} has no open approval request 'dispatch-z' (open: dispatch-y)"
        in unknown.stderr
    )
    await client.get_workflow_handle(workflow_id).signal(SignalName.ABORT, {"reason": "test over"})
    assert (await result_of(client, workflow_id)).status == "cancelled"


async def test_oma_abort_of_a_run_waiting_on_an_approval_ends_it_cancelled(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    aborted = await oma(dev_server, "abort", workflow_id, "--reason", "not today", "--wait")
    assert aborted.returncode == 0, aborted.stderr
    assert f"abort sent to TeamRun {workflow_id}" in aborted.stdout
    assert "TeamRun: cancelled" in aborted.stdout
    assert "ABORTED: aborted: not today" in aborted.stdout
    result = await result_of(client, workflow_id)
    assert (result.status, result.error_code) == ("cancelled", "ABORTED")
    assert result.task("x").error == "skipped: aborted: not today"


async def test_oma_approvals_with_no_open_request_says_so(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    # y's request opens only once x, which sleeps, has completed
    run_input = {
        "team": {"name": "t", "agents": [process("sleeper", "import time; time.sleep(30)")]},
        "tasks": [task("x", "sleeper"), task("y", "sleeper", "x")],
        "options": {"approvals": {"dispatch": ["y"]}},
    }
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN, run_input, id=workflow_id, task_queue=TASK_QUEUE
    )
    listed = await oma(dev_server, "approvals", workflow_id)
    assert listed.returncode == 0, listed.stderr
    assert f"TeamRun {workflow_id}: no open approval requests" in listed.stdout
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()


async def test_oma_approve_on_a_run_that_ended_is_a_clear_error(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    run_input = {"team": {"name": "t", "agents": [scripted("a", "x")]}, "tasks": [task("x", "a")]}
    await run_team(client, workflow_id, run_input)
    proc = await oma(dev_server, "approve", workflow_id, "dispatch-x", "--reviewer", "alice")
    assert proc.returncode == 1
    assert f"TeamRun {workflow_id} has already ended (COMPLETED)" in proc.stderr


async def test_oma_approvals_with_nothing_listening_fails_and_starts_no_server(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    proc = await run_cmd(OMA, "approvals", "some-run", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        f"error: TEMPORAL_UNAVAILABLE: nothing listens on {address}, and {tmp_path} holds no "
        ".oma/temporal.db"
    ), proc.stderr
    assert not is_listening(address)
    assert not (tmp_path / ".oma").exists()


async def test_oma_approve_refuses_an_empty_reviewer_before_connecting(tmp_path: Path) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = await run_cmd(OMA, "approve", "run-1", "plan", "--reviewer", " ", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "--reviewer must not be empty" in proc.stderr


# -- the stock temporal CLI ----------------------------------------------------


async def test_stock_cli_query_pending_approvals_then_update_decide_approves(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x", "y")  # y keeps the run waiting
    request, _ = await pending_via_stock_cli(dev_server, workflow_id)
    assert (request["request_id"], request["boundary"]) == ("dispatch-x", "dispatch")
    decision = {
        "request_id": "dispatch-x",
        "request_hash": request["request_hash"],
        "decision": "approve",
        "reviewer": {"id": "carol"},
    }
    update = [
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        workflow_id,
        "--name",
        "decide",
        "--input",
        json.dumps(decision),
    ]
    updated = await temporal(dev_server, *update)
    assert updated.returncode == 0, updated.stderr
    assert "decision:approve" in updated.stdout
    again = await temporal(dev_server, *update)
    assert again.returncode == 1
    assert "already decided: approve by carol" in again.stderr
    assert "APPROVAL_CONFLICT" in again.stderr

    await client.get_workflow_handle(workflow_id).signal(SignalName.ABORT, {"reason": "test over"})
    result = await result_of(client, workflow_id)
    assert result.task("x").status == TaskStatus.COMPLETED
    [recorded] = result.approval_decisions
    assert (recorded.reviewer.id, recorded.source) == ("carol", "update")


async def test_stock_cli_signal_decide_records_a_rejection_and_refuses_a_stale_hash(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    [request] = await pending_via_stock_cli(dev_server, workflow_id)
    signal = ["workflow", "signal", "--workflow-id", workflow_id, "--name", "decide", "--input"]
    stale = {
        "request_id": "dispatch-x",
        "request_hash": "0" * 64,
        "decision": "approve",
        "reviewer": {"id": "dave"},
    }
    sent = await temporal(dev_server, *signal, json.dumps(stale))
    assert sent.returncode == 0, sent.stderr
    reject = {**stale, "request_hash": request["request_hash"], "decision": "reject"}
    sent = await temporal(dev_server, *signal, json.dumps(reject))
    assert sent.returncode == 0, sent.stderr

    result = await result_of(client, workflow_id)
    assert result.status == "rejected"
    [recorded] = result.approval_decisions
    assert (recorded.decision, recorded.source) == ("reject", "signal")
    events = await temporal(
        dev_server,
        "workflow",
        "query",
        "--workflow-id",
        workflow_id,
        "--type",
        "events",
        "--output",
        "json",
    )
    assert events.returncode == 0, events.stderr
    [log] = json.loads(events.stdout)["queryResult"]
    [refused] = [e for e in log if e["type"] == "approval_refused"]
    assert refused["detail"].startswith("dispatch-x: APPROVAL_STALE_DECISION: ")


async def test_stock_cli_abort_signal_ends_the_run_cancelled(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    sent = await temporal(
        dev_server,
        "workflow",
        "signal",
        "--workflow-id",
        workflow_id,
        "--name",
        "abort",
        "--input",
        json.dumps({"reason": "changed my mind"}),
    )
    assert sent.returncode == 0, sent.stderr
    result = await result_of(client, workflow_id)
    assert (result.status, result.error_code, result.error) == (
        "cancelled",
        "ABORTED",
        "aborted: changed my mind",
    )


async def test_stock_cli_cancel_ends_the_run_canceled_and_state_shows_its_tasks(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await start_gated(client, workflow_id, "x")
    cancelled = await temporal(dev_server, "workflow", "cancel", "--workflow-id", workflow_id)
    assert cancelled.returncode == 0, cancelled.stderr
    with pytest.raises(WorkflowFailureError) as info:
        await client.get_workflow_handle(workflow_id).result()
    assert isinstance(info.value.cause, CancelledError)

    result = await temporal(dev_server, "workflow", "result", "--workflow-id", workflow_id)
    assert result.returncode == 1
    assert "CANCELED" in result.stdout
    described = await temporal(
        dev_server, "workflow", "describe", "--workflow-id", workflow_id, "--output", "json"
    )
    assert described.returncode == 0, described.stderr
    info_json = json.loads(described.stdout)["workflowExecutionInfo"]
    assert info_json["status"] == "WORKFLOW_EXECUTION_STATUS_CANCELED"
    state = await temporal(
        dev_server,
        "workflow",
        "query",
        "--workflow-id",
        workflow_id,
        "--type",
        "state",
        "--output",
        "json",
    )
    assert state.returncode == 0, state.stderr
    [run] = json.loads(state.stdout)["queryResult"]
    assert run["status"] == "cancelled"
    assert [(t["id"], t["status"], t["error"]) for t in run["tasks"]] == [
        ("x", "skipped", "skipped: the run was cancelled")
    ]


async def test_ctrl_c_while_the_start_is_on_its_way_cancels_the_run_it_started(
    client: Client,
    dev_server: DevServer,
    workflow_id: str,
    worker: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the server has started the run, its answer has not reached `oma run`
    # yet, and Ctrl-C comes: the run must not be left going
    from oma import client as oma_client

    real_start = oma_client.start_team_run
    landed = asyncio.Event()

    async def slow_answer(*args: Any, **kwargs: Any) -> Any:
        handle = await real_start(*args, **kwargs)
        landed.set()
        await asyncio.sleep(2)
        return handle

    monkeypatch.setattr(oma_client, "start_team_run", slow_answer)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_server.address)
    monkeypatch.setenv("OMA_TASK_QUEUE", TASK_QUEUE)
    sleeper = process("sleeper", "import time; time.sleep(600)")
    inp = _cli_run.checked_team_run_input(
        {"team": {"name": "t", "agents": [sleeper]}, "tasks": [task("x", "sleeper")]}
    )
    following = asyncio.create_task(_cli_run.start_and_follow(inp, workflow_id, False))
    await asyncio.wait_for(landed.wait(), 30)
    following.cancel()
    with pytest.raises(asyncio.CancelledError):
        await following
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.status == WorkflowExecutionStatus.CANCELED


# -- what a dispatch acts on ---------------------------------------------------


async def test_a_dispatch_request_shows_a_preview_of_each_dependencys_output(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    await client.start_workflow(
        WorkflowName.TEAM_RUN, draft_then_publish(), id=workflow_id, task_queue=TASK_QUEUE
    )
    await wait_for_requests(client, workflow_id, "dispatch-publish")

    [request] = await pending_via_stock_cli(dev_server, workflow_id)
    assert request["upstream"] == [
        {
            "task_id": "draft",
            "title": "Draft",
            "assignee": "writer",
            "status": "completed",
            "preview": DRAFT[:500],
            "truncated": True,
            "output_chars": len(DRAFT),
            "output_ref": None,
            "output_bytes": None,
            "output_run_id": None,
        }
    ]

    listed = await oma(dev_server, "approvals", workflow_id)
    assert listed.returncode == 0, listed.stderr
    shown = listed.stdout.split("the outputs it will act on (1):\n")[1].split("decide with:")[0]
    lines = shown.splitlines()
    assert lines[0] == f"draft (Draft) by writer, completed, {len(DRAFT)} characters:"
    assert lines[1:3] == ["  ## 1.4.0 [bold]not markup[/bold]", "  - ^[[2Jthe screen stays"]
    assert lines[-2:] == [
        f"  … {len(DRAFT) - 500} more characters",
        f"whole outputs: oma approvals {workflow_id} --full",
    ]
    assert "THE LAST LINE" not in listed.stdout
    assert "\x1b" not in listed.stdout

    whole = await oma(dev_server, "approvals", workflow_id, "--full")
    assert whole.returncode == 0, whole.stderr
    shown = whole.stdout.split("the outputs it will act on (1):\n")[1].split("decide with:")[0]
    assert shown.splitlines()[1:] == [
        f"  {line}" for line in DRAFT.replace("\x1b", "^[").splitlines()
    ]

    approved = await oma(dev_server, "approve", workflow_id, "dispatch-publish")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.index("  ## 1.4.0 [bold]") < approved.stdout.index("recorded:")
    assert (await result_of(client, workflow_id)).status == "completed"


async def test_oma_run_shows_what_a_waiting_dispatch_will_act_on(
    processes: Processes, client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run = processes.start(
        [
            OMA,
            "run",
            "--no-worker",
            "--workflow-id",
            workflow_id,
            input_file(tmp_path, draft_then_publish()),
        ],
        env=cli_env(dev_server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await wait_for_requests(client, workflow_id, "dispatch-publish")
        await asyncio.sleep(1.2)  # two polls of `oma run` with the request open
        approved = await oma(dev_server, "approve", workflow_id, "dispatch-publish")
        assert approved.returncode == 0, approved.stderr
        _, stderr = await asyncio.to_thread(run.communicate, None, 60)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    hint = f"approval needed: oma approve {workflow_id} dispatch-publish\n"
    shown = stderr.split(hint)[1].split("\n")[:8]
    assert shown == [
        "the outputs it will act on (1):",
        f"  draft (Draft) by writer, completed, {len(DRAFT)} characters:",
        "    ## 1.4.0 [bold]not markup[/bold]",
        "    - ^[[2Jthe screen stays",
        "    - change 000: " + "x" * 40,
        "    …",
        f"  (all of it: oma approvals {workflow_id} --full)",
        shown[7],
    ]
    assert "\x1b" not in stderr
