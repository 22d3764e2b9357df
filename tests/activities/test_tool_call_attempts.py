"""``tool_call`` under Temporal's at-least-once activities (tools.md,
"Retries"), with the process backend's guarantee: an outage of up to 30 s
starts no tool a second time, an attempt Temporal gave up kills its ``bash``
tree at once, a ``bash`` command dies with its worker, and a call that cannot
succeed (a custom tool's value JSON cannot hold, an async tool that blocks the
event loop) is one error result, not three attempts."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

import oma.activities.tool_call as tool_call_module
import oma.activities.tools.custom as custom_module
from oma import worker as oma_worker
from oma.activities.mcp import McpServerPool
from oma.activities.tool_call import ToolActivities
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.tools import ToolCallInput
from oma.core.schema.results import AgentRunResult
from oma.core.schema.tools import ToolRef
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer
from oma.workflows import _options
from tests.support.attempts import SUPERSEDED
from tests.support.mcp_config import mcp_agent, python_server, started
from tests.support.procs import alive, dead_within, read_when_written
from tests.support.proxy import TcpProxy
from tests.support.runs import assert_replays, run_agent
from tests.support.tool_calls import tool_use, turn_results

pytestmark = pytest.mark.fault

PAUSE = f"{sys.executable} -c 'import signal; signal.pause()'"

OUTAGE_S = 15.0
"""How long the worker is cut off from the server mid ``bash``: longer than
the old 10 s heartbeat timeout of a tool call."""


def bash_call(cwd: Path, command: str) -> ToolCallInput:
    return ToolCallInput(
        agent="coder",
        tool=ToolRef(name="bash", source="builtin"),
        tool_use_id="tu1",
        input={"command": command},
        cwd=str(cwd),
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def until(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def bash_agent(cwd: Path, *commands: str) -> dict[str, Any]:
    """A scripted agent that runs ``commands`` with bash, all in one turn."""
    calls = [tool_use(f"u{i}", "bash", command=c) for i, c in enumerate(commands)]
    return {
        "name": "coder",
        "provider": "scripted",
        "script": [calls, "done"],
        "tools": ["full"],
        "cwd": str(cwd),
    }


async def start_agent(client: Client, queue: str, agent: dict[str, Any]) -> Any:
    return await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "go"},
        id=f"tool-attempts-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=AgentRunResult,
    )


# -- one attempt, as the activity sees it ---------------------------------------

# The shell writes down every SIGTERM it gets and lives on; a paused
# grandchild shares its process group.
TERM_RECORDER = (
    "trap 'echo TERM >> signals' TERM; "
    f"{PAUSE} & echo $! > grandchild.pid; echo $$ > child.pid; "
    "while true; do wait; sleep 0.05; done"
)


async def started_bash(tmp_path: Path) -> tuple[ActivityEnvironment, asyncio.Task[Any], list[int]]:
    env = ActivityEnvironment()
    acts = ToolActivities(McpServerPool(), None)
    run = asyncio.create_task(env.run(acts.tool_call, bash_call(tmp_path, TERM_RECORDER)))
    pids = [
        await read_when_written(tmp_path / "child.pid"),
        await read_when_written(tmp_path / "grandchild.pid"),
    ]
    return env, run, pids


@pytest.mark.parametrize("why", SUPERSEDED)
async def test_a_superseded_bash_call_gets_sigkill_at_once(tmp_path: Path, why: str) -> None:
    env, run, pids = await started_bash(tmp_path)

    env.cancel(SUPERSEDED[why])
    with pytest.raises(asyncio.CancelledError):
        await run

    # dead well within the 1 s grace a cancel request gets, never asked to
    # terminate: nothing of it ran on beside the attempt that replaced it
    assert await dead_within(pids, timeout_s=0.5)
    assert lines(tmp_path / "signals") == []


async def test_a_cancel_request_still_gives_bash_sigterm_and_its_grace(tmp_path: Path) -> None:
    env, run, pids = await started_bash(tmp_path)

    env.cancel(ActivityCancellationDetails(cancel_requested=True))
    with pytest.raises(asyncio.CancelledError):
        await run

    assert await dead_within(pids, timeout_s=3.0)
    assert lines(tmp_path / "signals") == ["TERM"]


async def test_a_tool_call_holds_its_result_until_the_server_answers(
    dev_server: DevServer, tmp_path: Path
) -> None:
    async with TcpProxy(dev_server.address) as proxy:
        client = await Connection.local(proxy.address).connect()
        env = ActivityEnvironment(client)
        env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=30))
        acts = ToolActivities(McpServerPool(), None)
        proxy.cut()
        run = asyncio.create_task(env.run(acts.tool_call, bash_call(tmp_path, "echo done")))
        await asyncio.sleep(1.0)
        assert not run.done()

        proxy.heal()
        out = await asyncio.wait_for(run, 5.0)

    assert (out.content, out.is_error) == ("exit code 0\n--- stdout ---\ndone", False)


def test_a_tool_call_has_the_backend_heartbeat_timeout() -> None:
    assert _options.tool_call()["heartbeat_timeout"] == _options.BACKEND_HEARTBEAT_TIMEOUT


# -- a worker cut off, a worker killed ------------------------------------------


def starts_then_waits_for(starts: Path, mark: Path) -> str:
    """A command that appends a line to ``starts`` each time it starts, then
    exits once ``mark`` exists."""
    return f"echo started >> {starts}; while [ ! -e {mark} ]; do sleep 0.05; done; echo ok"


async def test_a_15_s_outage_mid_bash_runs_each_command_once(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # One command still running when the server is back (the heartbeat
    # timeout must outlast the outage), one that ends while the worker is cut
    # off (its outcome must wait for the server rather than be dropped).
    queue = f"tool-outage-{uuid.uuid4().hex[:8]}"
    through, during = tmp_path / "through.starts", tmp_path / "during.starts"
    back, cut = tmp_path / "back", tmp_path / "cut"
    agent = bash_agent(
        tmp_path, starts_then_waits_for(through, back), starts_then_waits_for(during, cut)
    )
    client = await Connection.local(dev_server.address, queue).connect()
    async with TcpProxy(dev_server.address) as proxy:
        cut_off = await Connection.local(proxy.address, queue).connect()
        async with oma_worker.build_worker(cut_off, queue):
            handle = await start_agent(client, queue, agent)
            await until(lambda: through.exists() and during.exists())

            proxy.cut()
            cut.touch()
            await asyncio.sleep(OUTAGE_S)
            proxy.heal()
            back.touch()
            result = await asyncio.wait_for(handle.result(), 60)

    assert (lines(through), lines(during)) == (["started"], ["started"])
    assert [(r.content, r.is_error) for r in turn_results(result)] == [
        ("exit code 0\n--- stdout ---\nok", False),
        ("exit code 0\n--- stdout ---\nok", False),
    ]
    await assert_replays(client, handle.id)


WORKER_SCRIPT = """
import asyncio, sys
from datetime import timedelta
from oma import worker as oma_worker
from oma.runtime.connection import Connection
from oma.workflows import _options

# the retry of the killed worker's call (or process run) comes in 2 s, not 40
_options.TOOL_CALL["heartbeat_timeout"] = timedelta(seconds=2)
_options.PROCESS_RUN["heartbeat_timeout"] = timedelta(seconds=2)

async def main() -> None:
    client = await Connection.local(sys.argv[1], sys.argv[2]).connect()
    await oma_worker.build_worker(client, sys.argv[2]).run()

asyncio.run(main())
"""


@pytest.fixture
async def worker_process(
    dev_server: DevServer,
) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    queue = f"tool-killed-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, dev_server.address, queue],
        env={**os.environ, "OMA_FORKSERVER": "0"},
    )
    yield proc, queue
    proc.kill()
    proc.wait()


async def killed_mid_run_then_retried(
    worker: tuple[subprocess.Popen[bytes], str],
    pids: list[int],
    effects: Path,
    client: Client,
    handle: Any,
) -> AgentRunResult:
    """SIGKILL ``worker`` (the process, its task queue) while the command of
    ``pids`` runs; check that the whole tree died with it before reaching its
    end, then let a new worker's retry run it again, to its end, once; the
    run's result."""
    proc, queue = worker
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert await dead_within(pids, timeout_s=2.0)
    await asyncio.sleep(2.0)
    assert lines(effects) == ["started"]
    async with oma_worker.build_worker(client, queue):
        result: AgentRunResult = await asyncio.wait_for(handle.result(), 60)
    assert lines(effects) == ["started", "started", "finished"]
    return result


async def test_a_bash_command_dies_with_its_worker_and_runs_again_only_in_the_retry(
    dev_server: DevServer,
    tmp_path: Path,
    worker_process: tuple[subprocess.Popen[bytes], str],
) -> None:
    _, queue = worker_process
    effects = tmp_path / "effects"
    command = (
        f"echo started >> {effects}; echo $$ > {tmp_path}/bash.pid; "
        f"sleep 30 & echo $! > {tmp_path}/sleep.pid; "
        f"sleep 1.5; echo finished >> {effects}"
    )
    client = await Connection.local(dev_server.address, queue).connect()
    handle = await start_agent(client, queue, bash_agent(tmp_path, command))
    pids = [
        await read_when_written(tmp_path / "bash.pid", timeout_s=60),
        await read_when_written(tmp_path / "sleep.pid"),
    ]

    result = await killed_mid_run_then_retried(worker_process, pids, effects, client, handle)
    [ran] = turn_results(result)
    assert (ran.content, ran.is_error) == ("exit code 0 (no output)", False)
    assert not any(alive(pid) for pid in pids)


async def test_a_process_agents_command_dies_with_its_worker(
    dev_server: DevServer,
    tmp_path: Path,
    worker_process: tuple[subprocess.Popen[bytes], str],
) -> None:
    # the process backend's command, with a grandchild, under a worker SIGKILLed mid run
    _, queue = worker_process
    effects = tmp_path / "effects"
    code = (
        "import os, subprocess, sys, time\n"
        "sys.stdin.read()\n"
        f"open({str(effects)!r}, 'a').write('started\\n')\n"
        "child = subprocess.Popen(['sleep', '30'])\n"
        f"open({str(tmp_path / 'child.pid')!r}, 'w').write(f'{{child.pid}}\\n')\n"
        f"open({str(tmp_path / 'command.pid')!r}, 'w').write(f'{{os.getpid()}}\\n')\n"
        "time.sleep(1.5)\n"
        f"open({str(effects)!r}, 'a').write('finished\\n')\n"
        "print('done')\n"
    )
    agent = {
        "name": "p",
        "backend": {"kind": "process", "command": sys.executable, "args": ["-c", code]},
    }
    client = await Connection.local(dev_server.address, queue).connect()
    handle = await start_agent(client, queue, agent)
    pids = [
        await read_when_written(tmp_path / "command.pid", timeout_s=60),
        await read_when_written(tmp_path / "child.pid"),
    ]
    result = await killed_mid_run_then_retried(worker_process, pids, effects, client, handle)
    assert (result.output.strip(), result.backend_attempts) == ("done", 2)


# -- calls that cannot succeed ------------------------------------------------------


def custom_agent(tmp_path: Path, tool: str, **args: Any) -> dict[str, Any]:
    return {
        "name": "coder",
        "provider": "scripted",
        "script": [[tool_use("u1", tool, **args)], "done"],
        "tools": [f"tests.support.tools:{tool}"],
        "cwd": str(tmp_path),
    }


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    ("tool", "content", "is_error"),
    [
        (
            "unjsonable",
            "unjsonable returned a value that JSON cannot hold (TypeError: keys must be str, "
            "int, float, bool or None, not tuple); return a string, a pydantic model, or "
            "lists, dicts with string keys, numbers and strings",
            True,
        ),
        ("lone_surrogate", "half \ufffd a pair", False),
    ],
)
async def test_a_custom_tool_value_that_cannot_be_sent_is_one_result(
    client: Client, workflow_id: str, tmp_path: Path, tool: str, content: str, is_error: bool
) -> None:
    marker = tmp_path / "calls"
    result = await run_agent(
        client, workflow_id, custom_agent(tmp_path, tool, marker=str(marker)), "go"
    )
    [answer] = turn_results(result)
    assert (answer.content, answer.is_error) == (content, is_error)
    assert marker.read_text() == "x"
    await assert_replays(client, workflow_id)


BLOCKED = (
    r"{tool} blocked the worker's event loop for 1\.\d s at once \(a blocking call inside an "
    r"async function, such as time\.sleep or a synchronous HTTP client\), which stalls every "
    r"run on the worker; make it a plain def \(it then runs in a thread\) or await "
    r"non-blocking calls\. "
)


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    ("tool", "then"),
    [
        ("hog", "It ran to the end; its result: done"),
        ("hog_then_wait", "It was stopped at its next await."),
    ],
)
async def test_an_async_tool_blocking_the_event_loop_fails_once(
    client: Client,
    workflow_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    then: str,
) -> None:
    monkeypatch.setattr(custom_module, "BLOCKING_STEP_LIMIT_S", 0.5)
    marker = tmp_path / "calls"
    started = time.monotonic()
    result = await run_agent(
        client, workflow_id, custom_agent(tmp_path, tool, seconds=1.0, marker=str(marker)), "go"
    )
    [answer] = turn_results(result)
    assert answer.is_error
    assert re.fullmatch(BLOCKED.format(tool=tool) + re.escape(then), answer.content)
    assert marker.read_text() == "x"
    assert time.monotonic() - started < 30
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_an_mcp_call_past_its_deadline_is_an_error_result(
    client: Client, workflow_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool_call_module, "MCP_TOOL_TIMEOUT_S", 1.0)
    marker = tmp_path / "slow"
    agent = mcp_agent(
        [tool_use("u1", "t__slow", seconds=60, marker=str(marker))], "ok", servers=[python_server()]
    )
    started_at = time.monotonic()
    result = await run_agent(client, workflow_id, agent, "go")
    [answer] = turn_results(result)
    assert (answer.content, answer.is_error) == (
        "the MCP tool 'slow' of server 't' did not answer within 1 s; the call was cancelled",
        True,
    )
    assert time.monotonic() - started_at < 30
    await started(marker)
    assert not Path(str(marker) + ".done").exists()
    await assert_replays(client, workflow_id)
