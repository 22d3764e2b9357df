"""The ACP session reaper (``oma.activities.pinned.reaper``): the safety net that
closes the sessions, and ends the agent process trees, of runs that ended
without closing them, against real workflow runs on the dev server and real
ACP agent processes (``tests/support/acp_agent.py``)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from oma import worker as oma_worker
from oma.activities.acp import SessionPool
from oma.activities.pinned import reap_closed_runs, reap_forever
from oma.core.contracts.names import WorkflowName
from oma.core.schema.backends import AcpBackendConfig
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.runtime.dev_server import free_port
from tests.support.paths import ACP_AGENT
from tests.support.procs import alive
from tests.support.runs import TASK_QUEUE, process, run_agent, scripted, task

pytestmark = pytest.mark.usefixtures("worker")

AGENT_SCRIPT = str(ACP_AGENT)

# No worker polls this queue: a run started on it stays running (or times out).
IDLE_QUEUE = "oma-test-reaper-idle"


@dataclass
class Held:
    """A real ACP session the pool holds for ``run_key``, and its agent's process tree."""

    run_key: str
    pids: list[int]


async def open_session(pool: SessionPool, run_key: str, spawn_log: Path) -> Held:
    """Open a session of the test agent (which starts a grandchild) for ``run_key``."""
    backend = AcpBackendConfig(
        command=sys.executable,
        args=[AGENT_SCRIPT],
        env={
            "ACP_TEST_SCRIPT": json.dumps({"spawn_child": True}),
            "ACP_TEST_SPAWN_LOG": str(spawn_log),
        },
    )
    await pool.get_or_open(run_key, "coder", backend)
    pids = [int(line.split()[1]) for line in spawn_log.read_text().splitlines()]
    assert len(pids) == 2 and all(map(alive, pids)), pids
    return Held(run_key, pids)


def run_key(workflow_id: str, run_id: str | None) -> str:
    assert run_id is not None
    return f"{workflow_id}/{run_id}"


async def until(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


async def status_of(client: Client, key: str) -> WorkflowExecutionStatus | None:
    workflow_id, _, run_id = key.rpartition("/")
    described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    return described.status


# -- one run in each way a run can end ------------------------------------------


async def running(client: Client, workflow_id: str) -> str:
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": scripted("a", "x"), "input": "hi"},
        id=workflow_id,
        task_queue=IDLE_QUEUE,
    )
    return run_key(workflow_id, handle.first_execution_run_id)


async def completed(client: Client, workflow_id: str) -> str:
    await run_agent(client, workflow_id, scripted("a", "done"), "hi")
    return run_key(workflow_id, (await client.get_workflow_handle(workflow_id).describe()).run_id)


async def failed(client: Client, workflow_id: str) -> str:
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN, {"input": "no agent"}, id=workflow_id, task_queue=TASK_QUEUE
    )
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    return run_key(workflow_id, handle.first_execution_run_id)


async def cancelled(client: Client, workflow_id: str) -> str:
    sleeper = process("sleeper", "import time; time.sleep(60)")
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": sleeper, "input": "hi"},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    return run_key(workflow_id, handle.first_execution_run_id)


async def terminated(client: Client, workflow_id: str) -> str:
    key = await running(client, workflow_id)
    await client.get_workflow_handle(workflow_id).terminate("the test ends it")
    return key


async def timed_out(client: Client, workflow_id: str) -> str:
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": scripted("a", "x"), "input": "hi"},
        id=workflow_id,
        task_queue=IDLE_QUEUE,
        execution_timeout=timedelta(seconds=1),
    )
    key = run_key(workflow_id, handle.first_execution_run_id)
    deadline = time.monotonic() + 15
    while await status_of(client, key) != WorkflowExecutionStatus.TIMED_OUT:
        assert time.monotonic() < deadline, "the run never timed out"
        await asyncio.sleep(0.2)
    return key


async def continued_as_new(client: Client, workflow_id: str) -> str:
    chain = [task(f"s{s}", "w", *([f"s{s - 1}"] if s else [])) for s in range(12)]
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {
            "team": {"name": "t", "agents": [scripted("w", "ok")]},
            "tasks": chain,
            "options": {"history_event_limit": 100},
        },
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
    )
    assert (await handle.result()).success
    return run_key(workflow_id, handle.first_execution_run_id)


async def never_started(client: Client, workflow_id: str) -> str:
    return run_key(workflow_id, str(uuid.uuid4()))


ENDINGS = {
    "completed": (completed, WorkflowExecutionStatus.COMPLETED),
    "failed": (failed, WorkflowExecutionStatus.FAILED),
    "cancelled": (cancelled, WorkflowExecutionStatus.CANCELED),
    "terminated": (terminated, WorkflowExecutionStatus.TERMINATED),
    "timed_out": (timed_out, WorkflowExecutionStatus.TIMED_OUT),
    "continued_as_new": (continued_as_new, WorkflowExecutionStatus.CONTINUED_AS_NEW),
}


# -- the tests -------------------------------------------------------------------


async def test_reaping_closes_the_sessions_of_every_ended_run_and_keeps_the_running_ones(
    client: Client, pool: SessionPool, workflow_id: str, tmp_path: Path
) -> None:
    keys = dict(
        zip(
            [*ENDINGS, "never_started", "running", "running_too"],
            await asyncio.gather(
                *(make(client, f"{workflow_id}-{name}") for name, (make, _) in ENDINGS.items()),
                never_started(client, f"{workflow_id}-never-started"),
                running(client, f"{workflow_id}-running"),
                running(client, f"{workflow_id}-running-too"),
            ),
            strict=True,
        )
    )
    for name, (_, status) in ENDINGS.items():
        assert await status_of(client, keys[name]) == status, name
    with pytest.raises(RPCError) as unknown:
        await status_of(client, keys["never_started"])
    assert unknown.value.status == RPCStatusCode.NOT_FOUND
    sessions = (open_session(pool, key, tmp_path / f"{name}.spawn") for name, key in keys.items())
    held = dict(zip(keys, await asyncio.gather(*sessions), strict=True))
    open_runs = {"running", "running_too"}

    closed = await reap_closed_runs(pool, client)

    assert closed == len(keys) - len(open_runs)
    assert pool.run_keys() == {keys[name] for name in open_runs}
    ended_pids = [pid for name, h in held.items() if name not in open_runs for pid in h.pids]
    await until(lambda: not any(map(alive, ended_pids)), "the ended runs' agents to end", 2)
    running_pids = [pid for name in open_runs for pid in held[name].pids]
    assert all(map(alive, running_pids)), "the reaper ended an agent of a running run"

    # once that run ends too, the next round closes its session
    await client.get_workflow_handle(f"{workflow_id}-running").terminate("done")
    assert await reap_closed_runs(pool, client) == 1
    assert pool.run_keys() == {keys["running_too"]}
    await until(lambda: not any(map(alive, held["running"].pids)), "its agent to end", 2)
    assert all(map(alive, held["running_too"].pids))
    await client.get_workflow_handle(f"{workflow_id}-running-too").terminate("test over")


async def test_a_reaper_that_cannot_reach_the_server_keeps_every_session_and_goes_on(
    pool: SessionPool, workflow_id: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a client of a server that is not there: every round fails
    gone = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True)
    key = run_key(workflow_id, str(uuid.uuid4()))
    held = await open_session(pool, key, tmp_path / "spawn.log")
    reaper = asyncio.create_task(reap_forever(pool, gone, interval_s=0.05))

    await asyncio.sleep(0.5)  # about 10 rounds

    assert not reaper.done(), "a failed round ended the reaper"
    reaper.cancel()
    failed = "reaping the subprocesses of ended runs failed"
    failed_rounds = [r for r in caplog.records if r.message == failed]
    assert len(failed_rounds) >= 2
    assert pool.run_keys() == {key}
    assert all(map(alive, held.pids))


async def test_a_terminated_run_mid_prompt_has_its_agent_ended_by_the_workers_reaper(
    client: Client, workflow_id: str, tmp_path: Path, worker: oma_worker.OmaWorker
) -> None:
    # terminated: no workflow code runs, so no acp_close_run; only the reaper
    # of the worker holding the session can end the agent
    spawn_log, event_log = tmp_path / "spawn.log", tmp_path / "events.jsonl"
    script = {"spawn_child": True, "turns": [{"steps": [{"text": "busy"}, {"sleep": 60}]}]}
    coder = {
        "name": "coder",
        "backend": {
            "kind": "acp",
            "command": sys.executable,
            "args": [AGENT_SCRIPT],
            "env": {
                "ACP_TEST_SCRIPT": json.dumps(script),
                "ACP_TEST_SPAWN_LOG": str(spawn_log),
                "ACP_TEST_EVENT_LOG": str(event_log),
            },
        },
    }
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {"team": {"name": "t", "agents": [coder]}, "tasks": [task("code", "coder")]},
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    key = run_key(workflow_id, handle.first_execution_run_id)
    await until(
        lambda: event_log.exists() and '"event": "prompt"' in event_log.read_text(),
        "the agent to receive session/prompt",
        15,
    )
    pids = [int(line.split()[1]) for line in spawn_log.read_text().splitlines()]
    assert len(pids) == 2 and all(map(alive, pids))
    assert key in worker.activities.acp_pool.run_keys()

    await handle.terminate("stop now")

    await until(lambda: not any(map(alive, pids)), "the agent's processes to end", 10)
    assert key not in worker.activities.acp_pool.run_keys()
