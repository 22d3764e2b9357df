"""The tool gate: a gated tool call waits durably for a decision bound to its
exact input, listed and answered at the team run (or at the agent run), and
never runs when rejected. Real dev server, real tools, histories replayed."""

from __future__ import annotations

import asyncio
import gc
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory, WorkflowUpdateFailedError

from oma import worker as oma_worker
from oma.core.contracts.names import SignalName, UpdateName, WorkflowName
from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.schema.approvals import request_hash
from oma.core.schema.results import AgentRunResult
from tests.support.approvals import (
    WAIT_S,
    Run,
    gated_run,
    refusal_code,
    result_within,
    start_run,
    write,
    writer,
)
from tests.support.runs import (
    TASK_QUEUE,
    agent_result,
    assert_replays,
    collected_unraisable,
    histories_of,
    scripted_activities,
    task,
)
from tests.support.tool_calls import tool_results

pytestmark = pytest.mark.usefixtures("worker")


async def test_a_gated_call_waits_listed_at_the_team_run_and_runs_once_approved(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    run = await start_run(
        client, workflow_id, gated_run(tmp_path, [write("u1", "out.txt", "hi")], "wrote it")
    )
    request = await run.request("tool-w-1")

    assert (request.boundary, request.scope) == ("tool", f"{workflow_id}/w")
    assert request.content == {
        "agent": "writer",
        "task": "w",
        "tool": "file_write",
        "tool_use_id": "u1",
        "input": {"path": "out.txt", "content": "hi"},
    }
    assert request.request_hash == request_hash(f"{workflow_id}/w", "tool", request.content)
    assert not (tmp_path / "out.txt").exists()

    recorded = await run.decide(request)
    result = await result_within(run, WAIT_S)

    assert result.status == "completed"
    assert (tmp_path / "out.txt").read_text() == "hi"
    assert [(d.request_id, d.decision, d.source) for d in result.approval_decisions] == [
        ("tool-w-1", "approve", "update")
    ]
    child = await agent_result(client, workflow_id, "w")
    assert [d.request_hash for d in child.approval_decisions] == [recorded.request_hash]
    # the task's run recorded it, as taken at the team run; the team run, the same
    assert child.approval_decisions == result.approval_decisions == [recorded]
    assert (recorded.source, recorded.forwarded_by) == ("update", workflow_id)
    assert await run.pending() == []
    team_run, task_run = await histories_of(client, workflow_id)
    # both runs waited: each asked whether to say awaiting_approval as it
    # started, not when the request opened, after a scripted turn, which a
    # replay can learn a workflow task earlier: the team run with its one
    # marker, the task's run with the patch its input holds (no marker)
    assert patch_markers_by_workflow_task(team_run) == {1: 1}
    assert patch_markers_by_workflow_task(task_run) == {}
    await assert_replays(client, workflow_id)


def patch_markers_by_workflow_task(history: WorkflowHistory) -> dict[int, int]:
    """How many patch markers each workflow task's commands recorded (by
    the task's number, from 1)."""
    counts: dict[int, int] = {}
    completed = 0
    for event in history.events:
        if event.HasField("workflow_task_completed_event_attributes"):
            completed += 1
        elif event.marker_recorded_event_attributes.marker_name == "core_patch":
            counts[completed] = counts.get(completed, 0) + 1
    return counts


async def test_a_rejected_call_never_runs_and_the_model_reads_why(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    run = await start_run(
        client, workflow_id, gated_run(tmp_path, [write("u1", "out.txt", "hi")], "understood")
    )
    request = await run.request("tool-w-1")
    await run.handle.signal(
        SignalName.DECIDE,
        {
            "request_id": request.request_id,
            "request_hash": request.request_hash,
            "decision": "reject",
            "reviewer": {"id": "alice"},
            "comment": "not that file",
        },
    )
    result = await result_within(run, WAIT_S)

    assert result.status == "completed"  # the model went on without the call
    assert not (tmp_path / "out.txt").exists()
    [refused] = tool_results(await agent_result(client, workflow_id, "w"))
    assert (refused.is_error, refused.content) == (
        True,
        "not run: the reviewer alice rejected it: not that file",
    )
    await assert_replays(client, workflow_id)


async def test_an_approval_binds_the_exact_arguments_and_is_used_once(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    script = [
        [write("u1", "a.txt", "ok")],
        [write("u2", "a.txt", "DROP TABLE")],
        "done",
    ]
    run = await start_run(client, workflow_id, gated_run(tmp_path, *script))
    first = await run.request("tool-w-1")
    other = first.content | {"input": {"path": "a.txt", "content": "DROP TABLE"}}
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.handle.execute_update(
            UpdateName.DECIDE,
            {
                "request_id": first.request_id,
                "request_hash": request_hash(first.scope, "tool", other),
                "decision": "approve",
                "reviewer": {"id": "alice"},
            },
        )
    assert refusal_code(refused.value) == "APPROVAL_STALE_DECISION"

    await run.decide(first)
    second = await run.request("tool-w-2")  # the next call is a request of its own
    assert second.content["input"] == {"path": "a.txt", "content": "DROP TABLE"}
    assert (tmp_path / "a.txt").read_text() == "ok"
    await run.decide(second, "reject")
    result = await result_within(run, WAIT_S)
    assert (tmp_path / "a.txt").read_text() == "ok"
    assert [(d.request_id, d.decision) for d in result.approval_decisions] == [
        ("tool-w-1", "approve"),
        ("tool-w-2", "reject"),
    ]
    await assert_replays(client, workflow_id)


@pytest.mark.parametrize("at_the_team_run", ["update", "signal"])
async def test_a_tool_decision_raced_at_the_task_and_at_the_team_run_is_one_decision(
    client: Client, workflow_id: str, tmp_path: Path, at_the_team_run: str
) -> None:
    run = await start_run(
        client, workflow_id, gated_run(tmp_path, [write("u1", "out.txt", "hi")], "done")
    )
    request = await run.request("tool-w-1")
    task_run = Run(client.get_workflow_handle(task_workflow_id(workflow_id, "w")))
    # alice approves at the team run, bob rejects at the task's run, at once;
    # one of the two sends the update, the other the signal
    if at_the_team_run == "update":
        sent = (task_run.signal_decision(request, "reject", "bob"), run.decide(request))
        by_update, answer_index = "alice", 1
    else:
        sent = (task_run.decide(request, "reject", "bob"), run.signal_decision(request))
        by_update, answer_index = "bob", 0
    answers = await asyncio.gather(*sent, return_exceptions=True)
    result = await result_within(run, WAIT_S)

    [decided] = (await agent_result(client, workflow_id, "w")).approval_decisions
    assert result.approval_decisions == [decided]  # the same record at both runs
    assert (tmp_path / "out.txt").exists() == (decided.decision == "approve")
    answer = answers[answer_index]
    if decided.reviewer.id == by_update:
        assert answer == decided
    else:
        assert refusal_code(answer) == "APPROVAL_CONFLICT"
    refused = [e.detail for e in await run.events() if e.type == "approval_refused"]
    if at_the_team_run == "signal" and decided.reviewer.id == "bob":
        # alice's signal lost: a refusal at the team run, not a decision
        [detail] = refused
        assert detail is not None and detail.startswith("tool-w-1: APPROVAL_CONFLICT: ")
    else:
        assert refused == []
    await assert_replays(client, workflow_id)


async def test_a_retried_tasks_tool_requests_are_new_and_decided_at_the_team_run(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    script = [[write("u1", "a.txt", "1")], [write("u2", "b.txt", "2")], "done"]
    run_input = gated_run(tmp_path, *script)
    # the first attempt times out waiting for its second call's decision
    run_input["tasks"] = [task("w", "writer") | {"timeout_s": 3, "max_retries": 1}]
    run_input["tasks"][0]["retry_delay_s"] = 0.1
    run = await start_run(client, workflow_id, run_input)
    await run.decide(await run.request("tool-w-1"))
    await run.request("tool-w-2")

    retried = await run.request("tool-w/2-1")
    assert [r.request_id for r in await run.pending()] == ["tool-w/2-1"]
    recorded = await run.decide(retried)
    await run.decide(await run.request("tool-w/2-2"))
    result = await result_within(run, WAIT_S)

    assert result.status == "completed"
    assert [(d.request_id, d.decision) for d in result.approval_decisions] == [
        ("tool-w-1", "approve"),
        ("tool-w/2-1", "approve"),
        ("tool-w/2-2", "approve"),
    ]
    child = await agent_result(client, workflow_id, "w")  # the second attempt's run
    assert child.approval_decisions == result.approval_decisions[1:]
    assert child.approval_decisions[0] == recorded
    assert ((tmp_path / "a.txt").read_text(), (tmp_path / "b.txt").read_text()) == ("1", "2")
    await assert_replays(client, workflow_id)


async def test_a_tool_approval_is_answered_across_a_worker_restart(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    queue = f"tool-approval-restart-{uuid.uuid4().hex[:8]}"
    run_input = gated_run(tmp_path, [write("u1", "out.txt", "hi")], "wrote it")
    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        run = await start_run(client, workflow_id, run_input, task_queue=queue)
        request = await run.request("tool-w-1")
    # the stopped worker's runs are collected without a workflow event loop:
    # their cleanup must not call the workflow API
    with collected_unraisable() as unraisable:
        gc.collect()
    assert unraisable == []

    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        await run.decide(request)
        result = await result_within(run, WAIT_S)

    assert result.status == "completed"
    assert (tmp_path / "out.txt").read_text() == "hi"
    await assert_replays(client, workflow_id)


async def test_a_standalone_agent_run_lists_and_takes_its_own_tool_decisions(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {
            "agent": writer(tmp_path, [write("u1", "out.txt", "hi")], "wrote it"),
            "input": "write it",
            "approvals": {"tools": "all"},
        },
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    run = Run(handle)  # the same reviewer's view as a team run's
    request = await run.request("tool-1")
    await run.decide(request)
    result = await handle.result()

    assert result.output == "wrote it"
    assert (tmp_path / "out.txt").read_text() == "hi"
    assert [d.request_id for d in result.approval_decisions] == ["tool-1"]
    await assert_replays(client, workflow_id)


async def test_aborting_the_team_run_closes_its_tasks_tool_requests(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    run = await start_run(
        client, workflow_id, gated_run(tmp_path, [write("u1", "out.txt", "hi")], "stopped")
    )
    await run.request("tool-w-1")
    await run.abort("enough")
    result = await result_within(run, WAIT_S)

    assert (result.status, result.error_code) == ("cancelled", "ABORTED")
    assert not (tmp_path / "out.txt").exists()
    [closed] = tool_results(await agent_result(client, workflow_id, "w"))
    assert closed.content == "not run: its approval request closed: aborted: enough"
    assert await run.pending() == []
    await assert_replays(client, workflow_id)


def test_a_tool_gate_naming_nothing_of_the_team_is_an_input_error(tmp_path: Path) -> None:
    from oma.core.schema.errors import InvalidRunInputError
    from oma.core.schema.run_input import parse_team_run_input

    with pytest.raises(InvalidRunInputError, match="'file_wrte'"):
        parse_team_run_input(
            gated_run(tmp_path, "x") | {"options": {"approvals": {"tools": ["file_wrte"]}}}
        )
    ok = gated_run(tmp_path, "x") | {"options": {"approvals": {"tools": ["writer.file_write"]}}}
    assert parse_team_run_input(ok).options.approvals is not None


async def test_a_consequential_custom_tool_is_gated_without_any_approvals_option(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    deploy = {"type": "tool_use", "id": "u1", "name": "deploy", "input": {"environment": "prod"}}
    agent = writer(tmp_path, [deploy], "deployed") | {"tools": ["tests.support.tools:deploy"]}
    run = await start_run(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [agent]}, "tasks": [task("w", "writer")]},
    )
    request = await run.request("tool-w-1")
    assert request.content["input"] == {"environment": "prod"}
    assert request.reason.startswith("deploy is consequential")
    await run.decide(request)
    result = await result_within(run, WAIT_S)

    [deployed] = tool_results(await agent_result(client, workflow_id, "w"))
    assert (deployed.is_error, deployed.content) == (False, "deployed to prod")
    assert [d.request_id for d in result.approval_decisions] == ["tool-w-1"]
    await assert_replays(client, workflow_id)


async def test_the_python_clients_on_approval_answers_a_tasks_tool_requests(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    from oma import OpenMultiAgent

    offered: list[str] = []

    def review(request: Any) -> str:
        offered.append(f"{request.boundary} {request.request_id}")
        return "approve"

    run_input = gated_run(tmp_path, [write("u1", "out.txt", "hi")], "wrote it")
    oma_client = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_approval=review)
    result = await oma_client.run_tasks(
        run_input["team"], run_input["tasks"], options=run_input["options"], workflow_id=workflow_id
    )
    assert result.status == "completed"
    assert offered == ["tool tool-w-1"]
    assert (tmp_path / "out.txt").read_text() == "hi"
