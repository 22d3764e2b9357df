"""OpenMultiAgent: agent and team runs started from Python on Temporal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from oma.client import ApprovalAnswer, OpenMultiAgent
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema.approvals import ApprovalRequest, Reviewer
from oma.core.schema.errors import (
    ApprovalConflictError,
    ApprovalUnknownRequestError,
    AssigneeRequirementsMismatchError,
    DagValidationError,
    InvalidMessageError,
    InvalidRunInputError,
)
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import TaskStatus
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import DRAFT, draft_then_publish
from tests.support.orchestration import RESEARCH_THEN_WRITE as PLAN
from tests.support.runs import TASK_QUEUE, assert_replays, process, scripted, task, team_result

pytestmark = pytest.mark.usefixtures("worker")

PNG = "iVBORw0KGgo="

TEAM = {"name": "t", "agents": [scripted("researcher", "facts"), scripted("writer", "article")]}
COORDINATOR = {"provider": "scripted", "script": [PLAN, "the answer"]}
WRITER_TEAM = {"name": "t", "agents": [scripted("writer", "drafted")]}
GATE_ALL = {"approvals": {"dispatch": "all"}}


def graph(tasks: list[Any]) -> list[tuple[str, str, str | None, list[str]]]:
    return [(t.id, t.title, t.assignee, t.depends_on) for t in tasks]


def decisions(result: TeamRunResult) -> list[tuple[str, str, str, str]]:
    return [(d.request_id, d.decision, d.reviewer.id, d.source) for d in result.approval_decisions]


async def until_pending(oma: OpenMultiAgent, workflow_id: str) -> list[ApprovalRequest]:
    """The run's open requests, once it has one."""
    for _ in range(200):
        with contextlib.suppress(RPCError):  # the run may not have started yet
            pending = await oma.pending_approvals(workflow_id)
            if pending:
                return pending
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id} opened no approval request")


# -- run_agent ---------------------------------------------------------------


async def test_run_agent_runs_an_agent_run_workflow_with_a_message_list(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("An image.")
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        }
    ]
    result = await oma.run_agent(
        {"name": "vision", "provider": "anthropic"}, messages, workflow_id=workflow_id
    )
    assert result.output == "An image."
    assert anthropic_server.requests[0].body["messages"] == messages
    await assert_replays(client, workflow_id)


async def test_run_agent_rejects_invalid_input_before_starting_anything(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidMessageError) as info:
        await oma.run_agent(
            {"name": "a", "provider": "anthropic"}, [{"role": "robot", "content": []}]
        )
    assert "input[0].role" in info.value.message


async def test_run_agent_rejects_messages_for_a_process_agent(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidMessageError):
        await oma.run_agent(
            process("p", "print(1)"), [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
        )


# -- run_tasks, run_team, plan, run_from_plan --------------------------------


async def test_run_tasks_runs_a_team_run(client: Client, workflow_id: str) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    result = await oma.run_tasks(WRITER_TEAM, [task("draft", "writer")], workflow_id=workflow_id)
    assert (result.success, result.task("draft").output) == (True, "drafted")


async def test_run_tasks_outputs_are_in_the_shared_memory_query(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    await oma.run_tasks(WRITER_TEAM, [task("draft", "writer")], workflow_id=workflow_id)
    memory = await client.get_workflow_handle(workflow_id).query(QueryName.SHARED_MEMORY)
    assert memory == {"writer/task:draft:result": "drafted"}


async def test_run_tasks_rejects_a_cycle_before_starting_anything(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(DagValidationError) as info:
        await oma.run_tasks(
            WRITER_TEAM,
            [task("a", "writer", "b"), task("b", "writer", "a")],
            workflow_id=workflow_id,
        )
    assert info.value.message == "dependency cycle: a -> b -> a"
    with pytest.raises(RPCError) as described:
        await client.get_workflow_handle(workflow_id).describe()
    assert described.value.status == RPCStatusCode.NOT_FOUND


async def test_run_tasks_rejects_an_assignee_without_the_required_capability(
    client: Client,
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    spec = {**task("draft", "writer"), "requires": {"capabilities": ["latex"]}}
    with pytest.raises(AssigneeRequirementsMismatchError):
        await oma.run_tasks(WRITER_TEAM, [spec])


async def test_run_team_rejects_an_empty_goal_naming_the_field(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidRunInputError) as info:
        await oma.run_team(TEAM, "", coordinator=COORDINATOR)
    assert info.value.message.startswith("invalid TeamRun input: goal: ")


async def test_run_team_plans_runs_and_synthesizes_with_the_coordinator(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    result = await oma.run_team(
        TEAM, "an article", coordinator=COORDINATOR, workflow_id=workflow_id
    )
    assert (result.status, result.final_output) == ("completed", "the answer")
    assert [(t.id, t.assignee, t.output) for t in result.tasks] == [
        ("t1", "researcher", "facts"),
        ("t2", "writer", "article"),
    ]
    coordinator = result.agent_results["coordinator"]
    assert (coordinator.status, coordinator.turns) == ("completed", 2)


async def test_plan_then_run_from_plan_runs_the_planned_task_graph(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    plan = await oma.plan(
        TEAM, "an article", coordinator=COORDINATOR, workflow_id=f"{workflow_id}-plan"
    )
    assert graph(plan.tasks) == [
        ("t1", "Research", "researcher", []),
        ("t2", "Write", "writer", ["t1"]),
    ]
    result = await oma.run_from_plan(TEAM, plan.model_dump(mode="json"), workflow_id=workflow_id)
    assert graph(result.tasks) == graph(plan.tasks)
    assert [t.status for t in result.tasks] == [TaskStatus.COMPLETED, TaskStatus.COMPLETED]
    assert (result.final_output, result.agent_results) == (None, {})


async def test_run_from_plan_rejects_an_unsupported_plan_version(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidRunInputError) as info:
        await oma.run_from_plan(TEAM, {"version": 2, "tasks": [task("a", "writer")]})
    assert "plan.version: unsupported plan version 2" in info.value.message


# -- approval callbacks ------------------------------------------------------


async def test_on_plan_ready_approves_the_plan_gate(client: Client, workflow_id: str) -> None:
    offered: list[ApprovalRequest] = []

    def approve_plan(request: ApprovalRequest) -> ApprovalAnswer:
        offered.append(request)
        return "approve"

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_plan_ready=approve_plan)
    result = await oma.run_team(
        TEAM,
        "an article",
        coordinator=COORDINATOR,
        options={"approvals": {"plan": True}},
        workflow_id=workflow_id,
    )
    assert [(r.request_id, r.boundary) for r in offered] == [("plan", "plan")]
    assert [t["title"] for t in offered[0].content["tasks"]] == ["Research", "Write"]
    assert decisions(result) == [("plan", "approve", "oma:python-callback", "update")]
    assert (result.status, result.final_output) == ("completed", "the answer")


async def test_on_task_dispatch_rejecting_stops_the_run_rejected(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(
        client=client,
        task_queue=TASK_QUEUE,
        on_task_dispatch=lambda request: False,
        reviewer=Reviewer(id="ci-bot"),
    )
    result = await oma.run_tasks(
        WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
    )
    assert (result.status, result.error_code) == ("rejected", "APPROVAL_REJECTED")
    assert result.task("draft").status == TaskStatus.SKIPPED
    assert decisions(result) == [("dispatch-draft", "reject", "ci-bot", "update")]


async def test_async_on_approval_answers_every_round(client: Client, workflow_id: str) -> None:
    offered: list[str] = []

    async def approve(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        offered.append(request.request_id)
        return True

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_approval=approve)
    result = await oma.run_tasks(
        WRITER_TEAM,
        [task("outline", "writer"), task("draft", "writer", "outline")],
        options={"approvals": {"round": True}},
        workflow_id=workflow_id,
    )
    assert offered == ["round-1", "round-2"]
    assert result.status == "completed"


async def test_on_approval_answers_a_dispatch_when_on_task_dispatch_is_unset(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_approval=lambda r: "approve")
    result = await oma.run_tasks(
        WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
    )
    assert decisions(result) == [("dispatch-draft", "approve", "oma:python-callback", "update")]
    assert result.status == "completed"


async def test_a_suspended_request_stays_open_until_decide_answers_it(
    client: Client, workflow_id: str
) -> None:
    offered: list[str] = []
    suspended = asyncio.Event()

    async def suspend(request: ApprovalRequest) -> ApprovalAnswer:
        offered.append(request.request_id)
        suspended.set()
        return "suspend"

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_task_dispatch=suspend)
    run = asyncio.create_task(
        oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    )
    await asyncio.wait_for(suspended.wait(), 30)
    await asyncio.sleep(1)  # a few more polls: the request is offered once, and stays open
    reviewer = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    assert [r.request_id for r in await reviewer.pending_approvals(workflow_id)] == [
        "dispatch-draft"
    ]
    recorded = await reviewer.decide(workflow_id, "dispatch-draft", "approve", "alice")
    result = await asyncio.wait_for(run, 30)
    assert offered == ["dispatch-draft"]
    assert (result.status, result.approval_decisions) == ("completed", [recorded])
    assert decisions(result) == [("dispatch-draft", "approve", "alice", "update")]


async def test_a_callback_losing_the_race_is_not_an_error(
    client: Client, workflow_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)

    async def too_late(request: ApprovalRequest) -> ApprovalAnswer:
        await other.decide(request.scope, request.request_id, "approve", "alice")
        return "reject"

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_task_dispatch=too_late)
    with caplog.at_level(logging.INFO, logger="oma.client"):
        result = await oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    assert decisions(result) == [("dispatch-draft", "approve", "alice", "update")]
    assert result.status == "completed"
    assert "APPROVAL_CONFLICT" in caplog.text


async def test_a_callback_error_propagates_and_leaves_the_run_running(
    client: Client, workflow_id: str
) -> None:
    def crash(request: ApprovalRequest) -> ApprovalAnswer:
        raise RuntimeError("reviewer crashed")

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_task_dispatch=crash)
    with pytest.raises(RuntimeError, match="reviewer crashed"):
        await oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    handle = client.get_workflow_handle(workflow_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    assert [r.request_id for r in await oma.pending_approvals(workflow_id)] == ["dispatch-draft"]
    await oma.abort(workflow_id)
    assert (await team_result(handle)).status == "cancelled"


async def test_a_callback_answer_that_is_not_a_decision_raises(
    client: Client, workflow_id: str
) -> None:
    def undecided(request: ApprovalRequest) -> Any:
        return None

    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_approval=undecided)
    with pytest.raises(ValueError, match="on_approval returned None"):
        await oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    await oma.abort(workflow_id)
    assert (await team_result(client.get_workflow_handle(workflow_id))).status == "cancelled"


# -- decide and abort --------------------------------------------------------


async def test_abort_ends_a_waiting_run_cancelled(client: Client, workflow_id: str) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    run = asyncio.create_task(
        oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    )
    await until_pending(oma, workflow_id)
    await oma.abort(workflow_id, "changed my mind")
    result = await asyncio.wait_for(run, 30)
    assert (result.status, result.error_code, result.error) == (
        "cancelled",
        "ABORTED",
        "aborted: changed my mind",
    )
    assert result.task("draft").status == TaskStatus.SKIPPED


async def test_decide_a_decided_request_raises_a_conflict(client: Client, workflow_id: str) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE, on_task_dispatch=lambda r: True)
    await oma.run_tasks(
        WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
    )
    with pytest.raises(ApprovalConflictError) as info:
        await oma.decide(workflow_id, "dispatch-draft", "reject", "bob")
    assert "already decided: approve by oma:python-callback" in info.value.message


async def test_decide_an_unknown_request_raises(client: Client, workflow_id: str) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    run = asyncio.create_task(
        oma.run_tasks(
            WRITER_TEAM, [task("draft", "writer")], options=GATE_ALL, workflow_id=workflow_id
        )
    )
    await until_pending(oma, workflow_id)
    with pytest.raises(ApprovalUnknownRequestError) as info:
        await oma.decide(workflow_id, "plan", True, {"id": "bob"})
    assert info.value.message == (
        f"TeamRun {workflow_id} has no open approval request 'plan' (open: dispatch-draft)"
    )
    await oma.abort(workflow_id)
    await run


async def test_decide_rejects_an_invalid_decision_before_any_call(client: Client) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    with pytest.raises(InvalidRunInputError):
        await oma.decide("no-such-run", "plan", "maybe", "bob")  # type: ignore[arg-type]
    with pytest.raises(InvalidRunInputError) as info:
        await oma.decide("no-such-run", "plan", "approve", "")
    assert info.value.message.startswith("invalid reviewer: reviewer.id: ")


async def test_a_dispatch_request_shows_its_dependencys_output_and_reads_it_whole(
    client: Client, workflow_id: str
) -> None:
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        draft_then_publish(),
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
    )
    [request] = await until_pending(oma, workflow_id)
    assert request.upstream is not None
    [up] = request.upstream
    assert (up.task_id, up.preview, up.truncated, up.output_chars) == (
        "draft",
        DRAFT[:500],
        True,
        len(DRAFT),
    )
    assert await oma.upstream_outputs(workflow_id, "dispatch-publish") == {"draft": DRAFT}
    await oma.decide(workflow_id, "dispatch-publish", "approve", "ana")
    assert (await team_result(handle)).status == "completed"
