"""A following `oma run` when its Temporal server goes away: one line, not a
traceback; it follows the run again when the server is back; Ctrl-C while
the server is gone leaves the run running and says how to find it again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from oma import worker as oma_worker
from oma.core.schema.results import TeamRunResult
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port, is_listening
from tests.support.cli import OMA, run_cmd
from tests.support.procs import Processes, alive
from tests.support.runs import task

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

GONE = "does not answer"
"""What `oma run` says, in its one line, when the server stops answering."""


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def gated_run(gate: Path) -> dict[str, object]:
    """One process task that ends once ``gate`` exists: the run is in flight
    for as long as the test wants."""
    wait = (
        f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\nprint('done')"
    )
    agent = {
        "name": "a",
        "backend": {"kind": "process", "command": sys.executable, "args": ["-c", wait]},
    }
    return {"team": {"name": "t", "agents": [agent]}, "tasks": [task("only", "a")]}


@dataclass
class Following:
    """A dev server of the test's own (stopped and started again on the same
    port and database), a worker in this process, and `oma run` following a
    gated run on it, its stderr in a file."""

    server: DevServer
    client: Client
    proc: subprocess.Popen[str]
    workflow_id: str
    gate: Path
    stderr: Path
    stdout: Path

    def said(self) -> str:
        return self.stderr.read_text()

    async def stop_server(self) -> None:
        """Stop the server, and check it is gone: its process and its port."""
        assert self.server._proc is not None
        pid = self.server._proc.pid
        self.server.stop()
        assert not alive(pid), "the dev server outlived its stop"
        assert not is_listening(self.server.address)


@asynccontextmanager
async def following(tmp_path: Path, processes: Processes) -> AsyncIterator[Following]:
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    server = DevServer(
        port=free_port(), db_file=tmp_path / "temporal.db", log_file=tmp_path / "dev-server.log"
    )
    server.start()
    try:
        client = await Connection.local(server.address, queue).connect()
        async with oma_worker.build_worker(client, queue):
            gate, run = tmp_path / "gate", tmp_path / "run.json"
            run.write_text(json.dumps(gated_run(gate)))
            workflow_id = f"outage-{uuid.uuid4().hex[:8]}"
            stderr, stdout = tmp_path / "stderr", tmp_path / "stdout"
            env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "OMA_TASK_QUEUE": queue}
            with stderr.open("w") as err, stdout.open("w") as out:
                proc = processes.start(
                    [OMA, "run", "--workflow-id", workflow_id, str(run)],
                    cwd=tmp_path,
                    env=env,
                    stdout=out,
                    stderr=err,
                    text=True,
                )
            run_in_flight = Following(server, client, proc, workflow_id, gate, stderr, stdout)
            await until(lambda: "task_start" in run_in_flight.said(), "the task to start")
            yield run_in_flight
            gate.touch()  # the worker's shutdown waits for the task in flight
    finally:
        server.stop()


async def test_oma_run_says_in_one_line_the_server_is_gone_and_follows_the_run_when_it_is_back(
    tmp_path: Path, processes: Processes
) -> None:
    async with following(tmp_path, processes) as run:
        await run.stop_server()
        await until(lambda: GONE in run.said(), "oma run to say the server is gone")
        run.server.start()  # the same port and database
        run.gate.touch()
        code = await asyncio.to_thread(run.proc.wait, 90)

    said = run.said()
    lines = said.splitlines()
    [gone] = [line for line in lines if GONE in line]
    assert gone == (
        f"the Temporal server at {run.server.address} does not answer (tcp connect error); "
        f"still trying: TeamRun {run.workflow_id} goes on once it is back, and this command "
        f"follows it again (Ctrl-C leaves it running; `oma show {run.workflow_id}` shows it)"
    )
    [back] = [i for i, line in enumerate(lines) if "answers again" in line]
    assert lines[back].endswith(f": following TeamRun {run.workflow_id}")
    completes = [i for i, line in enumerate(lines) if "task_complete" in line]
    assert completes and min(completes) > back  # followed again, once it said so
    assert "Traceback" not in said
    assert code == 0, said
    assert "TeamRun: completed" in run.stdout.read_text()


async def test_ctrl_c_while_the_server_is_gone_leaves_the_run_and_names_how_to_find_it(
    tmp_path: Path, processes: Processes
) -> None:
    async with following(tmp_path, processes) as run:
        await run.stop_server()
        await until(lambda: GONE in run.said(), "oma run to say the server is gone")
        interrupted = time.monotonic()
        run.proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(run.proc.wait, 30)
        took = time.monotonic() - interrupted

        run.server.start()
        run.gate.touch()
        handle = run.client.get_workflow_handle(run.workflow_id, result_type=TeamRunResult)
        result = await asyncio.wait_for(handle.result(), 90)
        shown = await run_cmd(
            OMA,
            "show",
            run.workflow_id,
            env={**os.environ, "TEMPORAL_ADDRESS": run.server.address},
            cwd=tmp_path,
        )

    said = run.said()
    wid = run.workflow_id
    assert code == 130
    assert took < 5, f"oma run took {took:.1f} s to leave"
    assert said.splitlines()[-1] == (
        f"interrupted: TeamRun {wid} was not cancelled, the Temporal server at "
        f"{run.server.address} does not answer; the run goes on once it is back: see it with "
        f"`oma show {wid}`, stop it with `oma abort {wid}`"
    )
    assert "Traceback" not in said
    assert result.success
    assert shown.returncode == 0 and "completed" in shown.stdout, shown.stderr


async def test_oma_run_says_in_one_line_when_the_server_came_back_without_the_run(
    tmp_path: Path, processes: Processes
) -> None:
    async with following(tmp_path, processes) as run:
        await run.stop_server()
        await until(lambda: GONE in run.said(), "oma run to say the server is gone")
        run.server.db_file = tmp_path / "another.db"  # as a server that kept nothing would
        run.server.start()
        code = await asyncio.to_thread(run.proc.wait, 60)

    said = run.said()
    assert code == 1
    assert said.splitlines()[-1] == (
        f"error: TeamRun {run.workflow_id} is not on the Temporal server at "
        f"{run.server.address} any more: the server came back without it (one that keeps its "
        f"histories in memory, as `temporal server start-dev` without --db-filename, loses "
        f"them when it stops)"
    )
    assert "Traceback" not in said
