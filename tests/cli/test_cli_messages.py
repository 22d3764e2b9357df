"""A sentence instead of silence: what `oma` and the Python client say when
something a run needs is missing or too big."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from oma.client import OpenMultiAgent
from oma.core.contracts.names import WorkflowName
from oma.core.schema.errors import InvalidRunInputError, TemporalUnavailableError
from oma.core.schema.results import TeamRunResult
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from tests.support.cli import OMA, oma_blocking, run_cmd
from tests.support.procs import Processes
from tests.support.runs import TASK_QUEUE, process, scripted, task, team_result

pytestmark = pytest.mark.e2e

BIG = "word " * 600_000  # 3 MB of task description


def small_run() -> dict[str, Any]:
    return {"team": {"name": "t", "agents": [scripted("a", "done")]}, "tasks": [task("only", "a")]}


def big_run() -> dict[str, Any]:
    run = small_run()
    run["tasks"][0]["description"] = BIG
    return run


def write(tmp_path: Path, run_input: dict[str, Any]) -> str:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_input))
    return str(path)


def stderr_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


async def test_oma_run_says_what_to_start_when_no_worker_polls_the_task_queue(
    processes: Processes, dev_server: DevServer, tmp_path: Path
) -> None:
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    proc = processes.start(
        [OMA, "run", "--no-worker", write(tmp_path, small_run())],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    said = ""
    deadline = time.monotonic() + 30  # on a loaded machine; the CLI says it after 2 s
    while time.monotonic() < deadline and "no worker polls" not in said:
        said += await asyncio.to_thread(proc.stderr.readline)
    proc.send_signal(signal.SIGTERM)  # cancels the run it started
    await asyncio.to_thread(proc.wait, 30)
    assert f"no worker polls task queue {queue!r}" in said
    assert "start one with `oma worker`" in said
    assert "`oma dev`" in said


async def test_sigterm_to_oma_run_with_no_worker_says_at_once_the_run_is_left_running(
    processes: Processes, dev_server: DevServer, client: Client, tmp_path: Path
) -> None:
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    workflow_id = f"left-running-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    proc = processes.start(
        [OMA, "run", "--no-worker", "--workflow-id", workflow_id, write(tmp_path, small_run())],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "started TeamRun" not in said:
        said += await asyncio.to_thread(proc.stderr.readline)
    handle = client.get_workflow_handle(workflow_id)
    try:
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.to_thread(proc.communicate, None, 30)
        took = time.monotonic() - signalled

        assert proc.returncode == 130
        assert took < 5, f"oma run took {took:.1f} s to leave"
        assert (
            f"TeamRun {workflow_id} is still running: its cancellation is recorded, but no "
            f"worker polls task queue {queue!r} to carry it out; it ends cancelled once one "
            f"does (`oma worker`), or end it now with "
            f"`temporal workflow terminate --workflow-id {workflow_id}`"
        ) in " ".join(rest.split())
        described = await handle.describe()
        assert described.status == WorkflowExecutionStatus.RUNNING
    finally:
        await handle.terminate("test over")


def test_oma_run_refuses_input_over_the_payload_limit_naming_the_field(tmp_path: Path) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = oma_blocking("run", write(tmp_path, big_run()), cwd=tmp_path, env=env)
    assert proc.returncode == 2
    [line] = stderr_lines(proc)
    assert "INVALID_RUN_INPUT" in line
    assert (
        "over Temporal's payload limit of 2097152 bytes (2 MB; a payload store, "
        "OMA_PAYLOAD_STORE, lifts it)" in line
    )
    assert "its largest field is tasks[0].description (3000002 bytes)" in line
    assert not (tmp_path / ".oma").exists(), "nothing may start"


def test_oma_run_suggests_the_field_meant_for_a_misspelled_one(tmp_path: Path) -> None:
    run = {**small_run(), "options": {"max_concurency": 2}}
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = oma_blocking("run", write(tmp_path, run), cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert stderr_lines(proc) == [
        f"error: {tmp_path / 'run.json'}: INVALID_RUN_INPUT: invalid TeamRun input: "
        "options.max_concurency: Extra inputs are not permitted (did you mean "
        "'max_concurrency'?)"
    ]
    assert not (tmp_path / ".oma").exists(), "nothing may start"


def test_oma_run_names_a_misspelled_tool_entry_and_suggests_the_tool_meant(
    tmp_path: Path,
) -> None:
    run = small_run()
    run["team"]["agents"][0]["tools"] = ["file_read", "file_wirte"]
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = oma_blocking("run", write(tmp_path, run), cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert stderr_lines(proc) == [
        f"error: {tmp_path / 'run.json'}: INVALID_RUN_INPUT: invalid TeamRun input: "
        "team.agents[0].tools[1]: unknown tool 'file_wirte' (did you mean 'file_write'?): "
        "give a built-in tool (bash, file_read, file_write, file_edit, glob, grep), a preset "
        "(readonly, readwrite, full) or a custom tool as 'package.module:function'"
    ]
    assert not (tmp_path / ".oma").exists(), "nothing may start"


async def test_the_python_client_refuses_input_over_the_payload_limit_before_connecting() -> None:
    api = OpenMultiAgent(address=f"127.0.0.1:{free_port()}")
    with pytest.raises(InvalidRunInputError, match=r"largest field is tasks\[0\]\.description"):
        await api.run_tasks(big_run()["team"], big_run()["tasks"])


@pytest.mark.parametrize(
    "args",
    [
        ["worker"],
        ["approvals", "some-run"],
        ["abort", "some-run"],
        ["approve", "some-run", "plan-1"],
        ["run", "--no-worker", "RUN"],
    ],
)
async def test_every_command_with_no_server_says_so_in_one_line(
    tmp_path: Path, args: list[str]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    args = [write(tmp_path, small_run()) if a == "RUN" else a for a in args]
    proc = await run_cmd(OMA, *args, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    [line] = stderr_lines(proc)
    assert line.startswith("error: ")
    assert address in line


async def test_the_python_client_with_no_server_raises_temporal_unavailable() -> None:
    address = f"127.0.0.1:{free_port()}"
    api = OpenMultiAgent(address=address)
    with pytest.raises(TemporalUnavailableError, match=f"no Temporal server answers at {address}"):
        await api.run_tasks(small_run()["team"], small_run()["tasks"])


def test_a_second_oma_dev_in_the_same_directory_names_the_first(tmp_path: Path) -> None:
    db = tmp_path / ".oma" / "temporal.db"
    with DevServer(port=free_port(), db_file=db, started_by="oma dev") as first:
        proc = oma_blocking(
            "dev", "--port", str(free_port()), "--ui-port", str(free_port()), cwd=tmp_path
        )
    assert proc.returncode == 1
    [line] = stderr_lines(proc)
    assert f"{first.address} (pid {os.getpid()}, started by `oma dev`)" in line
    assert f"TEMPORAL_ADDRESS={first.address}" in line


@pytest.mark.usefixtures("worker")
async def test_sdk_log_lines_go_to_the_log_file_and_to_stderr_only_with_v(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # a run input over 512 KB: the SDK core warns about the payload's size
    run_input = small_run()
    run_input["tasks"][0]["description"] = "word " * 120_000
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": TASK_QUEUE}
    file = write(tmp_path, run_input)

    quiet = await run_cmd(OMA, "run", file, "--json", "--no-worker", cwd=tmp_path, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert TeamRunResult.model_validate_json(quiet.stdout).task("only").output == "done"
    assert "exceeded the warning limit" not in quiet.stderr
    assert "exceeded the warning limit" in (tmp_path / ".oma" / "oma.log").read_text()

    verbose = await run_cmd(OMA, "-v", "run", file, "--json", "--no-worker", cwd=tmp_path, env=env)
    assert verbose.returncode == 0, verbose.stderr
    TeamRunResult.model_validate_json(verbose.stdout)
    assert "exceeded the warning limit" in verbose.stderr


async def test_oma_worker_logs_an_expected_task_failure_as_one_line(
    processes: Processes, dev_server: DevServer, client: Client, tmp_path: Path
) -> None:
    queue = f"one-line-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    worker = processes.start(
        [OMA, "worker"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        failing = process(
            "boom", "import sys; print('Traceback: oops', file=sys.stderr); sys.exit(3)"
        )
        run_input = {"team": {"name": "t", "agents": [failing]}, "tasks": [task("code", "boom")]}
        handle = await client.start_workflow(
            WorkflowName.TEAM_RUN,
            run_input,
            id=f"one-line-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=TeamRunResult,
        )
        result = await asyncio.wait_for(team_result(handle), 60)
        assert result.task("code").error_code == "PROCESS_FAILED"
    finally:
        worker.send_signal(signal.SIGINT)
        _, stderr = await asyncio.to_thread(worker.communicate, timeout=30)
    failures = [line for line in stderr.splitlines() if "PROCESS_FAILED" in line]
    assert len(failures) == 1, stderr
    assert "Completing activity as failed" in failures[0]
    assert "Traceback (most recent call last)" not in stderr


@workflow.defn(name=WorkflowName.TEAM_RUN, sandboxed=False)
class ResultOverThePayloadLimit:
    """A stand-in ``TeamRun`` that cannot report: its result is over Temporal's
    payload limit, so its workflow task fails on every attempt."""

    @workflow.run
    async def run(self, *args: Any) -> dict[str, str]:
        return {"blob": "x" * 3_000_000}


async def test_oma_run_says_why_when_the_run_cannot_report(
    processes: Processes, tmp_path: Path
) -> None:
    # a server of its own: the session replays every closed TeamRun against
    # the real workflow, which this stand-in is not
    queue = f"cannot-report-{uuid.uuid4().hex[:8]}"
    with DevServer(port=free_port()) as server:
        client = await Connection.local(server.address, queue).connect()
        async with Worker(client, task_queue=queue, workflows=[ResultOverThePayloadLimit]):
            env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "OMA_TASK_QUEUE": queue}
            proc = processes.start(
                [OMA, "run", "--no-worker", "--workflow-id", "stuck", write(tmp_path, small_run())],
                cwd=tmp_path,
                env=env,
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stderr is not None
            said = ""
            deadline = time.monotonic() + 30  # on a loaded machine; said within seconds
            with contextlib.suppress(TimeoutError):
                while "cannot go on" not in said:
                    left = deadline - time.monotonic()
                    said += await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), left)
            proc.send_signal(signal.SIGTERM)  # cancels the run it started
            await asyncio.to_thread(proc.wait, 60)
    assert "TeamRun stuck cannot go on: its workflow task failed" in said
    assert "PAYLOADS_TOO_LARGE: [TMPRL1103] Attempted to upload payloads" in said
    assert "temporal workflow terminate --workflow-id stuck" in said


@workflow.defn(name=WorkflowName.AGENT_RUN, sandboxed=False)
class ChildOverThePayloadLimit:
    """A stand-in task ``AgentRun`` that cannot report (its result is over
    Temporal's payload limit): its workflow task fails on every attempt."""

    @workflow.run
    async def run(self, *args: Any) -> dict[str, str]:
        return {"blob": "x" * 3_000_000}


@workflow.defn(name=WorkflowName.TEAM_RUN, sandboxed=False)
class WaitingOnAStuckChild:
    """A stand-in ``TeamRun`` that is well itself but waits for a child that
    cannot report."""

    @workflow.run
    async def run(self, *args: Any) -> dict[str, str]:
        child_id = f"{workflow.info().workflow_id}/one"
        result: dict[str, str] = await workflow.execute_child_workflow(
            WorkflowName.AGENT_RUN, id=child_id
        )
        return result


async def test_oma_run_says_why_when_a_task_of_the_run_cannot_report(
    processes: Processes, tmp_path: Path
) -> None:
    # a server of its own, as above: the stand-ins are not the real workflows
    queue = f"cannot-report-{uuid.uuid4().hex[:8]}"
    with DevServer(port=free_port()) as server:
        client = await Connection.local(server.address, queue).connect()
        workflows = [WaitingOnAStuckChild, ChildOverThePayloadLimit]
        async with Worker(client, task_queue=queue, workflows=workflows):
            env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "OMA_TASK_QUEUE": queue}
            proc = processes.start(
                [OMA, "run", "--no-worker", "--workflow-id", "waits", write(tmp_path, small_run())],
                cwd=tmp_path,
                env=env,
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stderr is not None
            said = ""
            deadline = time.monotonic() + 30  # on a loaded machine; said within seconds
            with contextlib.suppress(TimeoutError):
                while "cannot go on" not in said:
                    left = deadline - time.monotonic()
                    said += await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), left)
            proc.send_signal(signal.SIGTERM)  # cancels the run it started
            await asyncio.to_thread(proc.wait, 60)
            with contextlib.suppress(Exception):
                await client.get_workflow_handle("waits/one").terminate()
    assert "AgentRun waits/one of TeamRun waits cannot go on: its workflow task failed" in said
    assert "PAYLOADS_TOO_LARGE: [TMPRL1103] Attempted to upload payloads" in said
    assert "temporal workflow terminate --workflow-id waits/one" in said
    # the run itself is well: only its child is said to be stuck
    assert "\nTeamRun waits cannot go on" not in "\n" + said
