"""Long runs stay light per step: what one activation of a run does, and what
one turn reads, does not grow with the run (bench/tool_loop.py and
bench/dag_overhead.py time it). Real dev server, real workers on task queues
of their own, the real ``anthropic`` SDK against the local Messages API."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput
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
from oma.core.schema.messages import text_of
from oma.core.schema.results import AgentRunResult
from tests.support.anthropic_server import AnthropicServer
from tests.support.runs import assert_replays, worker_activities
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
