"""What a run holds stays under Temporal's payload limit, and what its input
turns into stays within Temporal's bounds: large outputs kept by reference,
long reasons and comments cut, many tasks carried, names, ids and durations
refused before anything runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.common import RawValue, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment

from oma import worker as oma_worker
from oma.activities import task_outputs
from oma.client.approvals import pending, upstream_outputs
from oma.client.fork import start_fork
from oma.client.runs import read_outputs, team_run_result
from oma.core.contracts.names import ActivityName, QueryName, UpdateName, WorkflowName
from oma.core.contracts.task_outputs import ReadOutputsInput
from oma.core.schema import limits
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.fork import ForkInput, ForkSpec
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import checked_team_run_input
from oma.core.schema.task import TaskStatus
from oma.records.histories import fetch_histories
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from oma.viewer.model import build_run_view
from oma.worker import plugin
from oma.workflows._visibility import STATUS
from tests.support.approvals import (
    Run,
    children_started,
    failure_at_once,
    result_within,
    start_run,
    terminate_if_running,
)
from tests.support.orchestration import ECHO, plan_answer, planned
from tests.support.runs import (
    TASK_QUEUE,
    assert_replays,
    process,
    scripted,
    start_team,
    task,
    team_result,
)

pytestmark = pytest.mark.usefixtures("worker")

RESULT_WAIT_S = 60.0
"""Long enough for ten process agents on a loaded machine; a run that wedges
never ends, and the test then fails naming its failed workflow tasks."""

DEPS = "## Results of the tasks this one depends on\n\n"

WRITE = "import sys; sys.stdin.read(); sys.stdout.write({expr})"


def writer(name: str, expr: str) -> dict[str, Any]:
    """A process agent whose output is the Python expression ``expr`` (the
    input stays small however large the output)."""
    return process(name, WRITE.format(expr=expr))


async def raw_result(client: Client, workflow_id: str) -> tuple[TeamRunResult, int]:
    """The run's result as the workflow returned it (outputs it keeps by
    reference not read back), and the size of its JSON in bytes."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    [done] = [
        e
        for e in history.events
        if e.event_type
        in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        )
    ]
    if done.HasField("workflow_execution_completed_event_attributes"):
        [payload] = done.workflow_execution_completed_event_attributes.result.payloads
    else:
        failure = done.workflow_execution_failed_event_attributes.failure
        [payload] = failure.application_failure_info.details.payloads
    return TeamRunResult.model_validate_json(payload.data), len(payload.data)


@pytest.fixture
async def run_of(client: Client, workflow_id: str) -> AsyncIterator[Any]:
    """Start a ``TeamRun`` of a run input; terminate it if the test leaves it running."""
    runs: list[Run] = []

    async def start(run_input: dict[str, Any]) -> Run:
        runs.append(await start_run(client, workflow_id, run_input))
        return runs[-1]

    yield start
    for run in runs:
        await terminate_if_running(run)


# -- outputs ---------------------------------------------------------------


async def test_ten_outputs_of_250_kb_complete_and_the_user_gets_every_full_output(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    outputs = [chr(ord("a") + n) * 250_000 for n in range(10)]
    assert len(outputs[0]) < limits.MAX_OUTPUT_BYTES
    agents = [writer(f"w{n}", f"{chr(ord('a') + n)!r} * 250_000") for n in range(10)]
    run = await run_of(
        {
            "team": {"name": "t", "agents": agents},
            "tasks": [task(f"t{n}", f"w{n}") for n in range(10)],
            "options": {"max_concurrency": 10},
        }
    )
    result = await result_within(run, RESULT_WAIT_S)

    assert result.status == "completed"
    assert [t.output for t in result.tasks] == outputs
    raw, size = await raw_result(client, workflow_id)
    assert size <= limits.RUN_STATE_BUDGET_BYTES
    kept = [t.id for t in raw.tasks if t.output_ref is not None]
    assert kept, "some outputs must be kept by reference"
    for t in raw.tasks:
        if t.output_ref is not None:
            assert (t.output, t.output_ref, t.output_bytes) == (
                None,
                f"{workflow_id}/{t.id}",
                250_000,
            )
    await assert_replays(client, workflow_id)


async def test_a_goal_run_synthesizes_from_ten_outputs_of_250_kb_and_reports(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    agents = [writer(f"w{n}", f"{chr(ord('a') + n)!r} * 250_000") for n in range(10)]
    plan = [planned(f"Part {n}", f"w{n}") for n in range(10)]
    run = await run_of(
        {
            "team": {"name": "t", "agents": agents},
            "goal": "write ten parts",
            "coordinator": {"provider": "scripted", "script": [plan_answer(*plan), "the answer"]},
            "options": {"max_concurrency": 10},
        }
    )
    result = await result_within(run, RESULT_WAIT_S)

    assert (result.status, result.final_output) == ("completed", "the answer")
    assert [t.output for t in result.tasks] == [chr(ord("a") + n) * 250_000 for n in range(10)]
    synthesis = client.get_workflow_handle(f"{workflow_id}/coordinator/synthesis")
    started = (await synthesis.fetch_history()).events[0]
    [payload] = started.workflow_execution_started_event_attributes.input.payloads
    [message] = json.loads(payload.data)["input"]
    prompt = message["content"][0]["text"]
    share = limits.SYNTHESIS_RESULTS_CHARS // 10
    for n in range(10):
        cut = limits.cut_text(chr(ord("a") + n) * 250_000, share)
        assert f"### Part {n} (completed)\n{cut}" in prompt
    await assert_replays(client, workflow_id)


async def test_dependents_read_outputs_kept_by_reference_across_continue_as_new(
    run_of: Any, client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small budget, so a handful of 2 KB outputs passes it; a short history,
    # so the run continues as new while consumers still wait for them.
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 24_000)
    made = {f"p{n}": f"<{n}>" + "x" * 2_000 for n in range(12)}
    agents = [writer(f"maker{n}", f"'<{n}>' + 'x' * 2_000") for n in range(12)]
    tasks = [
        t for n in range(12) for t in (task(f"p{n}", f"maker{n}"), task(f"c{n}", "echo", f"p{n}"))
    ]
    run = await run_of(
        {
            "team": {"name": "t", "agents": [*agents, process("echo", ECHO)]},
            "tasks": tasks,
            "options": {"max_concurrency": 1, "history_event_limit": 100},
        }
    )
    result = await result_within(run, RESULT_WAIT_S)

    assert result.status == "completed", [(t.id, t.error) for t in result.tasks if t.error]
    for n in range(12):
        assert result.task(f"p{n}").output == made[f"p{n}"]
        assert result.task(f"c{n}").output == (
            f"# Task: C{n}\n\ndo c{n}\n\n## Results of the tasks this one depends on\n\n"
            f"### P{n}\n{made[f'p{n}']}"
        )
    histories = await runs_of(client, workflow_id)
    carried = carried_inputs(histories)
    assert carried, "the run must continue as new"
    assert max(len(c) for c in carried) <= 24_000
    tasks = [t for c in carried for t in json.loads(c)["resume"]["result"]["tasks"]]
    assert any("output_ref" in t for t in tasks), "some outputs must be carried by reference"
    assert ActivityName.READ_TASK_OUTPUTS in activities_scheduled(histories)
    raw, size = await raw_result(client, workflow_id)
    assert size <= 24_000
    assert any(t.output_ref for t in raw.tasks)
    # `oma show` reads those from the children's completions in the histories
    view = await build_run_view(
        await fetch_histories(client, workflow_id), plugin.DATA_CONVERTER, workflow_id
    )
    assert {t.id: t.output for t in view.tasks} == {t.id: t.output for t in result.tasks}
    assert view.notes == []


async def runs_of(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """The history of every run of ``workflow_id``, first to last (each run
    continued as new into the next)."""
    described = await client.get_workflow_handle(workflow_id).describe()
    run_id = described.raw_description.workflow_execution_info.first_run_id
    histories = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        run_id = next(
            (
                e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                for e in history.events
                if e.HasField("workflow_execution_continued_as_new_event_attributes")
            ),
            "",
        )
    return histories


def carried_inputs(histories: list[WorkflowHistory]) -> list[bytes]:
    """The JSON of each input a run carried to the next."""
    return [
        e.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
        for h in histories
        for e in h.events
        if e.HasField("workflow_execution_continued_as_new_event_attributes")
    ]


def activities_scheduled(histories: list[WorkflowHistory]) -> list[str]:
    """The type of every activity the runs scheduled, in order."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for h in histories
        for e in h.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_an_earlier_run_under_the_same_workflow_id_reads_back_its_own_kept_output(
    run_of: Any, client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs one after the other under one workflow id (as `oma acp` runs
    # a session's prompts, or a user starts a run under an id used before),
    # each with a task t whose output the result keeps by reference: their
    # AgentRuns share the id <workflow id>/t, so the first run's reference
    # must name its own execution, not the latest.
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 3_000)
    first_run_id = ""
    for letter in "ab":
        run = await run_of(
            {
                "team": {"name": "t", "agents": [writer("w", f"{letter!r} * 5_000")]},
                "tasks": [task("t", "w")],
            }
        )
        first_run_id = first_run_id or str(run.handle.first_execution_run_id)
        assert (await result_within(run, RESULT_WAIT_S)).task("t").output == letter * 5_000
        await assert_replays(client, workflow_id)

    first = client.get_workflow_handle(workflow_id, run_id=first_run_id, result_type=TeamRunResult)
    history = await first.fetch_history()
    [done] = [
        e.workflow_execution_completed_event_attributes.result.payloads[0].data
        for e in history.events
        if e.HasField("workflow_execution_completed_event_attributes")
    ]
    [kept] = TeamRunResult.model_validate_json(done).tasks
    assert (kept.output, kept.output_ref) == (None, f"{workflow_id}/t")
    [child] = [
        e.child_workflow_execution_started_event_attributes.workflow_execution.run_id
        for e in history.events
        if e.HasField("child_workflow_execution_started_event_attributes")
    ]
    assert (await team_run_result(first, client)).task("t").output == "a" * 5_000
    assert kept.output_run_id == child
    # `oma show` of that first execution
    view = await build_run_view(
        await fetch_histories(client, workflow_id, first_run_id), plugin.DATA_CONVERTER
    )
    assert view.task("t").output == "a" * 5_000
    # and the latest run still reads its own
    latest = client.get_workflow_handle(workflow_id, result_type=TeamRunResult)
    assert (await team_run_result(latest, client)).task("t").output == "b" * 5_000
    # a run reads back its kept outputs (read_task_outputs) by execution too
    ref = f"{workflow_id}/t"
    read = ActivityEnvironment(client).run(
        task_outputs.read_task_outputs, ReadOutputsInput(refs=[ref], temporal_run_ids={ref: child})
    )
    assert (await read).outputs == {ref: "a" * 5_000}


async def test_a_fork_of_an_earlier_execution_reads_back_that_executions_kept_output(
    run_of: Any, client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as above, then a fork of the first execution under the same workflow
    # id (what oma acp's /retry does) runs c again: c reads p's output kept
    # by reference, which must be the first run's, not the second's
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 4_000)
    first_run_id = ""
    for letter in "ab":
        run = await run_of(
            {
                "team": {
                    "name": "t",
                    "agents": [writer("w", f"{letter!r} * 6_000"), process("echo", ECHO)],
                },
                "tasks": [task("p", "w"), task("c", "echo", "p")],
            }
        )
        first_run_id = first_run_id or str(run.handle.first_execution_run_id)
        assert (await result_within(run, RESULT_WAIT_S)).status == "completed"

    spec = ForkSpec(run_id=workflow_id, temporal_run_id=first_run_id, rerun=["c"])
    handle = await start_fork(client, ForkInput(fork=spec), id=workflow_id, task_queue=TASK_QUEUE)
    forked = await team_run_result(handle, client)

    assert forked.status == "completed", forked
    assert forked.task("p").reused_from is not None
    assert forked.task("p").output == "a" * 6_000
    assert forked.task("c").output == f"# Task: C\n\ndo c\n\n{DEPS}### P\n{'a' * 6_000}"
    await assert_replays(client, workflow_id)


# -- reasons and comments ----------------------------------------------------


async def test_an_abort_reason_of_1_9_mb_is_cut_and_the_run_ends(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    run = await run_of(
        {
            "team": {"name": "t", "agents": [scripted("a", "done")]},
            "tasks": [task("one", "a"), task("two", "a", "one")],
            "options": {"approvals": {"dispatch": "all"}},
        }
    )
    await run.request("dispatch-one")
    reason = "stop " * 380_000  # 1.9 MB
    await run.abort(reason)
    result = await result_within(run, RESULT_WAIT_S)

    kept = limits.MAX_REASON_CHARS - limits.CUT_MARK_CHARS
    cut = f"aborted: {reason[:kept]}… ({len(reason) - kept} more characters cut)"
    assert (result.status, result.error_code, result.error) == ("cancelled", "ABORTED", cut)
    assert {t.id: t.status for t in result.tasks} == {
        "one": TaskStatus.SKIPPED,
        "two": TaskStatus.SKIPPED,
    }
    abort = [e for e in await run.events() if e.type == "abort"]
    assert [e.detail for e in abort] == [cut.removeprefix("aborted: ")]
    await assert_replays(client, workflow_id)


async def test_two_approval_comments_of_1_1_mb_are_cut_and_the_run_completes(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    run = await run_of(
        {
            "team": {"name": "t", "agents": [scripted("a", "one done", "two done")]},
            "tasks": [task("one", "a"), task("two", "a")],
            "options": {"approvals": {"dispatch": "all"}, "max_concurrency": 1},
        }
    )
    comment = "fine " * 220_000  # 1.1 MB
    for request_id in ("dispatch-one", "dispatch-two"):
        request = await run.request(request_id)
        decision = {
            "request_id": request.request_id,
            "request_hash": request.request_hash,
            "decision": "approve",
            "reviewer": {"id": "alice"},
            "comment": comment,
        }
        recorded = await run.handle.execute_update(UpdateName.DECIDE, decision)
        kept = limits.MAX_REASON_CHARS - limits.CUT_MARK_CHARS
        assert recorded["comment"] == (
            f"{comment[:kept]}… ({len(comment) - kept} more characters cut)"
        )
    result = await result_within(run, RESULT_WAIT_S)

    assert result.status == "completed"
    assert [len(d.comment or "") for d in result.approval_decisions] == [
        len(recorded["comment"])
    ] * 2
    await assert_replays(client, workflow_id)


PRINTED = 250_000
"""What each of ``nine_printers``' tasks prints: nine make 2.25 MB, past Temporal's 2 MB."""


def nine_printers() -> tuple[dict[str, str], dict[str, Any]]:
    """Nine process tasks ``p0``..``p8`` that print ``PRINTED`` bytes each (the
    outputs by task id), and a tenth, ``g``, that reads them all: the run's
    ``team`` and ``tasks``."""
    outputs = {f"p{n}": chr(ord("a") + n) * PRINTED for n in range(9)}
    agents = [writer(f"w{n}", f"{chr(ord('a') + n)!r} * {PRINTED}") for n in range(9)]
    return outputs, {
        "team": {"name": "t", "agents": [*agents, process("echo", ECHO)]},
        "tasks": [
            *(task(p, f"w{n}") for n, p in enumerate(outputs)),
            {**task("g", "echo", *outputs), "memory_scope": "all"},
        ],
    }


async def test_a_running_run_holding_2_mb_of_outputs_answers_its_queries_within_the_limit(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    # nine process tasks print 250 000 bytes each (2.25 MB, past Temporal's
    # 2 MB payload limit); a tenth reads them and waits on a dispatch
    # approval (it reads their summary, memory_scope all), so the run stays
    # open holding every output whole: its queries answer with the outputs
    # kept by reference, and the clients read them back as they do an ended
    # run's
    outputs, team_and_tasks = nine_printers()
    run = await run_of(
        {
            **team_and_tasks,
            "options": {"max_concurrency": 9, "approvals": {"dispatch": ["g"]}},
        }
    )
    request = await run.request("dispatch-g", RESULT_WAIT_S)
    handle = client.get_workflow_handle(workflow_id)

    answer = await asyncio.wait_for(handle.query(QueryName.STATE, result_type=RawValue), 10)
    assert len(answer.payload.data) <= limits.RUN_STATE_BUDGET_BYTES
    state = TeamRunResult.model_validate_json(answer.payload.data)
    assert state.status == "running"
    assert [(t.id, t.status.value) for t in state.tasks] == [
        *((p, "completed") for p in outputs),
        ("g", "awaiting_approval"),
    ]
    kept = [t for t in state.tasks if t.output_ref is not None]
    assert kept, "some outputs must be kept by reference"
    for t in kept:
        assert (t.output, t.output_ref, t.output_bytes) == (None, f"{workflow_id}/{t.id}", PRINTED)
    await read_outputs(client, state)  # as oma.client reads an ended run's
    assert {t.id: t.output for t in state.tasks} == {**outputs, "g": None}

    memory = await asyncio.wait_for(handle.query(QueryName.SHARED_MEMORY, result_type=RawValue), 10)
    assert len(memory.payload.data) <= limits.RUN_STATE_BUDGET_BYTES
    entries = json.loads(memory.payload.data)
    assert sorted(entries) == [f"w{n}/task:p{n}:result" for n in range(9)]
    assert any(v.startswith("(kept by reference: the result of ") for v in entries.values())
    [shown] = await asyncio.wait_for(pending(handle), 10)
    assert shown.upstream is not None
    assert [u.preview for u in shown.upstream] == [o[:500] for o in outputs.values()]
    assert await asyncio.wait_for(upstream_outputs(handle, shown), 30) == outputs
    # `oma show` draws the run from its histories
    view = await build_run_view(
        await fetch_histories(client, workflow_id), plugin.DATA_CONVERTER, workflow_id
    )
    assert {t.id: t.output for t in view.tasks} == {**outputs, "g": None}

    await run.decide(request)
    result = await result_within(run, RESULT_WAIT_S)
    assert result.status == "completed"
    assert {t.id: t.output for t in result.tasks if t.id != "g"} == outputs
    await assert_replays(client, workflow_id)


async def test_a_round_request_showing_2_mb_of_outputs_answers_within_the_limit(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    # as above, in rounds: the second round's request shows the first
    # round's nine outputs (2.25 MB); the pending_approvals query answers
    # with them kept by reference, and the reviewer's decision still holds
    outputs, team_and_tasks = nine_printers()
    run = await run_of(
        {
            **team_and_tasks,
            "options": {"max_concurrency": 9, "approvals": {"round": True}},
        }
    )
    await run.decide(await run.request("round-1", RESULT_WAIT_S))
    second = await run.request("round-2", RESULT_WAIT_S)
    handle = client.get_workflow_handle(workflow_id)

    answer = await asyncio.wait_for(
        handle.query(QueryName.PENDING_APPROVALS, result_type=RawValue), 10
    )
    assert len(answer.payload.data) <= limits.RUN_STATE_BUDGET_BYTES
    [shown] = json.loads(answer.payload.data)
    completed = shown["content"]["completed"]
    assert [(t["id"], t["status"]) for t in completed] == [(p, "completed") for p in outputs]
    kept = [t for t in completed if "output_ref" in t]
    assert kept, "some outputs must be kept by reference"
    for t in kept:
        assert "output" not in t
        assert (t["output_ref"], t["output_bytes"]) == (f"{workflow_id}/{t['id']}", PRINTED)
    assert all(t["output"] == outputs[t["id"]] for t in completed if "output_ref" not in t)
    assert shown["request_hash"] == second.request_hash

    await run.decide(second)
    result = await result_within(run, RESULT_WAIT_S)
    assert result.status == "completed"
    assert {t.id: t.output for t in result.tasks if t.id != "g"} == outputs
    await assert_replays(client, workflow_id)


# -- what the input becomes in Temporal ----------------------------------------

TOO_LONG_FOR_TEMPORAL = {
    "team name (a search attribute)": (
        {"team": {"name": "t" * 3000, "agents": [scripted("a", "x")]}, "tasks": [task("one", "a")]},
        "team.name: String should have at most 100 characters",
    ),
    "agent name (a search attribute)": (
        {
            "team": {"name": "t", "agents": [scripted("a" * 3000, "x")]},
            "tasks": [task("one", "a" * 3000)],
        },
        "team.agents[0].name: String should have at most 100 characters",
    ),
    "task id (a workflow id)": (
        {"team": {"name": "t", "agents": [scripted("a", "x")]}, "tasks": [task("i" * 1000, "a")]},
        "tasks[0].id: String should have at most 100 characters",
    ),
    "timeout (a timer)": (
        {
            "team": {"name": "t", "agents": [scripted("a", "x")]},
            "tasks": [task("one", "a")],
            "options": {"timeout_s": 1e30},
        },
        "options.timeout_s: Input should be less than or equal to 3153600000",
    ),
    "price (a turn's cost, a JSON number)": (
        # a finite price whose cost is not: 0 cache tokens x (1.25 x 1e308) is
        # NaN, which JSON carries as null and no task can then decode
        {
            "team": {"name": "t", "agents": [scripted("a", "x")]},
            "tasks": [task("one", "a")],
            "options": {"pricing": {"scripted": {"input": 1e308, "output": 0}}},
        },
        "options.pricing.scripted.input: Input should be less than or equal to 1000000",
    ),
}


@pytest.mark.parametrize("case", TOO_LONG_FOR_TEMPORAL, ids=list(TOO_LONG_FOR_TEMPORAL))
async def test_input_past_temporals_bounds_fails_the_run_at_once_naming_the_field(
    client: Client, workflow_id: str, case: str
) -> None:
    # started as `temporal workflow start` would, past the client's checks
    run_input, field = TOO_LONG_FOR_TEMPORAL[case]
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        json.loads(json.dumps(run_input)),
        id=workflow_id,
        task_queue=TASK_QUEUE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(STATUS, "running")]),
    )
    assert field in (await failure_at_once(handle, "INVALID_RUN_INPUT")).message
    described = await handle.describe()
    assert described.typed_search_attributes.get(STATUS) == "failed"


async def test_a_workflow_id_whose_task_ids_would_pass_temporals_limit_fails_at_once(
    client: Client,
) -> None:
    # a stock-CLI start: 950 bytes of workflow id, a task id of 80: the
    # child's id `<run id>/<task id>` would pass Temporal's 1000
    long_id = f"long-{uuid.uuid4().hex}-" + "w" * 900
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {"team": {"name": "t", "agents": [scripted("a", "x")]}, "tasks": [task("i" * 80, "a")]},
        id=long_id,
        task_queue=TASK_QUEUE,
    )
    failure = await failure_at_once(handle, "INVALID_RUN_INPUT")
    assert "over Temporal's limit of 1000 bytes on a workflow id" in failure.message


# -- large fields of the input ------------------------------------------------

BIG_GOAL = {
    "team": {"name": "t", "agents": [scripted("a", "done")]},
    "goal": "g" * 1_400_000,
    "coordinator": {"provider": "scripted", "script": [plan_answer(planned("Do", "a")), "ans"]},
}
"""A goal of 1.4 MB: within the payload limit, and the budget once; a goal
run holds it three times (input, result's goal, plan's goal)."""


async def test_a_goal_over_its_limit_fails_the_run_at_once_before_the_coordinator_plans(
    client: Client, workflow_id: str
) -> None:
    # started as `temporal workflow start` would, past the client's checks
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN, BIG_GOAL, id=workflow_id, task_queue=TASK_QUEUE
    )
    failure = await failure_at_once(handle, "INVALID_RUN_INPUT")
    assert failure.message.startswith("goal: the goal is 1400002 bytes of JSON")
    assert "this run's goal may be at most" in failure.message
    assert await children_started(client, workflow_id) == [], "nothing ran"
    await assert_replays(client, workflow_id)


async def test_a_goal_of_the_largest_size_the_refusal_states_runs_to_its_end(
    run_of: Any, client: Client, workflow_id: str
) -> None:
    with pytest.raises(InvalidRunInputError) as info:
        checked_team_run_input(BIG_GOAL)
    most = int(info.value.message.split("may be at most ")[1].split()[0])
    run_input = {**BIG_GOAL, "goal": "g" * (most - 2)}  # its JSON: `most` bytes
    checked_team_run_input(run_input)

    result = await result_within(await run_of(run_input), RESULT_WAIT_S)

    assert (result.status, result.final_output) == ("completed", "ans")
    assert result.goal == run_input["goal"] and result.plan and result.plan.goal == result.goal
    _, size = await raw_result(client, workflow_id)
    assert 2 * most < size <= limits.RUN_STATE_BUDGET_BYTES
    await assert_replays(client, workflow_id)


async def test_a_goal_run_recorded_before_its_goal_was_counted_thrice_replays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run the check lets through records no patch marker, as the runs from
    # before it; replayed where the check refuses its goal (a smaller
    # budget), it takes the path those runs took (the goal counted once,
    # after planning) instead of failing, a nondeterminism.
    run_input = {**BIG_GOAL, "goal": "g" * 10_000}
    async with own_server_with_budget(monkeypatch, 100_000) as (client, queue):
        handle = await start_team(client, "goal-counted", run_input, task_queue=queue)
        result = await asyncio.wait_for(team_result(handle), RESULT_WAIT_S)
        assert result.status == "completed"
        history = await handle.fetch_history()
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 30_000)
    with pytest.raises(InvalidRunInputError, match="goal may be at most"):
        checked_team_run_input(run_input)
    await plugin.replayer().replay_workflow(history)


@pytest.mark.parametrize("field", ["description", "system_prompt"])
async def test_a_task_description_or_a_system_prompt_near_the_budget_runs_to_its_end(
    run_of: Any, client: Client, workflow_id: str, field: str
) -> None:
    # what the input check lets through (it counts them once) a run holds
    # once, or in payloads of their own (the task's AgentRun, its turns)
    big = "d" * 1_500_000
    agent = scripted("a", "done", system_prompt=big if field == "system_prompt" else "")
    one = task("one", "a", description=big if field == "description" else "")
    run_input = {"team": {"name": "t", "agents": [agent]}, "tasks": [one]}
    checked_team_run_input(run_input)

    result = await result_within(await run_of(run_input), RESULT_WAIT_S)

    assert (result.status, result.tasks[0].output) == ("completed", "done")
    await assert_replays(client, workflow_id)


# -- what cannot fit even so ----------------------------------------------------------


@asynccontextmanager
async def own_server_with_budget(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> AsyncIterator[tuple[Client, str]]:
    """A dev server and a worker of their own (the client, the worker's task
    queue), with a run budget of ``budget`` bytes: the session's replay of
    every closed run uses the real budget, with which these runs would end
    otherwise."""
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", budget)
    queue = f"budget-{uuid.uuid4().hex[:8]}"
    with DevServer(port=free_port()) as server:
        client = await Connection.local(server.address, queue).connect()
        async with oma_worker.build_worker(client, queue):
            yield client, queue


TWENTY_TASKS = {
    "team": {"name": "t", "agents": [scripted("a", "done")]},
    "tasks": [task(f"t{n}", "a") for n in range(20)],
}


async def test_a_result_over_the_budget_in_full_leaves_out_its_tasks_defaults_and_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The 5,000-task bench's result was 2.1 MB, most of it fields at their
    # defaults (null errors, zero usage), and failed RUN_STATE_TOO_LARGE.
    async with own_server_with_budget(monkeypatch, 5_000) as (client, queue):
        handle = await start_team(client, "defaults-out", TWENTY_TASKS, task_queue=queue)
        result = await asyncio.wait_for(team_result(handle), RESULT_WAIT_S)
        sent, sent_size = await raw_result(client, "defaults-out")
        await assert_replays(client, "defaults-out")
    assert result.success
    assert [t.output for t in result.tasks] == ["done"] * 20, "every output in, none by reference"
    assert sent_size <= 5_000 < len(sent.model_dump_json()), "over the budget in full"
    assert result.tasks[0].error is None and result.tasks[0].attempts == 1


async def test_a_result_that_cannot_fit_even_by_reference_fails_the_run_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A budget the input passes but the result of twenty tasks cannot meet.
    async with own_server_with_budget(monkeypatch, 3_200) as (client, queue):
        handle = await start_team(client, "too-large", TWENTY_TASKS, task_queue=queue)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(team_result(handle), RESULT_WAIT_S)
        described = await handle.describe()
        await assert_replays(client, "too-large")
    failure = info.value.cause
    assert isinstance(failure, ApplicationError)
    assert failure.type == "RUN_STATE_TOO_LARGE"
    assert "over the run's budget of 3200 bytes (20 tasks)" in failure.message
    assert "each task's outcome is in its AgentRun 'too-large/<task id>'" in failure.message
    assert described.typed_search_attributes.get(STATUS) == "failed"


async def test_a_dispatch_request_reads_the_upstream_outputs_kept_by_reference(
    run_of: Any, client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, but the task the makers feed reads the whole memory (so the
    # resumed run reads nothing back) and waits for a dispatch approval: the
    # query answers with references, which the client reads.
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 24_000)
    made = {f"p{n}": f"<{n}>" + "x" * 2_000 for n in range(12)}
    agents = [writer(f"maker{n}", f"'<{n}>' + 'x' * 2_000") for n in range(12)]
    gated = {**task("g", "echo", *made), "memory_scope": "all"}
    await run_of(
        {
            "team": {"name": "t", "agents": [*agents, process("echo", ECHO)]},
            "tasks": [*(task(p, f"maker{n}") for n, p in enumerate(made)), gated],
            "options": {
                "max_concurrency": 1,
                "history_event_limit": 100,
                "approvals": {"dispatch": ["g"]},
            },
        }
    )
    handle = client.get_workflow_handle(workflow_id)
    raw: list[dict[str, Any]] = []
    for _ in range(int(RESULT_WAIT_S / 0.2)):
        with contextlib.suppress(RPCError):
            raw = await handle.query(QueryName.PENDING_APPROVALS, result_type=list[dict[str, Any]])
        if raw:
            break
        await asyncio.sleep(0.2)
    [request] = raw
    kept = [u["task_id"] for u in request["upstream"] if u["output_ref"] is not None]
    assert kept, "some upstream outputs must be kept by reference"
    assert all(request["upstream"][int(t[1:])]["preview"] is None for t in kept)

    [shown] = await pending(handle)
    assert shown.upstream is not None
    assert [(u.task_id, u.preview, u.output_chars) for u in shown.upstream] == [
        (p, output[:500], len(output)) for p, output in made.items()
    ]
    assert await upstream_outputs(handle, shown) == made
