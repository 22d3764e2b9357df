"""Approval gates of a TeamRun (plan, round, dispatch), decided by update and by
signal; expiry; abort and Temporal cancellation; a decision that outlives the
worker. Real dev server, real worker, real subprocesses."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError, CancelledError

from oma import worker as oma_worker
from oma.core.contracts.names import SignalName, UpdateName, WorkflowName
from oma.core.schema.approvals import ApprovalDecision, request_hash
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import TaskStatus
from tests.support.approvals import (
    WAIT_S,
    Run,
    children_started,
    decision,
    eventually,
    refusal_code,
    result_within,
    start_run,
    terminate_if_running,
    wait_for_file,
)
from tests.support.orchestration import RESEARCH_THEN_WRITE as PLAN
from tests.support.procs import alive
from tests.support.runs import (
    TASK_QUEUE,
    assert_replays,
    process,
    scripted,
    scripted_activities,
    task,
)

Start = Callable[[dict[str, Any]], Awaitable[Run]]


@pytest.fixture
def start(client: Client, worker: oma_worker.OmaWorker, workflow_id: str) -> Start:
    """Start a TeamRun named ``workflow_id`` on the session's test worker."""

    async def start(run_input: dict[str, Any]) -> Run:
        return await start_run(client, workflow_id, run_input)

    return start


def team(*agents: dict[str, Any]) -> dict[str, Any]:
    return {"name": "t", "agents": list(agents)}


def with_approvals(run_input: dict[str, Any], **approvals: Any) -> dict[str, Any]:
    return {**run_input, "options": {"approvals": approvals}}


def statuses(result: TeamRunResult) -> dict[str, TaskStatus]:
    return {t.id: t.status for t in result.tasks}


def two_steps(**approvals: Any) -> dict[str, Any]:
    """Task ``a``, then ``b`` which depends on it; both scripted."""
    return with_approvals(
        {
            "team": team(scripted("w", "w done")),
            "tasks": [task("a", "w"), task("b", "w", "a")],
        },
        **approvals,
    )


# -- a decision outlives the worker -----------------------------------------


async def test_dispatch_approval_sent_while_no_worker_runs_lets_the_task_run_once(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # Its own task queue and workers: the session's worker keeps serving the others.
    queue = f"approvals-restart-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "ran.log"
    code = f"import sys; sys.stdin.read(); open({str(log)!r}, 'a').write('ran\\n'); print('wrote')"
    run_input = with_approvals(
        {"team": team(process("writer", code)), "tasks": [task("write", "writer")]},
        dispatch=["write"],
    )

    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        run = await start_run(client, workflow_id, run_input, task_queue=queue)
        request = await run.request("dispatch-write")

    # No worker polls the queue now. The decision goes as a signal, which the
    # server writes to the history at once; an update would block here, since
    # its validator runs on a worker and none is there to accept it.
    await run.signal_decision(request, reviewer="bob")
    assert not log.exists()

    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        result = await asyncio.wait_for(run.result(), 60)

    assert result.status == "completed"
    write = result.task("write")
    assert (write.status, write.attempts, write.output) == (TaskStatus.COMPLETED, 1, "wrote\n")
    assert log.read_text() == "ran\n"
    [recorded] = result.approval_decisions
    assert (recorded.request_id, recorded.decision, recorded.reviewer.id, recorded.source) == (
        "dispatch-write",
        "approve",
        "bob",
        "signal",
    )
    await assert_replays(client, workflow_id)


# -- the rules of a decision ------------------------------------------------


def held_open(release: Path) -> str:
    """Code of a process task that runs until ``release`` exists."""
    return (
        "import os, sys, time\n"
        "sys.stdin.read()\n"
        f"while not os.path.exists({str(release)!r}):\n"
        "    time.sleep(0.02)\n"
        "print('released')\n"
    )


async def test_fifty_concurrent_decisions_on_one_request_record_exactly_one(
    start: Start, client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # A task in flight keeps the run open however the race ends (a rejection
    # lets it settle first), so every update reaches the workflow: one sent to
    # a run that has already completed fails on the server instead.
    release = tmp_path / "release"
    run = await start(
        with_approvals(
            {
                "team": team(process("holder", held_open(release)), scripted("w", "w done")),
                "tasks": [task("hold", "holder"), task("a", "w")],
            },
            dispatch=["a"],
        )
    )
    request = await run.request("dispatch-a")

    outcomes = await asyncio.gather(
        *(
            run.decide(request, "approve" if n % 2 == 0 else "reject", reviewer=f"reviewer-{n}")
            for n in range(50)
        ),
        return_exceptions=True,
    )
    release.touch()

    [winner] = [o for o in outcomes if isinstance(o, ApprovalDecision)]
    refused = [refusal_code(o) for o in outcomes if not isinstance(o, ApprovalDecision)]
    assert refused == ["APPROVAL_CONFLICT"] * 49
    result = await run.result()
    assert result.approval_decisions == [winner]
    assert (winner.request_id, winner.source) == ("dispatch-a", "update")
    assert result.status == ("completed" if winner.decision == "approve" else "rejected")
    assert result.task("hold").status == TaskStatus.COMPLETED
    await assert_replays(client, workflow_id)


def stale(request_id: str, real_hash: str) -> list[Any]:
    return [decision(request_id, "0" * 64)]


def unknown(request_id: str, real_hash: str) -> list[Any]:
    return [decision("dispatch-nope", real_hash)]


def no_reviewer(request_id: str, real_hash: str) -> list[Any]:
    payload = decision(request_id, real_hash)
    del payload["reviewer"]
    return [payload]


def no_payload(request_id: str, real_hash: str) -> list[Any]:
    return []  # what `temporal workflow update execute --name decide` sends without --input


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (stale, "APPROVAL_STALE_DECISION"),
        (unknown, "APPROVAL_UNKNOWN_REQUEST"),
        (no_reviewer, "INVALID_RUN_INPUT"),
        (no_payload, "INVALID_RUN_INPUT"),
    ],
    ids=["stale-hash", "unknown-request", "no-reviewer", "no-payload"],
)
async def test_refused_decide_update_records_nothing(
    start: Start,
    client: Client,
    workflow_id: str,
    args: Callable[[str, str], list[Any]],
    code: str,
) -> None:
    run = await start(two_steps(dispatch=["a"]))
    request = await run.request("dispatch-a")

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.handle.execute_update(
            UpdateName.DECIDE, args=args(request.request_id, request.request_hash)
        )

    assert refusal_code(refused.value) == code
    assert (await run.state()).approval_decisions == []
    assert await run.pending() == [request]
    assert "approval_refused" not in [e.type for e in await run.events()]
    await run.decide(request)
    assert (await run.result()).status == "completed"
    await assert_replays(client, workflow_id)


async def test_refused_decide_signals_become_approval_refused_events(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"]))
    request = await run.request("dispatch-a")

    await run.handle.signal(SignalName.DECIDE, decision("dispatch-a", "0" * 64))
    await run.handle.signal(SignalName.DECIDE, decision("dispatch-nope", request.request_hash))

    async def refusals() -> list[str] | None:
        found = [e.detail or "" for e in await run.events() if e.type == "approval_refused"]
        return found if len(found) == 2 else None

    stale_detail, unknown_detail = await eventually(refusals, "two approval_refused events", 10)
    assert stale_detail.startswith("dispatch-a: APPROVAL_STALE_DECISION: ")
    assert unknown_detail == (
        "dispatch-nope: APPROVAL_UNKNOWN_REQUEST: no approval request 'dispatch-nope' "
        "in this run (requests: dispatch-a)"
    )
    assert (await run.state()).approval_decisions == []
    assert await run.pending() == [request]
    await run.signal_decision(request)
    result = await run.result()
    assert result.status == "completed"
    assert [(d.request_id, d.source) for d in result.approval_decisions] == [
        ("dispatch-a", "signal")
    ]
    await assert_replays(client, workflow_id)


async def test_decide_signal_without_a_payload_is_refused_as_an_event(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"]))
    request = await run.request("dispatch-a")

    try:
        # what `temporal workflow signal --name decide` sends without --input
        await run.handle.signal(SignalName.DECIDE)
        await run.signal_decision(request)
        result = await result_within(run, 5)
    finally:
        await terminate_if_running(run)

    assert result.status == "completed"
    refused = [e.detail or "" for e in await run.events() if e.type == "approval_refused"]
    assert len(refused) == 1 and "INVALID_RUN_INPUT" in refused[0]
    await assert_replays(client, workflow_id)


async def test_request_hash_is_sha256_of_canonical_scope_boundary_and_content(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"]))
    request = await run.request("dispatch-a")

    assert (request.scope, request.boundary) == (workflow_id, "dispatch")
    assert request.content == {
        "id": "a",
        "title": "A",
        "description": "do a",
        "assignee": "w",
        "depends_on": [],
    }
    canonical = json.dumps(
        {"scope": workflow_id, "boundary": "dispatch", "content": request.content},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert request.request_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert request_hash(request.scope, request.boundary, request.content) == request.request_hash
    reordered = dict(reversed(list(request.content.items())))
    assert request_hash(workflow_id, "dispatch", reordered) == request.request_hash
    await run.decide(request)
    assert (await run.result()).status == "completed"
    await assert_replays(client, workflow_id)


# -- expiry -----------------------------------------------------------------


async def test_expired_request_with_on_timeout_reject_rejects_the_run(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"], timeout_s=1, on_timeout="reject"))

    result = await run.result()

    assert (result.status, result.success, result.error_code) == (
        "rejected",
        False,
        "APPROVAL_REJECTED",
    )
    assert statuses(result) == {"a": TaskStatus.SKIPPED, "b": TaskStatus.SKIPPED}
    [recorded] = result.approval_decisions
    assert (recorded.request_id, recorded.decision, recorded.reviewer.id, recorded.source) == (
        "dispatch-a",
        "reject",
        "oma:timeout",
        "timeout",
    )
    events = {e.type: e.at for e in await run.events()}
    assert (events["approval_decision"] - events["approval_request"]).total_seconds() >= 1
    assert await children_started(client, workflow_id) == []
    await assert_replays(client, workflow_id)


async def test_expired_request_with_on_timeout_approve_runs_the_task(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"], timeout_s=1, on_timeout="approve"))

    result = await run.result()

    assert result.status == "completed"
    assert result.task("a").output == "w done"
    [recorded] = result.approval_decisions
    assert (recorded.request_id, recorded.decision, recorded.reviewer.id, recorded.source) == (
        "dispatch-a",
        "approve",
        "oma:timeout",
        "timeout",
    )
    await assert_replays(client, workflow_id)


async def test_decision_arriving_with_the_expiry_in_one_workflow_task_is_recorded_once(
    client: Client, workflow_id: str
) -> None:
    # With no worker, the expiry timer fires on the server and the decision
    # signal lands after it: the next worker sees both in one workflow task.
    queue = f"approvals-expiry-{uuid.uuid4().hex[:8]}"
    run_input = two_steps(dispatch=["a"], timeout_s=1, on_timeout="reject")
    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        run = await start_run(client, workflow_id, run_input, task_queue=queue)
        request = await run.request("dispatch-a")

    async def timer_fired() -> bool | None:
        history = await run.handle.fetch_history()
        return any(e.HasField("timer_fired_event_attributes") for e in history.events) or None

    await eventually(timer_fired, "the expiry timer to fire", 10)
    await run.signal_decision(request, reviewer="bob")
    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        result = await asyncio.wait_for(run.result(), 60)

    # whichever came first, exactly one decision counts, and the run follows it
    [recorded] = result.approval_decisions
    if recorded.decision == "approve":
        assert (result.status, result.task("a").status) == ("completed", TaskStatus.COMPLETED)
    else:
        assert (result.status, result.task("a").status) == ("rejected", TaskStatus.SKIPPED)
    await assert_replays(client, workflow_id)


# -- abort ------------------------------------------------------------------


async def test_abort_while_the_root_awaits_dispatch_approval_skips_every_task(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch="all"))
    await run.request("dispatch-a")

    await run.abort("changed my mind")
    result = await run.result()

    assert (result.status, result.error_code, result.error) == (
        "cancelled",
        "ABORTED",
        "aborted: changed my mind",
    )
    assert statuses(result) == {"a": TaskStatus.SKIPPED, "b": TaskStatus.SKIPPED}
    assert result.approval_decisions == []
    assert await run.pending() == []
    assert await children_started(client, workflow_id) == []
    await assert_replays(client, workflow_id)


async def test_abort_lets_the_task_in_flight_complete_and_skips_its_dependents(
    start: Start, client: Client, workflow_id: str, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    slow = (
        "import sys, time; sys.stdin.read(); "
        f"open({str(started)!r}, 'w').write('yes\\n'); time.sleep(2); print('slow done')"
    )
    run = await start(
        {
            "team": team(process("slow", slow), scripted("w", "w done")),
            "tasks": [task("slow", "slow"), task("after", "w", "slow")],
        }
    )
    await wait_for_file(started)

    await run.abort("enough")
    result = await run.result()

    assert (result.status, result.error_code) == ("cancelled", "ABORTED")
    assert (result.task("slow").status, result.task("slow").output) == (
        TaskStatus.COMPLETED,
        "slow done\n",
    )
    assert result.task("after").status == TaskStatus.SKIPPED
    assert await children_started(client, workflow_id) == [f"{workflow_id}/slow"]
    await assert_replays(client, workflow_id)


async def test_abort_during_a_retry_delay_starts_no_new_attempt(
    start: Start, client: Client, workflow_id: str, tmp_path: Path
) -> None:
    attempts = tmp_path / "attempts"
    code = (
        "import sys, time; sys.stdin.read(); "
        f"open({str(attempts)!r}, 'a').write('attempt\\n'); time.sleep(10)"
    )
    flaky = {**task("flaky", "p"), "timeout_s": 1, "max_retries": 1, "retry_delay_s": 1.5}
    run = await start(
        {"team": team(process("p", code)), "tasks": [flaky, task("after", "p", "flaky")]}
    )

    async def retrying() -> bool | None:
        return any(e.type == "task_retry" for e in await run.events()) or None

    await eventually(retrying, "the task to wait for its retry", WAIT_S)
    await run.abort("enough")
    result = await run.result()

    assert result.status == "cancelled"
    assert attempts.read_text() == "attempt\n"
    flaky_state = result.task("flaky")
    assert (flaky_state.status, flaky_state.attempts, flaky_state.error_code) == (
        TaskStatus.FAILED,
        1,
        "TASK_TIMEOUT",
    )
    # the abort, not the timeout, kept the dependent from running
    assert (result.task("after").status, result.task("after").error) == (
        TaskStatus.SKIPPED,
        "skipped: aborted: enough",
    )
    await assert_replays(client, workflow_id)


async def test_abort_during_a_round_approval_wait_keeps_the_completed_round(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(round=True))
    await run.decide(await run.request("round-1"))
    await run.request("round-2")

    await run.abort("stop after round one")
    result = await run.result()

    assert (result.status, result.error_code) == ("cancelled", "ABORTED")
    assert statuses(result) == {"a": TaskStatus.COMPLETED, "b": TaskStatus.SKIPPED}
    assert [d.request_id for d in result.approval_decisions] == ["round-1"]
    assert await run.pending() == []
    await assert_replays(client, workflow_id)


# -- dispatch gates ---------------------------------------------------------


async def test_pending_dispatch_approval_blocks_only_its_task(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(
        with_approvals(
            {
                "team": team(scripted("w", "w done")),
                "tasks": [
                    task("gated", "w"),
                    task("after", "w", "gated"),
                    task("free", "w"),
                    task("free-next", "w", "free"),
                ],
            },
            dispatch=["gated"],
        )
    )
    request = await run.request("dispatch-gated")

    state = await run.state_where(
        lambda s: s.task("free-next").status == TaskStatus.COMPLETED, "the free branch to complete"
    )

    assert statuses(state) == {
        "gated": TaskStatus.AWAITING_APPROVAL,
        "after": TaskStatus.BLOCKED,
        "free": TaskStatus.COMPLETED,
        "free-next": TaskStatus.COMPLETED,
    }
    assert await run.pending() == [request]
    await run.decide(request)
    result = await run.result()
    assert set(statuses(result).values()) == {TaskStatus.COMPLETED}
    # the dispatch request's events name its task
    approval_events = [
        (e.type, e.task_id) for e in await run.events() if e.type.startswith("approval_")
    ]
    assert approval_events == [("approval_request", "gated"), ("approval_decision", "gated")]
    await assert_replays(client, workflow_id)


async def test_dispatch_list_gates_the_tasks_of_a_named_agent(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(
        with_approvals(
            {
                "team": team(scripted("careful", "checked"), scripted("quick", "done")),
                "tasks": [task("x", "careful"), task("y", "quick"), task("z", "careful")],
            },
            dispatch=["careful"],
        )
    )

    state = await run.state_where(
        lambda s: s.task("y").status == TaskStatus.COMPLETED, "the ungated task to complete"
    )

    assert [r.request_id for r in await run.pending()] == ["dispatch-x", "dispatch-z"]
    assert statuses(state)["x"] == statuses(state)["z"] == TaskStatus.AWAITING_APPROVAL
    for request in await run.pending():
        await run.decide(request)
    assert (await run.result()).status == "completed"
    await assert_replays(client, workflow_id)


async def test_dispatch_list_gates_an_unassigned_task_the_scheduler_gives_that_agent(
    start: Start, client: Client, workflow_id: str
) -> None:
    ship = {"id": "ship", "title": "Ship", "description": "ship it"}  # no assignee
    run = await start(
        with_approvals(
            {"team": team(scripted("deployer", "shipped")), "tasks": [ship]},
            dispatch=["deployer"],
        )
    )

    state = await run.state_where(
        lambda s: s.task("ship").status != TaskStatus.PENDING, "the task to be gated or started"
    )

    assert state.task("ship").status == TaskStatus.AWAITING_APPROVAL
    request = await run.request("dispatch-ship")
    await run.decide(request)
    result = await run.result()
    assert (result.task("ship").assignee, result.task("ship").status) == (
        "deployer",
        TaskStatus.COMPLETED,
    )
    await assert_replays(client, workflow_id)


# -- the plan gate ----------------------------------------------------------


def goal_run(**approvals: Any) -> dict[str, Any]:
    return with_approvals(
        {
            "team": team(scripted("researcher", "the facts"), scripted("writer", "the text")),
            "goal": "explain approvals",
            "coordinator": {"provider": "scripted", "script": [PLAN, "the final answer"]},
        },
        **approvals,
    )


async def test_plan_approval_shows_the_plan_and_approve_runs_it_and_synthesizes(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(goal_run(plan=True))
    request = await run.request("plan")

    plan = (await run.state()).plan
    assert plan is not None
    assert (request.boundary, request.content) == ("plan", plan.model_dump(mode="json"))
    assert [
        (t["id"], t["title"], t["assignee"], t["depends_on"]) for t in request.content["tasks"]
    ] == [("t1", "Research", "researcher", []), ("t2", "Write", "writer", ["t1"])]
    assert request_hash(workflow_id, "plan", request.content) == request.request_hash
    assert await children_started(client, workflow_id) == [f"{workflow_id}/coordinator/plan"]
    await run.decide(request)
    result = await run.result()
    assert (result.status, result.final_output) == ("completed", "the final answer")
    assert [(t.id, t.status, t.output) for t in result.tasks] == [
        ("t1", TaskStatus.COMPLETED, "the facts"),
        ("t2", TaskStatus.COMPLETED, "the text"),
    ]
    assert [(d.request_id, d.boundary) for d in result.approval_decisions] == [("plan", "plan")]
    await assert_replays(client, workflow_id)


async def test_rejected_plan_runs_no_task_and_no_synthesis(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(goal_run(plan=True))
    request = await run.request("plan")

    await run.decide(request, "reject", reviewer="carol")
    result = await run.result()

    assert (result.status, result.error_code, result.final_output) == (
        "rejected",
        "APPROVAL_REJECTED",
        None,
    )
    assert [(t.id, t.status, t.attempts) for t in result.tasks] == [
        ("t1", TaskStatus.SKIPPED, 0),
        ("t2", TaskStatus.SKIPPED, 0),
    ]
    assert await children_started(client, workflow_id) == [f"{workflow_id}/coordinator/plan"]
    await assert_replays(client, workflow_id)


async def test_abort_during_the_plan_approval_wait_runs_nothing_more(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(goal_run(plan=True))
    await run.request("plan")

    await run.abort("not today")
    result = await run.result()

    assert (result.status, result.error_code, result.final_output) == (
        "cancelled",
        "ABORTED",
        None,
    )
    assert set(statuses(result).values()) == {TaskStatus.SKIPPED}
    assert await run.pending() == []
    assert await children_started(client, workflow_id) == [f"{workflow_id}/coordinator/plan"]
    await assert_replays(client, workflow_id)


# -- the round gate ---------------------------------------------------------


def snapshot(task_id: str, status: str, output: str | None = None, *deps: str) -> dict[str, Any]:
    """A task as an approval request shows it."""
    return {
        "id": task_id,
        "title": task_id.capitalize(),
        "description": f"do {task_id}",
        "assignee": "w",
        "depends_on": list(deps),
        "status": status,
        "output": output,
    }


async def test_round_approvals_show_the_completed_round_and_the_next(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(
        with_approvals(
            {
                "team": team(scripted("w", "w done")),
                "tasks": [task("a", "w"), task("b", "w"), task("c", "w", "a", "b")],
            },
            round=True,
        )
    )

    first = await run.request("round-1")
    assert (first.boundary, first.content) == (
        "round",
        {"round": 1, "completed": [], "next": [snapshot("a", "pending"), snapshot("b", "pending")]},
    )
    await run.decide(first)
    second = await run.request("round-2")
    assert second.content == {
        "round": 2,
        "completed": [snapshot("a", "completed", "w done"), snapshot("b", "completed", "w done")],
        "next": [snapshot("c", "pending", None, "a", "b")],
    }
    await run.decide(second)
    result = await run.result()
    assert result.status == "completed"
    assert [d.request_id for d in result.approval_decisions] == ["round-1", "round-2"]
    await assert_replays(client, workflow_id)


async def test_round_and_dispatch_approvals_together_are_invalid_before_anything_runs(
    start: Start, client: Client, workflow_id: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    run = await start(
        with_approvals(
            {
                "team": team(process("p", f"open({str(marker)!r}, 'w')")),
                "tasks": [task("a", "p")],
            },
            round=True,
            dispatch="all",
        )
    )

    with pytest.raises(WorkflowFailureError) as failed:
        await run.result()

    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_RUN_INPUT"
    assert "options.approvals" in cause.message and "mutually exclusive" in cause.message
    assert await children_started(client, workflow_id) == []
    assert not marker.exists()
    await assert_replays(client, workflow_id)


# -- Temporal cancellation --------------------------------------------------


async def test_cancel_during_an_approval_wait_skips_every_task_and_closes_the_request(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"]))
    await run.request("dispatch-a")

    await run.handle.cancel()

    with pytest.raises(WorkflowFailureError) as failed:
        await run.result()
    assert isinstance(failed.value.cause, CancelledError)
    state = await run.state()
    assert state.status == "cancelled"
    assert statuses(state) == {"a": TaskStatus.SKIPPED, "b": TaskStatus.SKIPPED}
    assert await run.pending() == []
    await assert_replays(client, workflow_id)


SPAWN_AND_HANG = (
    "import os, subprocess, sys, time; sys.stdin.read(); "
    "child = subprocess.Popen(['sleep', '60']); "
    "open('pids', 'w').write(f'{os.getpid()} {child.pid}\\n'); time.sleep(60)"
)


async def test_cancel_kills_the_running_task_process_tree_and_skips_the_rest(
    start: Start, client: Client, workflow_id: str, tmp_path: Path
) -> None:
    run = await start(
        {
            "team": team(
                process("hang", SPAWN_AND_HANG, cwd=str(tmp_path)), scripted("w", "w done")
            ),
            "tasks": [task("hang", "hang"), task("after", "w", "hang")],
        }
    )
    pids = [int(p) for p in (await wait_for_file(tmp_path / "pids")).split()]
    assert all(alive(pid) for pid in pids)

    cancelled_at = time.monotonic()
    await run.handle.cancel()
    while any(alive(pid) for pid in pids) and time.monotonic() - cancelled_at < 2.0:
        await asyncio.sleep(0.02)

    assert [pid for pid in pids if alive(pid)] == []
    with pytest.raises(WorkflowFailureError) as failed:
        await run.result()
    assert isinstance(failed.value.cause, CancelledError)
    state = await run.state()
    assert state.status == "cancelled"
    assert (state.task("hang").status, state.task("hang").error_code) == (
        TaskStatus.FAILED,
        "CANCELLED",
    )
    assert state.task("after").status == TaskStatus.SKIPPED
    # the dependent was skipped because the run stopped, not because its
    # dependency failed on its own
    assert state.task("after").error == "skipped: the run was cancelled"
    await assert_replays(client, workflow_id)


# -- payloads of the wrong arity ------------------------------------------


async def test_signals_and_updates_with_two_payloads_are_refused_not_stuck(
    start: Start, client: Client, workflow_id: str
) -> None:
    # the stock CLI sends one payload per --input: two must not fail the
    # workflow task for good (a handler taking one argument would)
    run = await start(two_steps(dispatch=["a"]))
    request = await run.request("dispatch-a")
    payload = decision(request.request_id, request.request_hash, "approve", "alice")

    await run.handle.signal(SignalName.DECIDE, args=[payload, payload])
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.handle.execute_update(UpdateName.DECIDE, args=[payload, payload])
    assert refusal_code(refused.value) == "INVALID_RUN_INPUT"

    refusals = [e for e in await run.events() if e.type == "approval_refused"]
    assert [e.detail for e in refusals] == [
        "(no request_id): INVALID_RUN_INPUT: a decision takes exactly one input, a JSON "
        "object; got 2"
    ]
    assert await run.pending() == [request]
    await run.handle.signal(SignalName.ABORT, args=[{"reason": "enough"}, "extra"])
    result = await result_within(run, 10)
    assert (result.status, result.error) == ("cancelled", "aborted: enough")
    await assert_replays(client, workflow_id)


# -- a decision sent as the run starts --------------------------------------


async def test_decide_update_sent_as_the_run_starts_sees_its_requests(
    start: Start, client: Client, workflow_id: str
) -> None:
    run = await start(two_steps(dispatch=["a"]))

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.handle.execute_update(UpdateName.DECIDE, decision("dispatch-a", "x"))

    assert refusal_code(refused.value) == "APPROVAL_STALE_DECISION"
    await run.abort("done")
    assert (await run.result()).status == "cancelled"
    await assert_replays(client, workflow_id)


async def test_decide_update_with_start_sees_the_new_runs_requests(
    client: Client, worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    operation = WithStartWorkflowOperation(
        WorkflowName.TEAM_RUN,
        two_steps(dispatch=["a"]),
        id=workflow_id,
        task_queue=TASK_QUEUE,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        result_type=TeamRunResult,
    )

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await client.execute_update_with_start_workflow(
            UpdateName.DECIDE, decision("dispatch-a", "x"), start_workflow_operation=operation
        )

    assert refusal_code(refused.value) == "APPROVAL_STALE_DECISION"
    run = Run(await operation.workflow_handle())
    await run.abort("done")
    assert (await run.result()).status == "cancelled"
    await assert_replays(client, workflow_id)


@pytest.mark.parametrize("by", ["update", "signal"])
async def test_the_first_decision_after_a_worker_restart_is_recorded(
    client: Client, workflow_id: str, by: str
) -> None:
    # A worker of its own, stopped and started again: the new one replays the
    # run (no cache) in the workflow task that brings the update.
    queue = f"approvals-restart-{uuid.uuid4().hex[:8]}"
    run_input = two_steps(dispatch=["b"])
    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        run = await start_run(client, workflow_id, run_input, task_queue=queue)
        request = await run.request("dispatch-b")

    async with oma_worker.build_worker(client, queue, scripted_activities(queue)):
        if by == "update":
            await run.decide(request)
        else:
            await run.signal_decision(request)
        result = await result_within(run, WAIT_S)

    assert [(d.request_id, d.decision, d.source) for d in result.approval_decisions] == [
        ("dispatch-b", "approve", by)
    ]
    history = await run.handle.fetch_history()
    assert not any(e.HasField("timer_started_event_attributes") for e in history.events)
    assert (result.status, [t.status for t in result.tasks]) == (
        "completed",
        [TaskStatus.COMPLETED, TaskStatus.COMPLETED],
    )
    await assert_replays(client, workflow_id)
