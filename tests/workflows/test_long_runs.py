"""Long runs stay light per step: what one activation of a run does, and what
one turn reads, does not grow with the run (bench/tool_loop.py and
bench/dag_overhead.py time it). Real dev server, real workers on task queues
of their own, the real ``anthropic`` SDK against the local Messages API."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    WorkflowHistory,
)
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
)
from temporalio.worker import (
    Interceptor as WorkerInterceptor,
)

from oma import worker as oma_worker
from oma.activities._conversations import Conversations
from oma.core.contracts.llm import ConversationSlice, LlmTurnInput
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema import limits
from oma.core.schema.messages import text_of
from oma.core.schema.results import AgentRunResult
from oma.core.schema.task import TaskStatus
from oma.records.history_files import read_history_file
from oma.worker import plugin
from tests.support.anthropic_server import AnthropicServer
from tests.support.paths import HISTORIES
from tests.support.runs import (
    FOREIGN_QUEUE_SUFFIX,
    assert_replays,
    histories_of,
    scripted,
    scripted_activities,
    start_team,
    task,
    team_result,
    worker_activities,
)
from tests.support.tool_calls import tool_use

pytestmark = pytest.mark.usefixtures("worker")


@dataclass
class Reads(Interceptor):
    """The ``conversation`` queries made through a client: ``(start, end)`` each."""

    slices: list[tuple[int, int | None]] = field(default_factory=list)

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Reading(next, self)


class _Reading(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, reads: Reads) -> None:
        super().__init__(next)
        self._reads = reads

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        if input.query == QueryName.CONVERSATION:
            part = input.args[0]
            assert isinstance(part, ConversationSlice)
            self._reads.slices.append((part.start, part.end))
        return await super().query_workflow(input)


@dataclass
class TurnInputs(WorkerInterceptor):
    """The ``llm_turn`` inputs a worker's activities were given."""

    inputs: list[LlmTurnInput] = field(default_factory=list)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Recording(next, self)


class _Recording(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, seen: TurnInputs) -> None:
        super().__init__(next)
        self._seen = seen

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if input.args and isinstance(input.args[0], LlmTurnInput):
            self._seen.inputs.append(input.args[0])
        return await super().execute_activity(input)


async def run_tool_loop(
    client: Client,
    anthropic_server: AnthropicServer,
    calls: int,
    conversations: Conversations | None = None,
) -> tuple[AgentRunResult, list[tuple[int, int | None]], str]:
    """An ``anthropic`` agent's loop of ``calls`` tool calls on a worker of
    its own whose client counts the ``conversation`` queries; the result, the
    slices asked and the workflow id."""
    for n in range(calls):
        anthropic_server.reply_tool_use("page", {"number": n}, id=f"toolu_{n}")
    anthropic_server.reply_text("read them all")
    queue = f"oma-test-reads-{uuid.uuid4().hex[:8]}"
    reads = Reads()
    reading = Client(**{**client.config(), "interceptors": [reads]})
    activities = worker_activities(queue, anthropic_server.base_url)
    if conversations is not None:
        activities.llm.conversations = conversations
    agent = {"name": "reader", "provider": "anthropic", "tools": ["tests.support.tools:page"]}
    workflow_id = f"reads-{uuid.uuid4().hex[:8]}"
    async with oma_worker.build_worker(reading, queue, activities):
        result = await client.execute_workflow(
            WorkflowName.AGENT_RUN,
            {"agent": agent | {"max_turns": calls + 1}, "input": "read every page"},
            id=workflow_id,
            task_queue=queue,
            result_type=AgentRunResult,
        )
    return result, reads.slices, workflow_id


async def test_a_turn_reads_only_the_messages_added_since_the_previous_turn(
    client: Client, anthropic_server: AnthropicServer
) -> None:
    result, slices, workflow_id = await run_tool_loop(client, anthropic_server, 4)

    assert result.output == "read them all"
    # each turn asks for the messages after those the worker read before ...
    assert slices == [(0, 1), (1, 3), (3, 5), (5, 7), (7, 9)]
    # ... and the model still gets the whole conversation every turn
    sent = [len(r.body["messages"]) for r in anthropic_server.requests]
    assert sent == [1, 3, 5, 7, 9]
    last = anthropic_server.requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["user", "assistant"] * 4 + ["user"]
    assert last[-1]["content"][0]["content"].startswith("page 3\n")
    await assert_replays(client, workflow_id)


async def test_a_worker_keeps_no_more_of_the_conversations_than_its_bound(
    client: Client, anthropic_server: AnthropicServer
) -> None:
    result, slices, _ = await run_tool_loop(
        client, anthropic_server, 2, conversations=Conversations(max_bytes=0)
    )

    assert result.output == "read them all"
    # nothing kept: every turn reads the conversation from its first message
    assert slices == [(0, 1), (0, 3), (0, 5)]
    assert [len(r.body["messages"]) for r in anthropic_server.requests] == [1, 3, 5]


async def test_a_scripted_turn_is_given_the_latest_message_only(client: Client) -> None:
    # a scripted turn is a local activity, inside the workflow task: were it
    # given the whole conversation, every task would grow with the run
    queue = f"oma-test-scripted-{uuid.uuid4().hex[:8]}"
    seen = TurnInputs()
    script = [[tool_use(f"u{n}", "add", a=n, b=1)] for n in range(3)]
    agent = {
        "name": "adder",
        "provider": "scripted",
        "script": [*script, "added"],
        "tools": ["tests.support.tools:add"],
    }
    workflow_id = f"scripted-{uuid.uuid4().hex[:8]}"
    async with oma_worker.build_worker(
        client, queue, worker_activities(queue, "http://127.0.0.1:9"), interceptors=[seen]
    ):
        result = await client.execute_workflow(
            WorkflowName.AGENT_RUN,
            {"agent": agent, "input": "add one to each of 0 1 2"},
            id=workflow_id,
            task_queue=queue,
            result_type=AgentRunResult,
        )

    assert result.output == "added"
    assert [(inp.turn, len(inp.messages)) for inp in seen.inputs] == [(n, 1) for n in range(4)]
    latest = [text_of(inp.messages[0].content) for inp in seen.inputs]
    assert latest[0] == "add one to each of 0 1 2"
    assert [m.role for m in (inp.messages[0] for inp in seen.inputs)] == ["user"] * 4
    # the usage counts the latest message's words (tool results have none), as before
    assert result.token_usage.input_tokens == len(["add", "one", "to", "each", "of", "0", "1", "2"])
    await assert_replays(client, workflow_id)


# -- a run of many tasks at once starts them a bounded number a workflow task --


@pytest.fixture
async def paced_queue(client: Client, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A worker of this test's own (its runs are not replayed at the session's
    end, under the default bound), the bound lowered to 3 starts a workflow task
    (read from the module the test patched: it is passed through the sandbox)."""
    monkeypatch.setattr(limits, "STARTS_PER_WORKFLOW_TASK", 3)
    name = f"paced-{uuid.uuid4().hex[:8]}{FOREIGN_QUEUE_SUFFIX}"
    async with oma_worker.build_worker(client, name, scripted_activities(name)):
        yield name


def _starts_per_workflow_task(history: WorkflowHistory) -> list[int]:
    """How many children each of the run's workflow tasks started, in order."""
    starts = Counter(
        e.start_child_workflow_execution_initiated_event_attributes.workflow_task_completed_event_id
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    )
    return [starts[n] for n in sorted(starts)]


def _patched(history: WorkflowHistory, patch_id: str) -> bool:
    """Whether the run recorded ``patch_id``'s marker."""
    return any(
        e.marker_recorded_event_attributes.marker_name == "core_patch"
        and patch_id.encode() in e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
    )


@pytest.mark.parametrize("max_concurrency", [8, 3])
async def test_a_run_starts_at_most_the_bound_of_tasks_in_one_workflow_task(
    client: Client, workflow_id: str, paced_queue: str, max_concurrency: int
) -> None:
    tasks = [task(f"t{n}", "w") for n in range(8)]
    run_input = {
        "team": {"name": "wide", "agents": [scripted("w", "done")]},
        "tasks": tasks,
        "options": {"max_concurrency": max_concurrency},
    }
    handle = await start_team(client, workflow_id, run_input, task_queue=paced_queue)
    result = await team_result(handle)
    assert result.status == "completed"
    assert [t.status for t in result.tasks] == [TaskStatus.COMPLETED] * 8

    history = await handle.fetch_history()
    starts = _starts_per_workflow_task(history)
    assert sum(starts) == 8
    # never more than 3 in one workflow task, whatever room max_concurrency gives
    assert max(starts) == 3, starts
    # only a run the bound paces records its marker
    assert _patched(history, "oma-paced-starts") == (max_concurrency > 3)
    replayer = plugin.replayer(strict_sandbox=True)
    for each in await histories_of(client, workflow_id):
        await replayer.replay_workflow(each)


@pytest.mark.parametrize("strict", [False, True], ids=["worker_sandbox", "strict_sandbox"])
async def test_a_run_recorded_before_its_starts_were_paced_replays(
    strict: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # recorded by the code before _patches.PACED_STARTS: the parametrized
    # run above at max_concurrency 8, its 8 tasks started in one workflow task
    monkeypatch.setattr(limits, "STARTS_PER_WORKFLOW_TASK", 3)
    history = read_history_file(HISTORIES / "paced" / "team_run_started_all_at_once.json")
    assert _starts_per_workflow_task(history) == [8]
    await plugin.replayer(strict_sandbox=strict).replay_workflow(history)
