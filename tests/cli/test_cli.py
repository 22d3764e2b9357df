"""The `oma` CLI and the stock `temporal` CLI against real runs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma.core.schema.results import AgentRunResult
from oma.runtime.dev_server import DevServer, free_port, free_ports, is_listening
from tests.support.anthropic_server import AnthropicServer
from tests.support.cli import (
    OMA,
    demo_copy,
    oma_blocking,
    run_cmd,
    start_with_stock_cli,
    temporal,
)
from tests.support.forkserver import Forkserver
from tests.support.paths import HISTORIES
from tests.support.procs import Processes, alive, cmdline, descendants
from tests.support.runs import assert_replays

pytestmark = pytest.mark.e2e


def test_oma_run_starts_the_embedded_server_runs_the_demo_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    project = demo_copy(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "OMA_TASK_QUEUE": "oma-cli"}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = oma_blocking(
        "run", "examples/hybrid-team-scripted.json", "--json", cwd=project, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [(t["id"], t["status"]) for t in result["tasks"]] == [
        ("plan", "completed"),
        ("code", "completed"),
        ("review", "completed"),
    ]
    code = next(t for t in result["tasks"] if t["id"] == "code")
    assert "checks passed" in code["output"]
    assert (code["attempts"], code["error"]) == (1, None)
    # the scripted model is free, the process's cost nobody knows
    assert [t["cost_usd"] for t in result["tasks"]] == [0.0, None, 0.0]
    assert result["cost_unknown"] == ["process agent 'coder'"]
    assert (project / "scratch" / "slugify.py").is_file()
    assert (project / ".oma" / "temporal.db").is_file()
    assert not is_listening(address), "the embedded dev server outlived `oma run`"


def test_oma_run_rejects_an_invalid_file_naming_the_field_and_starts_nothing(
    tmp_path: Path, dev_server: DevServer
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "team": {"name": "t", "agents": [{"name": "a", "backend": {"kind": "process"}}]},
                "tasks": [],
            }
        )
    )
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address}
    proc = oma_blocking("run", str(bad), env=env)
    assert proc.returncode == 2
    assert "team.agents[0].backend.command: Field required" in proc.stderr
    assert "tasks: List should have at least 1 item" in proc.stderr


@pytest.mark.usefixtures("worker")
async def test_malformed_input_from_the_stock_cli_fails_the_workflow_naming_the_field(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    bad = {
        "team": {"agents": [{"name": "a", "provider": "scripted", "script": ["x"]}]},
        "tasks": [{"id": "t", "title": "T", "assignee": "a", "depends_on": "nope"}],
    }
    await start_with_stock_cli(dev_server, "TeamRun", workflow_id, "--input", json.dumps(bad))
    with pytest.raises(WorkflowFailureError) as info:
        await client.get_workflow_handle(workflow_id).result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == ("INVALID_RUN_INPUT", True)
    assert "team.name: Field required" in cause.message
    assert "tasks[0].depends_on: Input should be a valid list" in cause.message
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_stock_cli_walkthrough_start_result_show_then_oma_replay(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    project = demo_copy(tmp_path)
    run_input = json.loads((project / "examples" / "hybrid-team-scripted.json").read_text())
    # the test worker runs in the repository root: point the coder at the copy
    coder = run_input["team"]["agents"][1]["backend"]
    coder["cwd"] = str(project / "scratch")
    coder["args"] = [str(project / "examples" / "agents" / "coder.py")]
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(run_input))

    await start_with_stock_cli(dev_server, "TeamRun", workflow_id, "--input-file", str(input_file))
    result = await temporal(
        dev_server, "workflow", "result", "--workflow-id", workflow_id, "--output", "json"
    )
    assert result.returncode == 0, result.stderr
    assert '"success": true' in result.stdout.replace('":true', '": true')

    shown = await temporal(
        dev_server, "workflow", "show", "--workflow-id", workflow_id, "--output", "json"
    )
    assert shown.returncode == 0, shown.stderr
    history = tmp_path / "run.json"
    history.write_text(shown.stdout)
    replayed = await run_cmd(OMA, "replay", str(history))
    assert replayed.returncode == 0, replayed.stderr
    assert "no mismatch" in replayed.stdout


def test_oma_replay_exits_nonzero_and_prints_the_nondeterminism_error(tmp_path: Path) -> None:
    # a TeamRun history whose recorded first command (a child workflow) does not
    # match what the current code does for that input (it fails validation)
    source = HISTORIES / "team_run_hybrid_scripted.json"
    history = json.loads(source.read_text())
    for event in history["events"]:
        attrs = event.get("workflowExecutionStartedEventAttributes")
        if attrs:
            payload = attrs["input"]["payloads"][0]
            data = json.loads(base64.b64decode(payload["data"]))
            data["tasks"][0]["assignee"] = "nobody-here"
            payload["data"] = base64.b64encode(json.dumps(data).encode()).decode()
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(history))
    proc = oma_blocking("replay", str(tampered))
    assert proc.returncode == 1
    assert "REPLAY_MISMATCH" in proc.stderr
    assert "nondeterminism" in proc.stderr.lower()


async def test_oma_dev_serves_runs_until_interrupted_and_then_stops_the_server(
    processes: Processes,
    tmp_path: Path,
) -> None:
    project = demo_copy(tmp_path)
    port, ui_port = free_ports(2)
    env = {**os.environ, "OMA_TASK_QUEUE": "oma-dev-test"}
    dev = processes.start(
        [OMA, "dev", "--port", str(port), "--ui-port", str(ui_port)],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert dev.stdout is not None
        banner = await asyncio.to_thread(dev.stdout.readline)
        assert f"Web UI at http://127.0.0.1:{ui_port}" in banner
        proc = await run_cmd(
            OMA,
            "run",
            "--no-worker",
            "--json",
            "examples/hybrid-team-scripted.json",
            cwd=project,
            env={**env, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"},
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["success"] is True
    finally:
        dev.send_signal(signal.SIGINT)
        await asyncio.to_thread(dev.wait, 30)
    assert not is_listening(f"127.0.0.1:{port}")


@pytest.mark.usefixtures("worker")
async def test_agent_run_with_an_image_started_from_the_stock_cli_reaches_the_provider_intact(
    client: Client,
    dev_server: DevServer,
    workflow_id: str,
    tmp_path: Path,
    anthropic_server: AnthropicServer,
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("A red pixel.")
    png = base64.b64encode(bytes(range(256)) * 4).decode()
    run_input = {
        "agent": {"name": "vision", "provider": "anthropic", "model": "claude-test"},
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is shown here?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": png},
                    },
                ],
            }
        ],
    }
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(run_input))
    await start_with_stock_cli(dev_server, "AgentRun", workflow_id, "--input-file", str(input_file))
    handle = client.get_workflow_handle(workflow_id, result_type=AgentRunResult)
    result = await handle.result()
    assert result.output == "A red pixel."
    [request] = anthropic_server.requests
    assert request.body["messages"] == run_input["input"]
    sent = request.body["messages"][0]["content"][1]["source"]["data"]
    assert base64.b64decode(sent) == bytes(range(256)) * 4
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_agent_run_with_an_invalid_message_fails_naming_the_path(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    bad = {
        "agent": {"name": "vision", "provider": "anthropic"},
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/bmp", "data": "AAAA"},
                    },
                ],
            }
        ],
    }
    await start_with_stock_cli(dev_server, "AgentRun", workflow_id, "--input", json.dumps(bad))
    with pytest.raises(WorkflowFailureError) as info:
        await client.get_workflow_handle(workflow_id).result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == ("INVALID_MESSAGE", True)
    assert "input[0].content[1].source.media_type" in cause.message


# Two background children that wait for a signal, then the shell's pid. (Not
# `sleep`: in some sandboxes a sleep returns early once its parent is killed,
# which would let a kill of the shell alone pass.)
PAUSE = f"{shlex.quote(sys.executable)} -c 'import signal; signal.pause()'"
HANG = {
    "team": {
        "name": "hang",
        "agents": [
            {
                "name": "sleeper",
                "backend": {
                    "kind": "process",
                    "command": "sh",
                    "args": ["-c", f"{PAUSE} & {PAUSE} & echo $$ > pid; wait"],
                },
            }
        ],
    },
    "tasks": [{"id": "wait", "title": "Wait", "description": "wait", "assignee": "sleeper"}],
}


@pytest.mark.parametrize("forked", [False, True], ids=["own-process", "forkserver"])
async def test_sigterm_to_oma_run_cancels_the_run_and_stops_everything_it_started(
    processes: Processes, tmp_path: Path, forked: bool
) -> None:
    (tmp_path / "hang.json").write_text(json.dumps(HANG))
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "OMA_TASK_QUEUE": "oma-sigterm"}
    with contextlib.ExitStack() as stack:
        if forked:  # SIGTERM reaches the command in the forkserver's child
            forkserver = Forkserver()
            stack.callback(forkserver.stop)
            server = forkserver.warm()
            env = forkserver.env(env)
        await _sigterm_cancels_everything(
            processes, tmp_path, address, env, server if forked else None
        )


async def _sigterm_cancels_everything(
    processes: Processes, tmp_path: Path, address: str, env: dict[str, str], server: int | None
) -> None:
    proc = processes.start(
        [OMA, "run", "hang.json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = tmp_path / "pid"
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.1)
    # the task's whole process tree: the shell and the two children it started
    # before writing its pid (the shell runs in a session of its own, a
    # grandchild of `oma run`)
    shell = int(pid_file.read_text())
    tree = [shell, *descendants(shell)]
    assert [cmdline(pid).endswith("signal.pause()") for pid in tree] == [False, True, True]
    assert all(map(alive, tree))
    if server is not None:  # the task's processes are the forkserver's descendants
        assert shell in descendants(server)
    proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.to_thread(proc.communicate, None, 60)
    assert proc.returncode == 130
    assert "interrupted: cancelling TeamRun" in stderr
    survivors = [cmdline(pid) for pid in tree if alive(pid)]
    assert survivors == [], "a process of the task outlived `oma run`"
    assert not is_listening(address), "the embedded dev server outlived `oma run`"


async def test_a_sigkilled_oma_run_takes_its_embedded_dev_server_with_it(
    processes: Processes, tmp_path: Path
) -> None:
    (tmp_path / "hang.json").write_text(json.dumps(HANG))
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "OMA_TASK_QUEUE": "oma-sigkill"}
    proc = processes.start(
        [OMA, "run", "hang.json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):  # the task runs: the server is up
        if (tmp_path / "pid").exists():
            break
        await asyncio.sleep(0.1)
    servers = [p for p in descendants(proc.pid) if "server start-dev" in cmdline(p)]
    assert len(servers) == 1 and is_listening(address)
    proc.kill()
    proc.wait(timeout=10)
    try:
        for _ in range(100):  # the server's graceful stop
            if not alive(servers[0]):
                break
            await asyncio.sleep(0.1)
        assert not alive(servers[0]), "the embedded dev server outlived its SIGKILLed oma run"
        assert not is_listening(address)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(servers[0], signal.SIGKILL)  # its own session: one the test must end


async def test_oma_run_whose_stderr_reader_leaves_finishes_the_run_and_stops_what_it_started(
    processes: Processes, tmp_path: Path
) -> None:
    # `oma run x.json --json 2> >(head -1) > result.json`: the reader of its
    # event lines leaves after the first; the run, the result on stdout and
    # the embedded server's stop must not depend on it
    slow = "import time; time.sleep(0.6); print('done')"
    agent = {
        "name": "slow",
        "backend": {
            "kind": "process",
            "command": sys.executable,
            "args": ["-c", slow],
            "input": "none",
        },
    }
    run_input = {
        "team": {"name": "reader-left", "agents": [agent]},
        "tasks": [
            {"id": "one", "title": "One", "assignee": "slow"},
            {"id": "two", "title": "Two", "assignee": "slow", "depends_on": ["one"]},
        ],
    }
    (tmp_path / "run.json").write_text(json.dumps(run_input))
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "OMA_TASK_QUEUE": "oma-reader-left"}
    proc = processes.start(
        [OMA, "run", "run.json", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for _ in range(2):  # starting the embedded server, started TeamRun
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 60)
    assert line.startswith("started TeamRun"), line
    # every event line from now on, printed while a task runs, meets a broken pipe
    proc.stderr.close()
    stdout, _ = await asyncio.to_thread(proc.communicate, None, 90)
    assert proc.returncode == 0
    result = json.loads(stdout)
    assert [(t["id"], t["status"]) for t in result["tasks"]] == [
        ("one", "completed"),
        ("two", "completed"),
    ]
    assert not is_listening(address), "the embedded dev server outlived `oma run`"


def test_oma_run_no_worker_with_nothing_listening_fails_at_once(tmp_path: Path) -> None:
    (tmp_path / "hang.json").write_text(json.dumps(HANG))
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = oma_blocking("run", "--no-worker", "hang.json", cwd=tmp_path, env=env, timeout=30)
    assert proc.returncode == 1
    assert "--no-worker leaves no worker to run the workflow" in proc.stderr


def test_oma_dev_refuses_a_port_that_is_in_use(dev_server: DevServer, tmp_path: Path) -> None:
    proc = oma_blocking(
        "dev",
        "--port",
        str(dev_server.port),
        "--ui-port",
        str(free_port()),
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 1
    assert f"port {dev_server.port} is already in use" in proc.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"events": []}', "non-empty 'events' list"),
        ("[1, 2]", "non-empty 'events' list"),
    ],
)
def test_oma_replay_rejects_what_is_not_a_history(
    tmp_path: Path, content: str, problem: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = oma_blocking("replay", str(bad), timeout=30)
    assert proc.returncode == 2
    assert "is not a workflow history in JSON" in proc.stderr and problem in proc.stderr
