"""Process and ACP tasks under Temporal's at-least-once activities
(external-agents.md, "At least once").

A worker whose heartbeats the server refuses kills the command at once; a
task reports every time Temporal ran its command. The outage tests cut a
worker off from a Temporal server, so each has its own dev server and its own
worker on its own task queue.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from oma import worker as oma_worker
from oma.connection import Connection
from oma.core.results import AgentRunResult, TeamRunResult
from oma.dev_server import DevServer, free_port
from oma.workflows import _options
from tests._procs import alive
from tests._proxy import TcpProxy
from tests._runs import agent_result, run_team, task

SHORT_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
"""The heartbeat timeout while a worker is cut off, so that the cut outlasts it."""

CUT_S = 3.5
"""How long the worker is cut off: more than the heartbeat timeout after its
last heartbeat (at most 0.5 s before the cut), less than the SDK's own local
heartbeat timeout (the heartbeat timeout plus 5 s)."""

PAUSE = "import signal; signal.pause()"


async def until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def start_team(
    client: Client, task_queue: str, agents: list[dict[str, Any]], tasks: list[dict[str, Any]]
) -> Any:
    return await client.start_workflow(
        "TeamRun",
        {"team": {"name": "t", "agents": agents}, "tasks": tasks},
        id=f"at-least-once-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=TeamRunResult,
    )


async def gone(pids: list[int], timeout_s: float) -> None:
    """Wait until none of ``pids`` is alive, for at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@dataclass
class CutOffRun:
    """A process task whose worker was cut off from the server for longer
    than the heartbeat timeout: the server started the command again."""

    result: TeamRunResult
    agent_result: AgentRunResult
    first_pids: list[int]
    signals: list[str]


# The first start records its pid and its grandchild's, and writes down any
# SIGTERM it gets; a later start exits at once.
CUT_OFF_COMMAND = """
echo $$ >> starts
if [ "$(wc -l < starts)" -gt 1 ]; then echo again; exit 0; fi
trap 'echo TERM >> signals' TERM
{python} -c '{pause}' &
echo $! > grandchild
wait
"""


@pytest.fixture(scope="module")
async def cut_off_run(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CutOffRun]:
    tmp_path = tmp_path_factory.mktemp("cut-off")
    queue = f"cut-off-{uuid.uuid4().hex[:8]}"
    command = CUT_OFF_COMMAND.format(python=sys.executable, pause=PAUSE)
    agent = {
        "name": "coder",
        "backend": {
            "kind": "process",
            "command": "sh",
            "args": ["-c", command],
            "cwd": str(tmp_path),
        },
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(_options.PROCESS_RUN, "heartbeat_timeout", SHORT_HEARTBEAT_TIMEOUT)
        with DevServer(port=free_port(), log_file=tmp_path / "dev-server.log") as server:
            client = await Connection.local(server.address, queue).connect()
            async with TcpProxy(server.address) as proxy:
                cut_off = await Connection.local(proxy.address, queue).connect()
                async with oma_worker.build_worker(cut_off, queue):
                    handle = await start_team(client, queue, [agent], [task("code", "coder")])
                    await until(lambda: lines(tmp_path / "grandchild") != [])
                    first_pids = [
                        int(lines(tmp_path / path)[0]) for path in ("starts", "grandchild")
                    ]

                    proxy.cut()
                    await asyncio.sleep(CUT_S)
                    proxy.heal()
                    result = await asyncio.wait_for(handle.result(), 60)
                    child = await agent_result(client, handle.id, "code")
            await gone(first_pids, timeout_s=5.0)
    yield CutOffRun(result, child, first_pids, lines(tmp_path / "signals"))


async def test_a_worker_whose_heartbeat_is_refused_kills_the_process_tree_at_once(
    cut_off_run: CutOffRun,
) -> None:
    # SIGKILL with no SIGTERM first: the tree got no grace period to run on
    # beside the attempt that replaced it
    assert not any(alive(pid) for pid in cut_off_run.first_pids)
    assert cut_off_run.signals == []


async def test_a_process_run_temporal_started_again_shows_in_backend_attempts(
    cut_off_run: CutOffRun,
) -> None:
    [code] = cut_off_run.result.tasks
    assert (code.status, code.output, code.attempts, code.backend_attempts) == (
        "completed",
        "again\n",
        1,
        2,
    )
    assert cut_off_run.agent_result.backend_attempts == 2


@pytest.mark.usefixtures("worker")
async def test_an_acp_turn_temporal_ran_again_shows_in_backend_attempts(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # the agent's first process exits mid-turn (ACP_AGENT_EXITED, which
    # Temporal retries); the retry's fresh agent answers
    agent_script = str(Path(__file__).parent / "acp_agent.py")
    exits = {"turns": [{"steps": [{"text": "half"}, {"exit": 3}]}]}
    answers = {"turns": [{"steps": [{"text": "whole"}]}]}
    first = tmp_path / "first-spawn"
    command = (
        f"if [ -e {first} ]; then exec {sys.executable} {agent_script}; fi\n"
        f"touch {first}\n"
        f"ACP_TEST_SCRIPT='{json.dumps(exits)}' exec {sys.executable} {agent_script}\n"
    )
    coder = {
        "name": "coder",
        "backend": {
            "kind": "acp",
            "command": "sh",
            "args": ["-c", command],
            "env": {"ACP_TEST_SCRIPT": json.dumps(answers)},
        },
    }

    result = await run_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [coder]}, "tasks": [task("code", "coder")]},
    )

    [code] = result.tasks
    assert (code.status, code.output, code.attempts, code.backend_attempts) == (
        "completed",
        "whole",
        1,
        2,
    )
    assert (await agent_result(client, workflow_id, "code")).backend_attempts == 2
