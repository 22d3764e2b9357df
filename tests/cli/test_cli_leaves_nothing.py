"""By default no `oma` command leaves a process behind: `oma --help`, a run
(`oma run --no-worker` against the session's dev server and worker) and
`oma show` each return, and nothing they started is still running.

Each command runs under a watcher (``WATCH``) that is the leader of a session
of its own and a child subreaper (Linux's ``PR_SET_CHILD_SUBREAPER``): a
process the command leaves, even one that made a session of its own (as the
opt-in forkserver does) and so escaped its process group and its parent, is
re-parented to the watcher, which reports it and then kills it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oma.runtime.dev_server import DevServer, free_port, is_listening
from tests.support.cli import OMA
from tests.support.runs import TASK_QUEUE, scripted, task

pytestmark = [
    pytest.mark.usefixtures("worker"),
    pytest.mark.skipif(sys.platform != "linux", reason="a child subreaper is Linux's"),
]

WATCH = r"""
import ctypes, json, os, signal, subprocess, sys, time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, ctypes.get_errno()
me = os.getpid()
assert os.getsid(0) == me, "the watcher leads a session of its own"
command, cwd, grace_s = json.loads(sys.argv[1])
proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)

def stat(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return fields[0], int(fields[1]), int(fields[3])  # state, parent, session

def left():
    # this watcher's live descendants (orphans are re-parented to it), and
    # anything else still in its session
    procs = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != me:
            try:
                procs[int(entry.name)] = stat(entry.name)
            except (OSError, IndexError, ValueError):
                pass
    ours = {me}
    grew = True
    while grew:
        grew = False
        for pid, (_, parent, _) in procs.items():
            if parent in ours and pid not in ours:
                ours.add(pid)
                grew = True
    ours |= {pid for pid, (_, _, session) in procs.items() if session == me}
    ours.discard(me)
    return sorted(pid for pid in ours if procs[pid][0] != "Z")

def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass

deadline = time.monotonic() + grace_s
while (pids := left()) and time.monotonic() < deadline:  # a moment to finish leaving
    reap()
    time.sleep(0.1)
found = []
for pid in pids:
    try:
        found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    except OSError:
        found.append(f"pid {pid}")
for pid in pids:  # the test leaves nothing behind either
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
time.sleep(0.2)
reap()
print(json.dumps({"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                  "left": found}))
"""
"""Runs ``argv[1]``'s command (JSON: argv, cwd, grace seconds) and prints
JSON: its exit code, stdout, stderr and the command lines of the processes it
left behind (those still alive ``grace`` seconds after it returned)."""

GRACE_S = 2.0


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A scratch ``XDG_RUNTIME_DIR`` (short: a Unix socket path has at most
    104 bytes), so that a forkserver, were one started, would be this test's."""
    path = Path(tempfile.mkdtemp(prefix="oma-rt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def watched(*args: str, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """``oma ARGS`` under the watcher: its exit code, output and what it left
    (off the event loop: the session's worker shares it)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", WATCH, json.dumps([[OMA, *args], str(cwd), GRACE_S])],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_oma_help_run_and_show_leave_no_process_behind_by_default(
    dev_server: DevServer, tmp_path: Path, runtime_dir: Path
) -> None:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": dev_server.address,
        "OMA_TASK_QUEUE": TASK_QUEUE,
        "XDG_RUNTIME_DIR": str(runtime_dir),
    }
    env.pop("OMA_FORKSERVER", None)
    run_input = {
        "team": {"name": "quiet", "agents": [scripted("writer", "a draft")]},
        "tasks": [task("draft", "writer")],
    }
    (tmp_path / "run.json").write_text(json.dumps(run_input))
    workflow_id = f"leaves-nothing-{uuid.uuid4().hex[:8]}"

    helped = await watched("--help", cwd=tmp_path, env=env)
    assert helped["code"] == 0, helped["stderr"]
    assert "run" in helped["stdout"]
    assert helped["left"] == [], "`oma --help` left processes behind"

    ran = await watched(
        "run", "--no-worker", "--workflow-id", workflow_id, "run.json", cwd=tmp_path, env=env
    )
    assert ran["code"] == 0, ran["stderr"]
    assert "a draft" in ran["stdout"]
    assert ran["left"] == [], "`oma run` left processes behind"

    shown = await watched("show", workflow_id, cwd=tmp_path, env=env)
    assert shown["code"] == 0, shown["stderr"]
    assert "draft" in shown["stdout"]
    assert shown["left"] == [], "`oma show` left processes behind"

    assert not list(runtime_dir.rglob("*.sock")), "a forkserver listens"


async def test_the_commands_that_read_runs_find_oma_runs_embedded_server_and_stop_it_after(
    tmp_path: Path, runtime_dir: Path
) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "OMA_TASK_QUEUE": "oma-embedded-reads",
        "XDG_RUNTIME_DIR": str(runtime_dir),
    }
    env.pop("OMA_FORKSERVER", None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    missing = await watched("show", "nope", cwd=elsewhere, env=env)
    assert missing["code"] == 1
    assert (
        f"TEMPORAL_UNAVAILABLE: nothing listens on {address}, and {elsewhere} holds no"
        in (missing["stderr"])
    )
    assert not (elsewhere / ".oma").exists(), "nothing to read: no server started"

    run_input = {
        "team": {"name": "embedded", "agents": [scripted("writer", "a draft")]},
        "tasks": [task("draft", "writer")],
    }
    (tmp_path / "run.json").write_text(json.dumps(run_input))
    workflow_id = f"embedded-reads-{uuid.uuid4().hex[:8]}"
    ran = await watched("run", "--workflow-id", workflow_id, "run.json", cwd=tmp_path, env=env)
    assert ran["code"] == 0, ran["stderr"]
    assert not is_listening(address) and ran["left"] == []

    said = f"starting the embedded Temporal dev server on port {address.rpartition(':')[2]}"
    shown = await watched("show", workflow_id, cwd=tmp_path, env=env)
    assert shown["code"] == 0, shown["stderr"]
    assert said in shown["stderr"]
    assert f"TeamRun {workflow_id}  team embedded  completed" in shown["stdout"]
    assert "a draft" in shown["stdout"]
    assert shown["left"] == [] and not is_listening(address), "`oma show` left its server"

    listed = await watched("list", cwd=tmp_path, env=env)
    assert listed["code"] == 0, listed["stderr"]
    assert workflow_id in listed["stdout"] and "completed" in listed["stdout"]
    assert listed["left"] == [] and not is_listening(address), "`oma list` left its server"

    waiting = await watched("approvals", cwd=tmp_path, env=env)
    assert waiting["code"] == 0, waiting["stderr"]
    assert "no open approval requests in namespace 'default'" in waiting["stdout"]
    assert waiting["left"] == [] and not is_listening(address)

    one = await watched("approvals", workflow_id, cwd=tmp_path, env=env)
    assert one["code"] == 1
    assert f"TeamRun {workflow_id} has already ended (COMPLETED)" in one["stderr"]
    assert f"see `oma show {workflow_id}`" in one["stderr"]
    assert one["left"] == [] and not is_listening(address)

    forked = await watched("fork", workflow_id, "--from", "draft", cwd=tmp_path, env=env)
    assert forked["code"] == 0, forked["stderr"]
    assert f"fork of {workflow_id}: keeps none; runs draft again" in forked["stderr"]
    assert "TeamRun: completed" in forked["stdout"]
    assert forked["left"] == [] and not is_listening(address), "`oma fork` left its server"
    assert not list(runtime_dir.rglob("*.sock")), "a forkserver listens"
