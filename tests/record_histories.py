"""Record the replay corpus in ``tests/histories/``.

Runs representative workflows on an embedded dev server and a worker in this
process, and writes each one's history as ``temporal workflow show --output
json`` would, under a file named after its workflow id. The corpus is kept
once recorded: ``tests/test_histories.py`` replays every file against the
current code, so a change that breaks running histories fails the tests.

    .venv/bin/python -m tests.record_histories [NAME ...]   # default: every scenario

Record a scenario only for new behaviour; never re-record one to make a
failing replay pass.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from oma import worker as oma_worker
from oma.connection import Connection
from oma.core.results import TeamRunResult
from oma.dev_server import DevServer, free_port

HISTORIES = Path(__file__).parent / "histories"
TASK_QUEUE = "oma-record"

Scenario = Callable[[Client, str], Awaitable[list[str]]]
"""Runs a scenario under the given workflow id; returns the run ids to record
(the first run first when the workflow continued as new)."""


def _scripted(name: str, *script: str) -> dict[str, Any]:
    return {"name": name, "provider": "scripted", "script": list(script)}


PLAN = json.dumps(
    [
        {"title": "Research", "description": "list three facts", "assignee": "researcher"},
        {
            "title": "Write",
            "description": "write a paragraph",
            "assignee": "writer",
            "depends_on": ["Research"],
        },
    ]
)


async def _start(client: Client, workflow_id: str, run_input: dict[str, Any]) -> WorkflowHandle:
    return await client.start_workflow(
        "TeamRun", run_input, id=workflow_id, task_queue=TASK_QUEUE, result_type=TeamRunResult
    )


async def _pending(handle: WorkflowHandle) -> dict[str, Any]:
    for _ in range(200):
        pending = await handle.query("pending_approvals")
        if pending:
            return dict(pending[0])
        await asyncio.sleep(0.05)
    raise RuntimeError("no approval request appeared")


def _decision(request: dict[str, Any], decision: str, **extra: Any) -> dict[str, Any]:
    return {
        "request_id": request["request_id"],
        "request_hash": request["request_hash"],
        "decision": decision,
        "reviewer": {"id": "recorder"},
        **extra,
    }


async def goal_run_with_plan_approval(client: Client, workflow_id: str) -> list[str]:
    """A goal run: a plan that is not JSON, the correction, the plan approved
    by update, two tasks, the synthesis."""
    handle = await _start(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [_scripted("researcher", "three facts"), _scripted("writer", "prose")],
            },
            "goal": "a paragraph with three facts",
            "coordinator": {
                "provider": "scripted",
                "script": ["no plan yet", PLAN, "the final paragraph"],
            },
            "options": {"approvals": {"plan": True}},
        },
    )
    await handle.execute_update("decide", _decision(await _pending(handle), "approve"))
    result = await handle.result()
    assert result.status == "completed", result
    return [handle.result_run_id or ""]


async def dispatch_gate_refused_then_aborted(client: Client, workflow_id: str) -> list[str]:
    """A dispatch approval: a stale decision refused (signal), then ``abort``
    while one branch ran."""
    handle = await _start(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [_scripted("a", "done"), _scripted("b", "done")]},
            "tasks": [
                {"id": "free", "title": "Free", "assignee": "a"},
                {"id": "gated", "title": "Gated", "assignee": "b"},
            ],
            "options": {"approvals": {"dispatch": ["gated"]}},
        },
    )
    request = await _pending(handle)
    await handle.signal("decide", _decision(request, "approve", request_hash="stale"))
    await handle.signal("abort", {"reason": "recorded"})
    result = await handle.result()
    assert result.status == "cancelled", result
    return [handle.result_run_id or ""]


async def continued_as_new(client: Client, workflow_id: str) -> list[str]:
    """A run past ``history_event_limit``: its first run ends continued as new."""
    tasks = [
        {
            "id": f"c{c}s{s}",
            "title": f"C{c} s{s}",
            "assignee": "w",
            "depends_on": [f"c{c}s{s - 1}"] if s else [],
        }
        for c in range(3)
        for s in range(8)
    ]
    handle = await _start(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [_scripted("w", "ok")]},
            "tasks": tasks,
            "options": {"history_event_limit": 100},
        },
    )
    result = await handle.result()
    assert result.status == "completed", result
    return [handle.first_execution_run_id or ""]


SCENARIOS: dict[str, Scenario] = {
    "team_run_goal_plan_approval": goal_run_with_plan_approval,
    "team_run_dispatch_gate_abort": dispatch_gate_refused_then_aborted,
    "team_run_continued_as_new": continued_as_new,
}


async def record(address: str, names: list[str]) -> None:
    client = await Connection.local(address, TASK_QUEUE).connect()
    async with oma_worker.build_worker(client, TASK_QUEUE):
        for name in names:
            for run_id in await SCENARIOS[name](client, name):
                history = await client.get_workflow_handle(name, run_id=run_id).fetch_history()
                path = HISTORIES / f"{name}.json"
                path.write_text(json.dumps(history.to_json_dict(), indent=2) + "\n")
                print(f"{path}: {len(history.events)} events")


def main() -> None:
    names = sys.argv[1:] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(
            f"unknown scenario(s): {', '.join(unknown)} (have: {', '.join(SCENARIOS)})"
        )
    with DevServer(port=free_port()) as server:
        asyncio.run(record(server.address, names))


if __name__ == "__main__":
    main()
