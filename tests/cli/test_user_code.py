"""A newcomer's own tools and hooks: ``myteam/tools.py`` beside a run input,
named by import path, found by the real ``oma run`` started in that
directory, or named with ``--path`` or ``OMA_PATH`` from anywhere else; an
``oma run`` that cannot import it says where its worker looked and what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oma.runtime.dev_server import DevServer, free_port
from tests.support.procs import Processes

pytestmark = pytest.mark.e2e

OMA = str(Path(sys.executable).with_name("oma"))

TOOLS_PY = textwrap.dedent(
    '''
    from pathlib import Path

    CALLS = Path(__file__).with_name("calls.txt")


    def shout(text: str) -> str:
        """The text in capitals."""
        with CALLS.open("a") as out:
            out.write(f"tool: {text}\\n")
        return text.upper()


    def be_brief(ctx):
        with CALLS.open("a") as out:
            out.write(f"hook: {ctx.agent}: {ctx.prompt}\\n")
        return {"prompt": ctx.prompt + " (be brief)"}
    '''
)

RUN_INPUT = {
    "team": {
        "name": "newcomer",
        "agents": [
            {
                "name": "writer",
                "provider": "scripted",
                "script": [
                    [{"type": "tool_use", "id": "u1", "name": "shout", "input": {"text": "hi"}}],
                    "done",
                ],
                "tools": ["myteam.tools:shout"],
                "before_run": "myteam.tools:be_brief",
            }
        ],
    },
    "tasks": [{"id": "greet", "title": "Greet", "description": "say hi", "assignee": "writer"}],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding ``myteam/tools.py`` and ``run.json``, as a user writes them."""
    root = tmp_path / "project"
    (root / "myteam").mkdir(parents=True)
    (root / "myteam" / "tools.py").write_text(TOOLS_PY)
    (root / "run.json").write_text(json.dumps(RUN_INPUT))
    return root


def oma_run(
    dev_server: DevServer, cwd: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``oma run --worker --json ARGS`` in ``cwd``, its worker on a task queue of its own."""
    full_env = {k: v for k, v in os.environ.items() if k != "OMA_PATH"}
    full_env |= {
        "TEMPORAL_ADDRESS": dev_server.address,
        "OMA_TASK_QUEUE": f"user-code-{free_port()}",
        **env,
    }
    return subprocess.run(
        [OMA, "run", "--worker", "--json", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_tool_and_hook_ran(project: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["status"] == "completed"
    calls = (project / "myteam" / "calls.txt").read_text()
    assert calls == "hook: writer: # Task: Greet\n\nsay hi\ntool: hi\n"


def test_oma_run_in_the_directory_that_holds_myteam_imports_its_tool_and_hook(
    dev_server: DevServer, project: Path
) -> None:
    assert_tool_and_hook_ran(project, oma_run(dev_server, project, "run.json"))


def test_oma_run_from_elsewhere_finds_myteam_through_path(
    dev_server: DevServer, project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = oma_run(dev_server, elsewhere, "--path", str(project), str(project / "run.json"))
    assert_tool_and_hook_ran(project, proc)


def test_oma_run_from_elsewhere_finds_myteam_through_oma_path(
    dev_server: DevServer, project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = oma_run(dev_server, elsewhere, str(project / "run.json"), OMA_PATH=str(project))
    assert_tool_and_hook_ran(project, proc)


def test_oma_run_from_elsewhere_says_where_its_worker_looked_and_what_to_do(
    dev_server: DevServer, project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = oma_run(dev_server, elsewhere, str(project / "run.json"))
    assert proc.returncode == 1, proc.stderr
    (task,) = json.loads(proc.stdout)["tasks"]
    assert task["error_code"] == "INVALID_HOOK"
    assert task["error"].startswith(
        "hook 'myteam.tools:be_brief': no module named 'myteam' on this worker, which looked in "
    )
    # the directory it was started in comes last, after PYTHONPATH's and the installation
    assert task["error"].endswith(
        f"{elsewhere}, the installed packages; start the worker (`oma run`, `oma dev`, "
        "`oma worker`) in the directory that holds 'myteam', or name that directory with "
        "--path DIR or OMA_PATH (or install it as a package)"
    )
    assert not (project / "myteam" / "calls.txt").exists()


def test_an_oma_path_entry_that_is_not_a_directory_is_refused_by_name(
    dev_server: DevServer, project: Path
) -> None:
    missing = str(project / "no-such-dir")
    proc = oma_run(dev_server, project, "run.json", OMA_PATH=missing)
    assert proc.returncode == 2
    assert proc.stderr == f"error: OMA_PATH names {missing!r}, which is not a directory\n"


def started_worker(processes: Processes, dev_server: DevServer, cwd: Path, *args: str) -> str:
    """`oma worker ARGS` in ``cwd`` on a task queue of its own, once it serves it: the queue."""
    queue = f"user-code-{free_port()}"
    env = {k: v for k, v in os.environ.items() if k != "OMA_PATH"}
    env |= {"TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    worker = processes.start(
        [OMA, "worker", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    banner = worker.stdout.readline()
    assert banner.startswith("OMA worker on task queue"), banner
    return queue


def oma_run_on(
    dev_server: DevServer, queue: str, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``oma run --json ARGS`` in ``cwd`` on ``queue``, where a worker is already up."""
    env = {k: v for k, v in os.environ.items() if k != "OMA_PATH"}
    env |= {"TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    return subprocess.run(
        [OMA, "run", "--json", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_oma_run_path_with_a_worker_already_up_says_it_does_not_apply(
    dev_server: DevServer, project: Path, tmp_path: Path, processes: Processes
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    queue = started_worker(processes, dev_server, elsewhere)
    proc = oma_run_on(dev_server, queue, project, "--path", str(project), "run.json")
    assert proc.returncode == 1, proc.stderr
    assert (
        f"warning: --path {project} does not apply: a server listens on {dev_server.address}, "
        "so this command runs no worker, and the worker that serves the run (`oma dev`, "
        "`oma worker`) imports its custom tools"
    ) in " ".join(proc.stderr.split())
    (task,) = json.loads(proc.stdout)["tasks"]
    assert task["error_code"] == "INVALID_HOOK"  # the worker up cannot import myteam


def test_a_worker_already_up_started_with_path_imports_the_runs_tools(
    dev_server: DevServer, project: Path, tmp_path: Path, processes: Processes
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    queue = started_worker(processes, dev_server, elsewhere, "--path", str(project))
    proc = oma_run_on(dev_server, queue, elsewhere, str(project / "run.json"))
    assert_tool_and_hook_ran(project, proc)
    assert "warning" not in proc.stderr
