"""The ``oma`` command through a warm forkserver (``oma.cli.forkserver``): the
command runs in a child of the server, as the caller would have run it (its
directory, environment, terminal, exit status and signals), and a server
serves one state of the code.

Each test has a server of its own (``tests.support.forkserver.Forkserver``), stopped
and checked gone at its end. Which process ran a command is read from a
process agent's ancestry: with ``--worker`` the agent is a descendant of the
process that runs ``oma run``, so the server's pid in it means the command ran
in the server's child, and the caller's pid there would mean it ran in place.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import site
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from oma.cli import forkserver as _forkserver
from oma.runtime.dev_server import DevServer
from tests.support.cli import cli_env, input_file
from tests.support.forkserver import ANCESTRY, OMA, Forkserver
from tests.support.paths import HISTORIES
from tests.support.procs import alive, descendants
from tests.support.runs import process, task
from tests.support.terminal import Terminal, building, slow_process

pytestmark = [pytest.mark.fault, pytest.mark.e2e]


@pytest.fixture
def forkserver() -> Iterator[Forkserver]:
    server = Forkserver()
    try:
        yield server
    finally:
        server.stop()


def started(*args: str, cwd: Path | None = None, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [OMA, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


async def finished(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    return await asyncio.to_thread(proc.communicate, None, timeout)


async def until(condition: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


async def test_a_command_runs_in_the_servers_child_with_the_callers_directory_env_and_status(
    dev_server: DevServer, forkserver: Forkserver, tmp_path: Path, client: Client
) -> None:
    server = forkserver.warm()
    workflow_id = f"forked-{uuid.uuid4().hex[:8]}"
    run_input = {
        "team": {
            "name": "forked",
            "agents": [process("tracer", ANCESTRY), process("breaker", "raise SystemExit(3)")],
        },
        "tasks": [task("trace", "tracer"), task("break", "breaker")],
    }
    (tmp_path / "run.json").write_text(json.dumps(run_input))
    # the server was started with a TEMPORAL_ADDRESS where nothing listens:
    # the run reaches the dev server only with the caller's environment, and
    # finds run.json only in the caller's directory
    env = forkserver.env(
        {**cli_env(dev_server), "OMA_TASK_QUEUE": f"oma-forked-{uuid.uuid4().hex[:8]}"}
    )
    proc = started(
        "run", "--worker", "--json", "--workflow-id", workflow_id, "run.json", cwd=tmp_path, env=env
    )
    stdout, stderr = await finished(proc)

    assert proc.returncode == 1, stderr  # a task failed: the child's status is the caller's
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.status == WorkflowExecutionStatus.FAILED  # on the caller's server
    result = json.loads(stdout)
    outputs = {t["id"]: t for t in result["tasks"]}
    assert outputs["break"]["status"] == "failed"
    ancestry = [int(pid) for pid in outputs["trace"]["output"].split()]
    assert server in ancestry, (ancestry, server)
    assert proc.pid not in ancestry
    assert descendants(server) == [], "the command's child outlived it"


async def test_on_a_terminal_the_forked_command_shows_the_live_view(
    dev_server: DevServer, forkserver: Forkserver, tmp_path: Path, worker: object
) -> None:
    server = forkserver.warm()
    go, run_file = building(tmp_path)
    env = forkserver.env(cli_env(dev_server))
    term = Terminal(dev_server, "run", "--no-worker", run_file, env=env)
    try:
        # the terminal reached the child as its stdout and stderr: rich's live
        # view, not plain lines
        await term.wait_for(r"build +Build the thing +builder +\d+\.\ds +compiling module 1 of 3")
        assert "0/1 tasks settled" in term.screen
        assert len(descendants(server)) == 1, "the command is not the server's child"
        go.touch()
        assert await term.exit_code() == 0, term.screen
    finally:
        term.kill()
    assert "all done" in term.screen


async def hanging_run(
    dev_server: DevServer,
    forkserver: Forkserver,
    server: int,
    tmp_path: Path,
    client: Client,
    nohup: bool = False,
) -> tuple[subprocess.Popen[str], int, WorkflowHandle[Any, Any]]:
    """`oma run` of a task that sleeps for ten minutes, in the server's child,
    once the run has started: the caller, the child's pid, the run. With
    ``nohup``, the caller ignores SIGHUP."""
    sleeper = process("sleeper", "import time; time.sleep(600)")
    run_input = {"team": {"name": "hang", "agents": [sleeper]}, "tasks": [task("wait", "sleeper")]}
    workflow_id = f"forked-hang-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [OMA, "run", "--no-worker", "--workflow-id", workflow_id, input_file(tmp_path, run_input)],
        env=forkserver.env(cli_env(dev_server)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if nohup else None,
        # a process group of its own whose parent (the test) is in another
        # group of the same session: the kernel discards a Ctrl-Z (SIGTSTP)
        # sent to an orphaned group, as the suite's own group is when it was
        # started in the background and its shell has gone
        process_group=0,
    )
    await until(lambda: descendants(server), "the server forked the command")
    (child,) = descendants(server)
    handle = client.get_workflow_handle(workflow_id)
    await started_run(handle)
    return proc, child, handle


def state(pid: int) -> str:
    """The process state letter of ``pid`` (``S`` sleeping, ``T`` stopped, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


async def test_signals_reach_the_forked_command_as_they_would_reach_the_caller(
    dev_server: DevServer, forkserver: Forkserver, tmp_path: Path, client: Client, worker: object
) -> None:
    server = forkserver.warm()
    # SIGHUP ignored, as nohup does
    proc, child, handle = await hanging_run(dev_server, forkserver, server, tmp_path, client, True)

    proc.send_signal(signal.SIGHUP)  # ignored by the caller, so by the command
    await asyncio.sleep(0.5)
    assert proc.poll() is None and alive(child)

    proc.send_signal(signal.SIGTSTP)  # Ctrl-Z stops the command with its caller
    await until(lambda: state(proc.pid) == "T" and state(child) == "T", "both stopped")
    proc.send_signal(signal.SIGCONT)  # fg
    await until(lambda: state(child) != "T", "the command continued")

    proc.send_signal(signal.SIGINT)  # what a terminal sends the foreground process on Ctrl-C
    _, stderr = await finished(proc)

    assert proc.returncode == 130, stderr
    assert f"interrupted: cancelling TeamRun {handle.id}" in stderr
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert not alive(child)
    assert alive(server)


async def test_a_caller_killed_outright_takes_its_forked_command_with_it(
    dev_server: DevServer, forkserver: Forkserver, tmp_path: Path, client: Client, worker: object
) -> None:
    server = forkserver.warm()
    proc, child, handle = await hanging_run(dev_server, forkserver, server, tmp_path, client)
    env = forkserver.env(cli_env(dev_server))

    proc.kill()
    await finished(proc)

    await until(lambda: not alive(child), "the forked command died with its caller", 10)
    assert alive(server)
    # as with a killed `oma run` in its own process, the run itself goes on
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await handle.cancel()
    # and the server serves the next command
    helped = subprocess.run([OMA, "--help"], env=env, capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "Usage: oma" in helped.stdout


async def started_run(handle: WorkflowHandle[Any, Any]) -> None:
    """Once the forked `oma run` has started the run."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await handle.describe()
            return
        except RPCError:
            assert time.monotonic() < deadline, f"{handle.id} never started"
            await asyncio.sleep(0.05)


def test_the_socket_names_the_family_and_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path
    packages, project = tmp_path / "site-packages", tmp_path / "project"
    packages.mkdir()
    project.mkdir()
    monkeypatch.setattr(sys, "path", [str(project), *sys.path, str(packages)])
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(packages)])
    first = _forkserver.socket_path(home)
    family = first.name.partition("-")[0]
    assert _forkserver.socket_path(home) == first

    (project / "notes.txt").write_text("")  # a file in a directory that is not an install
    assert _forkserver.socket_path(home) == first
    (packages / "newly_installed.py").write_text("")  # an install: new code, same family
    installed = _forkserver.socket_path(home)
    assert installed != first and installed.name.startswith(f"{family}-")

    source = Path(_forkserver.__file__)
    st = source.stat()
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # an edit
        edited = _forkserver.socket_path(home)
        assert edited != installed and edited.name.startswith(f"{family}-")
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _forkserver.socket_path(home) == installed

    monkeypatch.setattr(sys, "path", sys.path[1:])  # another sys.path: another family
    assert not _forkserver.socket_path(home).name.startswith(f"{family}-")
    monkeypatch.setattr(sys, "path", [str(project), *sys.path])
    assert _forkserver.socket_path(home).name.startswith(f"{family}-")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))  # `ulimit -n`: a child
    try:  # cannot raise its limit back, so another family
        assert not _forkserver.socket_path(home).name.startswith(f"{family}-")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_runtime_directory_must_be_private(
    forkserver: Forkserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = forkserver.runtime  # (under xdist tmp_path is too long a path for a socket)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    home = _forkserver.runtime_dir()
    assert home == tmp_path / "oma"
    assert home.stat().st_mode & 0o777 == 0o700
    home.chmod(0o755)  # others may enter it: off
    assert _forkserver.runtime_dir() is None
    home.chmod(0o700)
    long = tmp_path / ("x" * 90)
    long.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(long))  # too long a path for a socket: off
    assert _forkserver.runtime_dir() is None
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))  # no such directory
    assert _forkserver.runtime_dir() == Path(f"/tmp/oma-{os.getuid()}")


def serve_in_background(path: Path, idle_s: float) -> subprocess.Popen[str]:
    code = (
        "import sys; from oma.cli.forkserver import serve; serve(sys.argv[1], float(sys.argv[2]))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(idle_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def test_a_server_leaves_when_idle_and_a_second_one_for_its_socket_at_once(
    forkserver: Forkserver,
) -> None:
    forkserver.home.mkdir(mode=0o700)
    path = forkserver.home / "test.sock"
    first = serve_in_background(path, idle_s=3.0)
    await until(path.exists, "the first server listens")
    second = serve_in_background(path, idle_s=3.0)
    out, _ = await asyncio.to_thread(second.communicate, None, 30)
    assert second.returncode == 0, out  # the lock is held: it left without serving
    assert first.poll() is None

    out, _ = await asyncio.to_thread(first.communicate, None, 30)  # idle for 3 s, then leaves
    assert first.returncode == 0, out
    assert not path.exists() and not path.with_suffix(".pid").exists()


def test_an_error_on_a_redirected_stderr_is_not_lost(forkserver: Forkserver) -> None:
    forkserver.warm()
    for env in (forkserver.env(), {**forkserver.env(), "OMA_FORKSERVER": "0"}):
        with open("/dev/full", "w") as full:
            helped = subprocess.run(
                [OMA, "--help"], env=env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=30
            )
        assert helped.returncode == 1
        assert "No space left on device" in helped.stderr, (env["OMA_FORKSERVER"], helped.stderr)


def test_a_reader_that_leaves_early_ends_the_command_without_a_traceback(
    forkserver: Forkserver,
) -> None:
    forkserver.warm()
    history = str(HISTORIES / "team_run_cancelled.json")
    for env in (forkserver.env(), {**forkserver.env(), "OMA_FORKSERVER": "0"}):
        # `oma show --json | head`: the reader is gone before the output is flushed
        shown = subprocess.Popen(
            [OMA, "show", "--history", history, "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert shown.stdout is not None
        shown.stdout.close()
        _, stderr = shown.communicate(timeout=30)
        assert (shown.returncode, stderr.splitlines()) == (
            1,
            [
                "note: no history of team_run_cancelled/hang (run "
                "01a23014-accc-7453-b843-ca1c9a3ac687): no activities shown"
            ],
        ), env["OMA_FORKSERVER"]


def test_shell_completion_set_up_sees_the_callers_shell(forkserver: Forkserver) -> None:
    forkserver.warm()
    shown = subprocess.run(
        # `; exit $?`: bash stays the command's parent (a lone command would
        # replace it, and the caller's shell would be whatever ran pytest)
        ["bash", "-c", f"{OMA} --show-completion; exit $?"],
        env=forkserver.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shown.returncode == 0, shown.stderr
    assert "complete" in shown.stdout and "_OMA_COMPLETE" in shown.stdout


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_command_outlives_its_server_with_its_own_status(
    dev_server: DevServer, forkserver: Forkserver, tmp_path: Path, worker: object, how: int
) -> None:
    server = forkserver.warm()
    go = tmp_path / "go"
    run_input = {
        "team": {"name": "outlive", "agents": [slow_process("builder", go)]},
        "tasks": [task("build", "builder")],
    }
    env = forkserver.env(cli_env(dev_server))
    proc = started("run", "--no-worker", input_file(tmp_path, run_input), env=env)
    await until(lambda: descendants(server), "the server forked the command")

    os.kill(server, how)
    if how == signal.SIGTERM:  # it stops taking commands at once, and stays for its child
        await until(lambda: not list(forkserver.home.glob("*.sock")), "the socket is gone")
        assert alive(server)
    go.touch()
    _, stderr = await finished(proc)

    assert proc.returncode == 0, stderr
    await until(lambda: not alive(server), "the server left after its last command", 10)


async def test_a_server_of_new_code_ends_the_one_of_the_old_code(
    forkserver: Forkserver,
) -> None:
    old = forkserver.warm()
    source = Path(_forkserver.__file__)
    st = source.stat()
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # an edit
        new = forkserver.warm()  # the old one serves old code: a new one starts
        assert new != old
        await until(lambda: not alive(old), "the old server left", 10)
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))


async def test_a_context_that_cannot_be_forked_safely_is_refused_once(
    forkserver: Forkserver, tmp_path: Path
) -> None:
    # an agent loaded at start-up that runs a thread (as APM agents do)
    (tmp_path / "sitecustomize.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
    )
    env = {**forkserver.env(), "PYTHONPATH": str(tmp_path)}
    for _ in range(2):
        helped = subprocess.run(
            [OMA, "approvals", "x"], env=env, capture_output=True, text=True, timeout=60
        )
        assert helped.returncode == 1  # (nothing listens: the command ran, in its own process)
        await until(lambda: list(forkserver.home.glob("*.refused")), "the server refused", 30)
    refusals = list(forkserver.home.glob("*.refused"))
    assert len(refusals) == 1, f"the two commands looked for different servers: {refusals}"
    (refused,) = refusals
    assert refused.read_text() == "not serving: the imports started 1 thread(s)\n"
    assert forkserver.pids() == []
    (log,) = forkserver.home.glob("*.log")
    assert log.read_text().count("not serving") == 1  # the second command started none


async def test_a_stopped_server_makes_a_command_run_in_its_own_process_once(
    forkserver: Forkserver, tmp_path: Path
) -> None:
    server = forkserver.warm()
    os.kill(server, signal.SIGSTOP)
    # (to files: the descriptors sent to the stopped server stay open in its
    # socket until it resumes, so a pipe would see its end only then)
    out = tmp_path / "out"
    try:
        with open(out, "w") as stdout:
            helped = subprocess.run(
                [OMA, "--help"], env=forkserver.env(), stdout=stdout, timeout=30
            )
    finally:
        os.kill(server, signal.SIGCONT)
    assert helped.returncode == 0
    assert out.read_text().count("Usage: oma") == 1
    # the server, resumed, takes the request but its child cannot begin it
    await until(lambda: not descendants(server), "the late child left", 10)
    again = subprocess.run(
        [OMA, "--help"], env=forkserver.env(), capture_output=True, text=True, timeout=30
    )
    assert again.returncode == 0 and again.stdout.count("Usage: oma") == 1


async def test_a_server_whose_socket_was_removed_leaves(forkserver: Forkserver) -> None:
    forkserver.home.mkdir(mode=0o700)
    path = forkserver.home / "test.sock"
    code = "import sys; from oma.cli.forkserver import serve; serve(sys.argv[1], 60, 0.2)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)])
    await until(path.exists, "it listens")
    path.unlink()
    await asyncio.to_thread(proc.wait, 10)
    assert proc.returncode == 0


async def test_a_directory_keeps_the_newest_servers_and_a_leaving_one_tidies_up(
    forkserver: Forkserver,
) -> None:
    # five contexts made for one command each (say, a namespace apiece)
    forkserver.home.mkdir(mode=0o700)
    paths = [forkserver.home / f"{i:012d}-000000000000.sock" for i in range(5)]
    paths[0].with_suffix(".log").touch()  # an empty log, as a server's start leaves one
    servers = []
    for path in paths:
        servers.append(serve_in_background(path, idle_s=60.0))
        await until(path.exists, f"{path.name} listens")
    out, _ = await asyncio.to_thread(servers[0].communicate, None, 30)
    assert servers[0].returncode == 0, out  # the oldest left, the newest four stay
    assert [s.poll() for s in servers[1:]] == [None] * 4
    assert not paths[0].with_suffix(".lock").exists()  # with its lock and empty log
    assert not paths[0].with_suffix(".log").exists()
    assert paths[1].with_suffix(".lock").exists()
