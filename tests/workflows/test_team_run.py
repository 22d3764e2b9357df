"""TeamRun: dependency order, parallel branches, the failure cascade, shared memory."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import TaskStatus
from oma.worker.plugin import DATA_CONVERTER
from oma.workflows.team_run import TeamRun
from tests.support.runs import (
    FOREIGN_QUEUE_SUFFIX,
    agent_result,
    assert_replays,
    process,
    run_team,
    scripted,
    start_team,
    task,
    team_result,
)

pytestmark = pytest.mark.usefixtures("worker")

# prints "<start> <end>" wall-clock seconds around a 1 s sleep
SLEEP_AND_STAMP = (
    "import time,sys; sys.stdin.read(); a=time.time(); time.sleep(1); print(a, time.time())"
)


async def test_dependent_task_sees_its_dependencies_outputs_labelled_by_title(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [
                    scripted("planner", "the plan: write slugify"),
                    process("echo", "import sys; print(sys.stdin.read())"),
                ],
            },
            "tasks": [task("plan", "planner"), task("code", "echo", "plan", description="code it")],
        },
    )
    assert result.status == "completed" and result.success
    assert result.task("code").output == (
        "# Task: Code\n\ncode it\n\n## Results of the tasks this one depends on\n\n"
        "### Plan\nthe plan: write slugify\n"
    )
    memory = await client.get_workflow_handle(workflow_id).query(QueryName.SHARED_MEMORY)
    assert memory == {
        "planner/task:plan:result": "the plan: write slugify",
        "echo/task:code:result": result.task("code").output,
    }
    assert await assert_replays(client, workflow_id) == 3


async def test_result_lists_every_task_with_status_and_output(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("a", "one two three")]},
            "tasks": [task("only", "a")],
        },
    )
    [only] = result.tasks
    assert (only.id, only.title, only.assignee, only.status, only.depends_on, only.output) == (
        "only",
        "Only",
        "a",
        TaskStatus.COMPLETED,
        [],
        "one two three",
    )
    tr = await agent_result(client, workflow_id, "only")
    assert (tr.status, tr.turns, tr.tool_calls, tr.error) == ("completed", 1, [], None)
    # the scripted provider counts words: 5 in the prompt "# Task: Only\n\ndo only", 3 out
    assert tr.token_usage.model_dump(include={"input_tokens", "output_tokens"}) == {
        "input_tokens": 5,
        "output_tokens": 3,
    }
    assert only.token_usage == tr.token_usage
    assert result.total_token_usage == tr.token_usage


def stamps(result: TeamRunResult) -> list[tuple[float, float]]:
    """The (start, end) each SLEEP_AND_STAMP task printed, left then right."""
    spans = ((result.task(t).output or "").split() for t in ("left", "right"))
    return [(float(a), float(b)) for a, b in spans]


async def test_independent_branches_overlap_in_time(client: Client, workflow_id: str) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("sleeper", SLEEP_AND_STAMP)]},
            "tasks": [task("left", "sleeper"), task("right", "sleeper")],
        },
    )
    (a0, a1), (b0, b1) = stamps(result)
    assert max(a0, b0) < min(a1, b1), "the two independent tasks did not run at the same time"


async def test_max_concurrency_one_runs_independent_tasks_one_at_a_time(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("sleeper", SLEEP_AND_STAMP)]},
            "tasks": [task("left", "sleeper"), task("right", "sleeper")],
            "options": {"max_concurrency": 1},
        },
    )
    (a0, a1), (b0, b1) = stamps(result)
    assert a1 <= b0 or b1 <= a0


async def test_failed_task_skips_its_transitive_dependents_while_a_sibling_completes(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [
                    scripted("ok", "fine", "fine", "fine"),
                    process("broken", "import sys; sys.stdin.read(); sys.exit(3)"),
                ],
            },
            "tasks": [
                task("root", "ok"),
                task("bad", "broken", "root"),
                task("child", "ok", "bad"),
                task("grandchild", "ok", "child"),
                task("sibling", "ok", "root"),
            ],
        },
    )
    status = {t.id: t.status for t in result.tasks}
    assert status == {
        "root": "completed",
        "bad": "failed",
        "child": "skipped",
        "grandchild": "skipped",
        "sibling": "completed",
    }
    assert (result.success, result.status) == (False, "failed")
    errors = {t.id: t.error for t in result.tasks}
    assert "exited with status 3" in (errors["bad"] or "")
    assert errors["grandchild"] == "skipped: dependency 'bad' (Bad) failed"
    assert result.task("bad").error_code == "PROCESS_FAILED"
    assert {t.id for t in result.tasks if t.attempts} == {"root", "bad", "sibling"}
    # the run and one AgentRun child per task that ran
    assert await assert_replays(client, workflow_id) == 4


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([task("a", "nobody")], "unknown assignee(s): task 'a' -> 'nobody'"),
        ([task("a", "w", "ghost")], "unknown dependency: task 'a' depends on 'ghost'"),
        ([task("a", "w"), task("a", "w")], "duplicate task id(s): a"),
        (
            [task("a", "w", "c"), task("b", "w", "a"), task("c", "w", "b")],
            "dependency cycle: a -> c -> b -> a",
        ),
    ],
    ids=["unknown-assignee", "unknown-dependency", "duplicate-id", "cycle"],
)
async def test_invalid_graph_fails_the_run_before_any_task_runs(
    client: Client, workflow_id: str, tasks: list[dict[str, object]], message: str
) -> None:
    with pytest.raises(WorkflowFailureError) as info:
        await run_team(
            client,
            workflow_id,
            {"team": {"name": "t", "agents": [scripted("w", "x")]}, "tasks": tasks},
        )
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == ("INVALID_TASK_GRAPH", True)
    assert message in cause.message
    # no task ran: the history started no child workflow
    assert await assert_replays(client, workflow_id) == 1


def test_an_agent_with_a_backend_rejects_llm_only_fields() -> None:
    from oma.core.schema.errors import InvalidRunInputError
    from oma.core.schema.run_input import parse_team_run_input

    agent = process("coder", "print(1)")
    agent["model"] = "claude-sonnet-4-6"
    with pytest.raises(InvalidRunInputError) as info:
        parse_team_run_input(
            {"team": {"name": "t", "agents": [agent]}, "tasks": [task("a", "coder")]}
        )
    assert (
        "team.agents[0]: agent 'coder' has a backend, so the LLM-only "
        "field(s) model do not apply; remove them" in info.value.message
    )


GLOB_THEN_NOTHING = {
    **scripted("a"),
    "tools": ["glob"],
    # turn 1 calls a tool; the script has no answer for turn 2
    "script": [[{"type": "tool_use", "id": "g", "name": "glob", "input": {"pattern": "*"}}]],
}


@pytest.mark.parametrize(
    ("agent", "code"),
    [
        # a scripted turn is a local activity: its failure reaches the
        # workflow without the ActivityError wrapper of a regular activity's
        (GLOB_THEN_NOTHING, "SCRIPT_EXHAUSTED"),
        ({**scripted("a", "fine"), "before_run": "tests.no_such_module:hook"}, "INVALID_HOOK"),
    ],
    ids=["script-exhausted", "unimportable-hook"],
)
async def test_a_failed_model_turn_or_hook_fails_its_task_and_the_run(
    client: Client, workflow_id: str, agent: dict[str, object], code: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [agent, scripted("b", "fine")]},
            "tasks": [task("first", "a"), task("then", "b", "first")],
        },
    )
    assert (result.success, result.status) == (False, "failed")
    assert [(t.id, t.status, t.error_code) for t in result.tasks] == [
        ("first", TaskStatus.FAILED, code),
        ("then", TaskStatus.SKIPPED, None),
    ]
    assert await assert_replays(client, workflow_id) == 2


@workflow.defn(name=WorkflowName.AGENT_RUN, sandboxed=False)
class ChildOfAnotherShape:
    """An ``AgentRun`` whose outcome this ``TeamRun`` cannot read as it
    expects (one from an older worker, or a fault): a failure whose details
    are not a partial result, or a result that is not an ``AgentRunResult``."""

    @workflow.run
    async def run(self, inp: dict[str, Any]) -> dict[str, Any]:
        if inp["task_id"] == "bare":
            raise ApplicationError("no script left", {"code": "SCRIPT_EXHAUSTED"}, type="X_CODE")
        return {"not": "an agent run result"}


async def test_a_task_whose_outcome_cannot_be_read_fails_with_a_code(
    client: Client, workflow_id: str
) -> None:
    # a worker of the real TeamRun and a child of another shape, on a queue of its own
    queue = f"{workflow_id}{FOREIGN_QUEUE_SUFFIX}"
    bare = Client(**{**client.config(), "plugins": [], "data_converter": DATA_CONVERTER})
    worker = Worker(
        bare,
        task_queue=queue,
        workflows=[TeamRun, ChildOfAnotherShape],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with worker:
        handle = await start_team(
            client,
            workflow_id,
            {
                "team": {"name": "t", "agents": [scripted("a", "fine")]},
                "tasks": [task("bare", "a"), task("odd", "a"), task("then", "a", "odd")],
            },
            task_queue=queue,
        )
        result = await team_result(handle)
        assert (result.success, result.status) == (False, "failed")
        states = {t.id: (t.status, t.error_code) for t in result.tasks}
        assert states == {
            "bare": (TaskStatus.FAILED, "X_CODE"),
            "odd": (TaskStatus.FAILED, "AGENT_RUN_FAILED"),
            "then": (TaskStatus.SKIPPED, None),
        }
        assert "could not read the task's outcome" in (result.task("odd").error or "")
        history = await handle.fetch_history()
    await Replayer(workflows=[TeamRun], data_converter=DATA_CONVERTER).replay_workflow(history)


async def test_a_task_s_agent_run_starts_with_its_input_without_nulls(
    client: Client, workflow_id: str
) -> None:
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("a", "fine")]},
            "tasks": [task("only", "a")],
        },
    )
    assert result.success
    history = await client.get_workflow_handle(f"{workflow_id}/only").fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    [sent] = DATA_CONVERTER.payload_converter.from_payloads(started.input.payloads)
    assert sent["agent"] == {
        "name": "a",
        "description": "",
        "system_prompt": "",
        "capabilities": [],
        "provider": "scripted",
        "script": ["fine"],
        "max_turns": 10,
        "max_tool_output_chars": 30000,
        "max_repeated_tool_calls": 5,
    }
    assert None not in sent.values() and sent["task_id"] == "only"
    assert sent["patched"] == ["oma-one-marker-2"]
    assert await assert_replays(client, workflow_id) == 2
