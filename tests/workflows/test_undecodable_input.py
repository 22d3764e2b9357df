"""Bytes a worker cannot decode never wedge a run: a start of ``TeamRun`` or
``AgentRun`` fails with ``INVALID_RUN_INPUT``, an undecodable ``decide``
signal leaves an ``approval_refused`` event, an undecodable update is refused
for good; the client and the CLI refuse such input before starting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from oma import OpenMultiAgent
from oma.core.contracts.names import SignalName, UpdateName, WorkflowName
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.results import TeamRunResult
from tests.support.approvals import Run, eventually, refusal_code, result_within, start_run
from tests.support.cli import oma_blocking
from tests.support.runs import TASK_QUEUE, assert_replays, scripted, task

pytestmark = pytest.mark.usefixtures("worker")

TEAM = {"name": "t", "agents": [scripted("w", "done")]}


def raw_json(text: str) -> RawValue:
    """A payload of ``text`` as it is, whatever a decoder makes of it."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=text.encode()))


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


LONE_SURROGATE = '{"team": {"name": "\\ud800", "agents": []}, "goal": "g"}'
TOO_DEEP = json.dumps({"team": TEAM, "goal": "g", "coordinator": {"x": "PLACEHOLDER"}}).replace(
    '"PLACEHOLDER"', nested(250)
)


async def failure(
    client: Client, workflow_type: str, workflow_id: str, arg: Any
) -> ApplicationError:
    handle = await client.start_workflow(
        workflow_type, arg, id=workflow_id, task_queue=TASK_QUEUE, result_type=TeamRunResult
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (LONE_SURROGATE, "hex escape"),
        (TOO_DEEP, "recursion limit exceeded"),
        ('{"team": ', "EOF"),
    ],
    ids=["lone-surrogate", "nested-250-deep", "truncated"],
)
@pytest.mark.parametrize("workflow_type", [WorkflowName.TEAM_RUN, WorkflowName.AGENT_RUN])
async def test_a_start_the_worker_cannot_decode_fails_with_invalid_run_input(
    client: Client, workflow_id: str, workflow_type: str, payload: str, problem: str
) -> None:
    cause = await failure(client, workflow_type, workflow_id, raw_json(payload))
    assert cause.type == "INVALID_RUN_INPUT"
    assert cause.message.startswith(f"{workflow_type} is not JSON the worker can read: ")
    assert problem in cause.message
    assert cause.non_retryable
    await assert_replays(client, workflow_id)


async def gated(client: Client, workflow_id: str) -> Run:
    run = await start_run(
        client,
        workflow_id,
        {"team": TEAM, "tasks": [task("a", "w")], "options": {"approvals": {"dispatch": ["a"]}}},
    )
    await run.request("dispatch-a")
    return run


async def test_an_undecodable_decide_update_is_refused_for_good(
    client: Client, workflow_id: str
) -> None:
    run = await gated(client, workflow_id)

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.handle.execute_update(UpdateName.DECIDE, raw_json('{"request_id": "\\ud800"}'))

    assert refusal_code(refused.value) == "INVALID_RUN_INPUT"
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    await run.decide((await run.pending())[0])
    assert (await result_within(run, 15)).status == "completed"
    await assert_replays(client, workflow_id)


async def test_an_undecodable_decide_signal_leaves_an_approval_refused_event(
    client: Client, workflow_id: str
) -> None:
    run = await gated(client, workflow_id)

    await run.handle.signal(SignalName.DECIDE, raw_json(nested(250)))

    async def refused() -> str | None:
        events = [e for e in await run.events() if e.type == "approval_refused"]
        return events[0].detail if events else None

    detail = await eventually(refused, "the approval_refused event", 15)
    assert detail.startswith("(no request_id): INVALID_RUN_INPUT: a decision is not JSON")
    await run.abort("done")
    assert (await result_within(run, 15)).status == "cancelled"
    await assert_replays(client, workflow_id)


def deep_history_agent(depth: int) -> dict[str, Any]:
    """A scripted agent whose history holds a tool call ``depth`` levels deep."""
    deep: Any = {}
    for _ in range(depth):
        deep = {"x": deep}
    return {
        **scripted("w", "done"),
        "history": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "n", "input": deep}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}],
            },
        ],
    }


async def test_the_client_refuses_input_a_worker_could_not_decode_before_starting(
    client: Client, workflow_id: str
) -> None:
    oma_client = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    surrogate = {**scripted("w", "done"), "description": "a\ud800"}
    with pytest.raises(InvalidRunInputError, match="lone UTF-16 surrogate"):
        await oma_client.run_tasks(
            {"name": "t", "agents": [surrogate]}, [task("a", "w")], workflow_id=workflow_id
        )
    with pytest.raises(InvalidRunInputError, match="a worker cannot read: recursion limit"):
        await oma_client.run_agent(deep_history_agent(250), "hi", workflow_id=workflow_id)
    with pytest.raises(RPCError):
        await client.get_workflow_handle(workflow_id).describe()


def test_oma_run_refuses_a_file_a_worker_could_not_decode(tmp_path: Path) -> None:
    surrogate = tmp_path / "surrogate.json"
    surrogate.write_text(
        json.dumps({"team": TEAM, "tasks": [task("a", "w")]}).replace('"done"', '"\\ud800"')
    )
    deep = tmp_path / "deep.json"
    deep.write_text(
        json.dumps({"team": {"name": "t", "agents": [deep_history_agent(250)]}, "goal": "g"})
    )
    for file, problem in ((surrogate, "lone UTF-16 surrogate"), (deep, "cannot read")):
        proc = oma_blocking("run", str(file), cwd=tmp_path, timeout=30)
        assert proc.returncode == 2, proc.stderr
        assert problem in proc.stderr
        assert "starting the embedded" not in proc.stderr
