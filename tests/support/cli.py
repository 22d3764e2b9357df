"""The `oma` command, the stock `temporal` CLI and the examples as a user runs
them: real subprocesses against a dev server, and what they print read back
(progress lines, the task table, borderless tables)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from oma.runtime.dev_server import DevServer, temporal_binary
from tests.support.paths import ROOT
from tests.support.runs import TASK_QUEUE

OMA = str(Path(sys.executable).parent / "oma")

EVENT_LINE = re.compile(r"^\d\d:\d\d:\d\d (\w+) +(\S+)")
"""A progress line of `oma run`: its time, its event type, its task id (or ``-``)."""


PYTHON_API = ROOT / "examples" / "python_api.py"
PYTHON_API_OUTPUT = [
    "agent: ACP: JSON-RPC between editors and coding agents.",
    "tasks: completed - Durable execution: work that survives a crash.",
    "goal: completed - Durable execution means a run's progress is recorded, so it survives "
    "crashes.",
    "approved: ['plan']",
]
"""What `python examples/python_api.py` prints."""


def demo_copy(tmp_path: Path) -> Path:
    """A copy of examples/ in a scratch project, as a user's checkout has it."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "scratch").mkdir()
    return tmp_path


def oma_blocking(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 60
) -> subprocess.CompletedProcess[str]:
    """The `oma` command, run to completion in this thread (for a test with no
    event loop to keep turning)."""
    return subprocess.run(
        [OMA, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def run_cmd(
    *cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command off the event loop: the test worker shares this loop."""
    return await asyncio.to_thread(
        subprocess.run,
        list(cmd),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def cli_env(dev_server: DevServer) -> dict[str, str]:
    """This environment pointed at the session's dev server and task queue."""
    return {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": TASK_QUEUE}


async def oma(
    dev_server: DevServer, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`oma ARGS` against the session dev server, off the event loop."""
    return await run_cmd(OMA, *args, cwd=cwd, env=cli_env(dev_server))


def input_file(tmp_path: Path, run_input: dict[str, Any], name: str = "run.json") -> str:
    """``run_input`` written to ``tmp_path/name``; the file's path."""
    path = tmp_path / name
    path.write_text(json.dumps(run_input))
    return str(path)


async def oma_run(
    dev_server: DevServer, workflow_id: str, tmp_path: Path, run_input: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`oma run --no-worker --workflow-id ID` of ``run_input`` (written to a file)."""
    return await oma(
        dev_server,
        "run",
        "--no-worker",
        "--workflow-id",
        workflow_id,
        input_file(tmp_path, run_input),
    )


async def oma_show(dev_server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`oma show ...` against the test server, on a wide pretend terminal."""
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "COLUMNS": "200"}
    env.pop("TEMPORAL_NAMESPACE", None)
    return await asyncio.to_thread(
        subprocess.run, [OMA, "show", *args], env=env, capture_output=True, text=True, timeout=120
    )


async def temporal(dev_server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The stock `temporal` CLI against the test server."""
    return await run_cmd(temporal_binary(), *args, "--address", dev_server.address)


async def start_with_stock_cli(
    dev_server: DevServer, workflow_type: str, workflow_id: str, *input_args: str
) -> None:
    """`temporal workflow start` on the test task queue; asserts it was accepted.
    Callers give ``workflow_type`` bare (``"TeamRun"``), as a user types it."""
    started = await temporal(
        dev_server,
        "workflow",
        "start",
        "--type",
        workflow_type,
        "--task-queue",
        TASK_QUEUE,
        "--workflow-id",
        workflow_id,
        *input_args,
    )
    assert started.returncode == 0, started.stderr


def events_in(stderr: str) -> list[tuple[str, str]]:
    """(type, task id or '-') of every progress line `oma run` printed."""
    return [m.groups() for line in stderr.splitlines() if (m := EVENT_LINE.match(line))]


def normalized(stderr: str) -> list[str]:
    """The progress lines without their time, whitespace runs as one space."""
    return [" ".join(line.split()[1:]) for line in stderr.splitlines() if EVENT_LINE.match(line)]


def cells(line: str) -> list[str]:
    """The cells of a line of a borderless table (cells are 2+ spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def table_rows(stdout: str) -> list[list[str]]:
    """The cells of every row of the task table."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in stdout.splitlines()
        if line.startswith("│")
    ]
