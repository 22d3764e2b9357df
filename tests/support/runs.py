"""Helpers that start runs on the test worker and replay their histories."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from oma import worker as oma_worker
from oma.activities.llm_turn import LlmActivities
from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.openai import OpenAIProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.client import start_run, team_run_result
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.worker import plugin
from oma.workflows._visibility import start_attributes

TASK_QUEUE = "oma-test"

ENCRYPTED_NAMESPACE = "oma-encrypted"
"""The dev server's namespace for runs with encrypted payloads
(tests/runtime/test_encryption.py)."""


STORED_NAMESPACE = "oma-stored"
"""The dev server's namespace for runs whose payloads are kept in a payload
store (tests/runtime/test_payload_store.py): the session's replay has no store."""


FOREIGN_QUEUE_SUFFIX = "-foreign"
"""A task queue whose name ends so serves workflows of another shape than
OMA's (a test's own ``AgentRun``): the session-end replay leaves its runs
out, the test replays what it can itself."""


OPENAI_TEST_KEY = "sk-openai-test-key-0123456789"
"""The key the test worker's ``openai`` adapter sends when an agent names no ``api_key_env``."""


def worker_activities(
    task_queue: str, anthropic_base_url: str, openai_base_url: str | None = None
) -> oma_worker.Activities:
    """The test worker's activities on ``task_queue``: the ``scripted``
    provider, ``anthropic`` against the local Messages API server at
    ``anthropic_base_url``, and ``openai`` against the local Chat Completions
    server at ``openai_base_url`` (by default an address nothing listens on:
    agents then give their own ``base_url``)."""
    return oma_worker.Activities(
        session_task_queue=oma_worker.session_task_queue(task_queue),
        llm=LlmActivities(
            {
                "anthropic": AnthropicProvider(
                    api_key="sk-ant-test-key", base_url=anthropic_base_url
                ),
                "openai": OpenAIProvider(
                    api_key=OPENAI_TEST_KEY, base_url=openai_base_url or "http://127.0.0.1:9/v1"
                ),
                "scripted": ScriptedProvider(),
            }
        ),
    )


def scripted_activities(task_queue: str) -> oma_worker.Activities:
    """Activities for a worker of a test's own on ``task_queue`` whose agents
    are scripted or processes: no model API is reached."""
    return oma_worker.Activities(
        session_task_queue=oma_worker.session_task_queue(task_queue),
        llm=LlmActivities({"scripted": ScriptedProvider()}),
    )


async def run_team(client: Client, workflow_id: str, run_input: dict[str, Any]) -> TeamRunResult:
    """Start a ``TeamRun`` with ``run_input`` (the user's JSON) and await its
    result (a run that did not succeed ends Failed: its result is read back
    from the failure, as the client does)."""
    return await team_result(await start_team(client, workflow_id, run_input))


async def start_team(
    client: Client, workflow_id: str, run_input: dict[str, Any], task_queue: str = TASK_QUEUE
) -> WorkflowHandle[Any, TeamRunResult]:
    """Start a ``TeamRun`` with ``run_input`` as the client does: with its
    search attributes (``OmaStatus=running``, ``OmaTeam``)."""
    team = run_input.get("team")
    name = team.get("name") if isinstance(team, dict) else None
    handle: WorkflowHandle[Any, TeamRunResult] = await start_run(
        client,
        WorkflowName.TEAM_RUN,
        run_input,
        id=workflow_id,
        task_queue=task_queue,
        result_type=TeamRunResult,
        search_attributes=start_attributes(team=name if isinstance(name, str) else None),
    )
    return handle


async def team_result(handle: WorkflowHandle[Any, TeamRunResult]) -> TeamRunResult:
    """The result of the ``TeamRun`` ``handle``, also of one that ended Failed
    (``oma.client.team_run_result``)."""
    return await team_run_result(handle)


async def run_agent(
    client: Client, workflow_id: str, agent: dict[str, Any], inp: Any
) -> AgentRunResult:
    """Start an ``AgentRun`` of ``agent`` on ``inp`` as the client does (with
    its search attributes) and await its result."""
    name = agent.get("name")
    return await client.execute_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": inp},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
        search_attributes=start_attributes(agent=name if isinstance(name, str) else None),
    )


async def agent_result(client: Client, workflow_id: str, task_id: str) -> AgentRunResult:
    """The full result of task ``task_id`` of the ``TeamRun`` ``workflow_id``
    (tool calls, messages, permission requests, stop reason, ACP session): the
    result of its ``AgentRun`` child, workflow id ``<run id>/<task id>``.
    Raises ``WorkflowFailureError`` for a task whose run failed."""
    handle = client.get_workflow_handle(
        task_workflow_id(workflow_id, task_id), result_type=AgentRunResult
    )
    return await handle.result()


async def histories_of(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """The history of ``workflow_id`` and of every child it started
    (read from the ``ChildWorkflowExecutionStarted`` events, not visibility,
    which lags)."""
    parent = await client.get_workflow_handle(workflow_id).fetch_history()
    histories = [parent]
    for event in parent.events:
        if event.HasField("child_workflow_execution_started_event_attributes"):
            child = event.child_workflow_execution_started_event_attributes.workflow_execution
            handle = client.get_workflow_handle(child.workflow_id, run_id=child.run_id)
            histories.append(await handle.fetch_history())
    return histories


async def assert_replays(client: Client, workflow_id: str) -> int:
    """Replay the run's histories against the current workflow code; raise on
    any nondeterminism. Returns how many histories were replayed."""
    replayer = plugin.replayer()
    histories = await histories_of(client, workflow_id)
    for history in histories:
        await replayer.replay_workflow(history)
    return len(histories)


def scripted(name: str, *responses: str, system_prompt: str = "") -> dict[str, Any]:
    """A scripted LLM agent, as a user writes it."""
    return {
        "name": name,
        "system_prompt": system_prompt,
        "provider": "scripted",
        "script": list(responses),
    }


def process(name: str, code: str, **backend: Any) -> dict[str, Any]:
    """A process agent running ``python3 -c code`` (prompt on stdin unless overridden)."""
    return {
        "name": name,
        "backend": {"kind": "process", "command": "python3", "args": ["-c", code], **backend},
    }


def task(task_id: str, assignee: str, *depends_on: str, description: str = "") -> dict[str, Any]:
    """A task, as a user writes it; the title is the id capitalised."""
    return {
        "id": task_id,
        "title": task_id.capitalize(),
        "description": description or f"do {task_id}",
        "assignee": assignee,
        "depends_on": list(depends_on),
    }


@contextlib.contextmanager
def collected_unraisable() -> Iterator[list[str]]:
    """The exceptions Python could not raise (``sys.unraisablehook``) while
    the block ran, each as ``object: exception type: message``."""
    seen: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(
        f"{u.object!r}: {u.exc_type.__name__}: {u.exc_value}"
    )
    try:
        yield seen
    finally:
        sys.unraisablehook = hook
