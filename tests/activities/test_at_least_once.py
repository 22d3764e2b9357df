"""Process and ACP tasks under Temporal's at-least-once activities
(external-agents.md, "At least once").

An outage within the tolerance runs nothing twice; a worker whose heartbeats
the server refuses kills the command at once; a task reports every time
Temporal ran its command. The outage tests stop (or cut off) a Temporal server,
so each has its own dev server and its own worker on its own task queue.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from temporalio.testing import ActivityEnvironment

from oma import worker as oma_worker
from oma.activities.process_run import process_run
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.process import ProcessRunInput
from oma.core.schema.backends import ProcessBackendConfig
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from oma.workflows import _options
from tests.support.paths import ACP_AGENT
from tests.support.procs import alive
from tests.support.proxy import TcpProxy
from tests.support.runs import agent_result, run_team, task

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

OUTAGE_S = 20.0
"""How long the test server stays down: longer than the old heartbeat timeout
(10 s), and than the SDK's retries of an activity's outcome (10 s of backoff
budget whose last wait may end after 15 s, 18 s with jitter)."""

SHORT_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
"""The heartbeat timeout while a worker is cut off, so that the cut outlasts it."""

CUT_S = 4.5
"""How long the worker is cut off: the heartbeat timeout after its last
heartbeat (at most 0.5 s before the cut) and 2 s for the server to act on
it. The worker then learns it was given up from the server ("not found") or,
if its heartbeat retries have not reached the server yet, from the SDK's own
timer (the heartbeat timeout plus 5 s): either way it kills the command."""

PAUSE = "import signal; signal.pause()"


def python_agent(name: str, code: str) -> dict[str, Any]:
    return {
        "name": name,
        "backend": {"kind": "process", "command": sys.executable, "args": ["-c", code]},
    }


def starts_once_then_waits_for(starts: Path, mark: Path) -> str:
    """A command that appends a line to ``starts`` each time it starts, then
    exits once ``mark`` exists."""
    return (
        "import os, time\n"
        f"open({str(starts)!r}, 'a').write('started\\n')\n"
        f"while not os.path.exists({str(mark)!r}): time.sleep(0.05)\n"
        "print('done')\n"
    )


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
        WorkflowName.TEAM_RUN,
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


async def test_an_outage_longer_than_the_old_heartbeat_timeout_runs_each_process_once(
    tmp_path: Path,
) -> None:
    # Two commands: one still running when the server is back (its heartbeat
    # timeout must outlast the outage), one that ends while the server is down
    # (its outcome must wait for the server rather than be dropped).
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    server = DevServer(
        port=free_port(), db_file=tmp_path / "temporal.db", log_file=tmp_path / "dev-server.log"
    )
    server.start()
    try:
        client = await Connection.local(server.address, queue).connect()
        async with oma_worker.build_worker(client, queue):
            through, during = tmp_path / "through.starts", tmp_path / "during.starts"
            server_back, server_down = tmp_path / "server-back", tmp_path / "server-down"
            handle = await start_team(
                client,
                queue,
                [
                    python_agent("a", starts_once_then_waits_for(through, server_back)),
                    python_agent("b", starts_once_then_waits_for(during, server_down)),
                ],
                [task("through", "a"), task("during", "b")],
            )
            await until(lambda: through.exists() and during.exists())

            server.stop()
            server_down.touch()
            await asyncio.sleep(OUTAGE_S)
            server.start()
            server_back.touch()
            result = await asyncio.wait_for(handle.result(), 90)
    finally:
        server.stop()

    assert (lines(through), lines(during)) == (["started"], ["started"])
    assert [(t.id, t.status, t.attempts, t.backend_attempts) for t in result.tasks] == [
        ("through", "completed", 1, 1),
        ("during", "completed", 1, 1),
    ]


async def test_a_process_run_holds_its_result_until_the_server_answers(
    dev_server: DevServer,
) -> None:
    async with TcpProxy(dev_server.address) as proxy:
        client = await Connection.local(proxy.address).connect()
        env = ActivityEnvironment(client)
        env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=30))
        backend = ProcessBackendConfig(command="echo", args=["done"], input="none")
        proxy.cut()
        run = asyncio.create_task(
            env.run(process_run, ProcessRunInput(agent="coder", backend=backend, prompt=""))
        )
        await asyncio.sleep(1.0)
        assert not run.done()

        proxy.heal()
        out = await asyncio.wait_for(run, 5.0)

    assert out.stdout == "done\n"


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
                    # The retry may have run before the first attempt's next
                    # heartbeat got through: give its worker the time to hear
                    # it was given up (the SDK's retry backoff, its own timer)
                    # before a shutdown of the worker would cancel it anyway.
                    await gone(first_pids, timeout_s=15.0)
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
    agent_script = str(ACP_AGENT)
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
