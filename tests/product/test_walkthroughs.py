"""The docs as a user follows them: `examples/python_api.py`, the approvals
walkthrough of docs/approvals.md and the ACP walkthrough of
docs/external-agents.md, run as written, as subprocesses."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from oma.runtime.dev_server import DevServer, free_port, free_ports, is_listening
from tests.support.cli import OMA, PYTHON_API, PYTHON_API_OUTPUT, demo_copy, run_cmd
from tests.support.paths import ROOT
from tests.support.procs import Processes
from tests.support.runs import TASK_QUEUE

pytestmark = pytest.mark.e2e


WALKTHROUGH = [
    "oma run examples/approval-team-scripted.json --workflow-id approval-1 &",
    "oma approvals approval-1",
    'oma approve approval-1 dispatch-publish --comment "ship it"',
    "wait",
]
"""The second shell of the walkthrough in docs/approvals.md (the first runs
`oma dev`: here the session's dev server and worker)."""


def test_the_readme_shows_the_python_api_example_and_points_to_it() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "examples/python_api.py" in readme
    example = PYTHON_API.read_text()
    snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
    for line in snippet.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert line.strip() in example, f"README line not in the example: {line!r}"


@pytest.mark.usefixtures("worker")
async def test_python_api_example_runs_against_a_running_server(
    dev_server: DevServer, tmp_path: Path
) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": TASK_QUEUE}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = await run_cmd(sys.executable, str(PYTHON_API), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == PYTHON_API_OUTPUT
    assert not (tmp_path / ".oma").exists(), "a server listened: nothing may be started"


def test_python_api_example_starts_the_embedded_server_when_none_runs(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "OMA_TASK_QUEUE": "oma-python-api"}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, str(PYTHON_API)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == PYTHON_API_OUTPUT
    assert (tmp_path / ".oma" / "temporal.db").is_file()
    assert not is_listening(address), "the embedded dev server outlived the script"


def test_the_walkthrough_in_the_docs_is_the_one_tested() -> None:
    docs = (ROOT / "docs" / "approvals.md").read_text()
    block = docs.split("## Walkthrough", 1)[1].split("```sh\n")[2].split("```", 1)[0]
    assert block.splitlines() == WALKTHROUGH
    assert "```sh\noma dev\n```" in docs


@pytest.mark.usefixtures("worker")
async def test_the_approvals_walkthrough_runs_as_written(
    dev_server: DevServer, tmp_path: Path
) -> None:
    project = demo_copy(tmp_path)
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": TASK_QUEUE}
    env.pop("ANTHROPIC_API_KEY", None)
    wid = f"approval-{uuid.uuid4().hex[:8]}"  # the session's server outlives one test
    start, list_requests, approve, _ = (
        shlex.split(c.removesuffix(" &").replace("approval-1", wid)) for c in WALKTHROUGH
    )

    # `oma run ... &`: a user waits for its "approval needed" line
    run = subprocess.Popen(
        [OMA, *start[1:]],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = await asyncio.to_thread(read_until, run, "approval needed")
        assert f"approval needed: oma approve {wid} dispatch-publish" in seen

        listed = await run_cmd(OMA, *list_requests[1:], cwd=project, env=env)
        assert listed.returncode == 0, listed.stderr
        assert f"open approval requests of TeamRun {wid}" in listed.stdout
        assert re.search(r"^\s+dispatch-publish\s+dispatch\s", listed.stdout, re.M)
        assert '"title": "Publish the release notes"' in listed.stdout

        approved = await run_cmd(OMA, *approve[1:], cwd=project, env=env)
        assert approved.returncode == 0, approved.stderr
        recorded = approved.stdout.splitlines()[-1]
        assert recorded.startswith(
            f"recorded: approve of dispatch-publish (dispatch) by {getpass.getuser()} at "
        )
        assert recorded.endswith(": ship it")

        # `wait`
        stdout, stderr = await asyncio.to_thread(run.communicate, None, 60)
    finally:
        run.kill()
    assert run.returncode == 0, seen + stderr
    # under its hint, what the docs show: the output `publish` will act on
    docs = (ROOT / "docs" / "approvals.md").read_text()
    shown = docs.split("`oma run` starts the run and prints its events;", 1)[1]
    hinted = shown.split("```\n", 2)[1].split("```", 1)[0].splitlines()[1:]
    assert hinted[0] == "approval needed: oma approve approval-1 dispatch-publish"
    assert (seen + stderr).replace(wid, "approval-1").count("\n".join(hinted) + "\n") == 1
    assert "dispatch-publish: approve by" in stderr
    assert "TeamRun: completed" in stdout
    assert stdout.rstrip().endswith("Published the 1.4.0 release notes to the changelog.")


def read_until(proc: subprocess.Popen[str], marker: str) -> str:
    """``proc``'s stderr up to and including the first line holding ``marker``
    (all of it if ``proc`` ends first)."""
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:
        seen += line
        if marker in line:
            break
    return seen


ACP_WALKTHROUGH = [
    "mkdir -p scratch",
    "oma run examples/acp-team-scripted.json --workflow-id acp-1",
    "temporal workflow result --workflow-id acp-1/code --output json",
]
"""The second shell of the ACP walkthrough in docs/external-agents.md (the
first runs `oma dev`)."""

ACP_CODE_OUTPUT = (
    "Writing slugify.py and its test, then running the test.\n\n"
    "Done: slugify.py and test_slugify.py; 7 checks passed."
)
"""The output of the walkthrough's `code` task, as the docs show it."""


def test_the_acp_walkthrough_in_the_docs_is_the_one_tested() -> None:
    docs = (ROOT / "docs" / "external-agents.md").read_text()
    section = docs.split("### Walkthrough: an ACP agent, no key needed", 1)[1]
    blocks = section.split("```sh\n")
    assert blocks[1].split("```", 1)[0] == "oma dev\n"
    assert blocks[2].split("```", 1)[0].splitlines() == ACP_WALKTHROUGH
    assert f"```\n{ACP_CODE_OUTPUT}\n```" in section
    run_input = json.loads((ROOT / "examples" / "acp-team-scripted.json").read_text())
    [coder] = [a for a in run_input["team"]["agents"] if "backend" in a]
    shown = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads("{" + shown + "}")["permission"] == coder["backend"]["permission"]
    assert "examples/acp-team-scripted.json" in (ROOT / "README.md").read_text()


async def test_the_acp_walkthrough_runs_as_written_without_a_key(
    processes: Processes, tmp_path: Path
) -> None:
    project = demo_copy(tmp_path)
    port, ui_port = free_ports(2)
    address = f"127.0.0.1:{port}"
    env = {
        **os.environ,
        # `source .venv/bin/activate`: the agent's `python3` is the venv's
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "TEMPORAL_ADDRESS": address,
        "OMA_TASK_QUEUE": f"oma-acp-walkthrough-{uuid.uuid4().hex[:6]}",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    wid = f"acp-{uuid.uuid4().hex[:8]}"
    mkdir, start, result = (shlex.split(c.replace("acp-1", wid)) for c in ACP_WALKTHROUGH)
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
        assert f"Web UI at http://127.0.0.1:{ui_port}" in banner, banner
        assert (await run_cmd(*mkdir, cwd=project, env=env)).returncode == 0

        ran = await run_cmd(OMA, *start[1:], cwd=project, env=env)
        assert ran.returncode == 0, ran.stderr
        assert "TeamRun: completed" in ran.stdout
        assert "LGTM: slugify.py:14 folds accents" in ran.stdout

        shown = await run_cmd(*result, cwd=project, env=env)
        assert shown.returncode == 0, shown.stderr
    finally:
        dev.send_signal(signal.SIGINT)
        await asyncio.to_thread(dev.wait, 30)
    assert not is_listening(address)

    code = json.loads(shown.stdout)["result"]
    assert (code["status"], code["output"], code["stop_reason"]) == (
        "completed",
        ACP_CODE_OUTPUT,
        "end_turn",
    )
    assert [(c["id"], c["name"], c["status"]) for c in code["tool_calls"]] == [
        ("write", "Write slugify.py, test_slugify.py", "completed"),
        ("test", "python3 test_slugify.py", "completed"),
    ]
    assert [(r["kind"], r["option_kinds"], r["approved"]) for r in code["permission_requests"]] == [
        ("edit", ["allow_once", "reject_once"], True),
        ("execute", ["allow_once", "reject_once"], True),
    ]
    assert code["acp_session"]["new_session"] is True
    assert code["token_usage"]["cost_usd"] == 0.0
    scratch = project / "scratch"
    assert sorted(p.name for p in scratch.iterdir()) == ["slugify.py", "test_slugify.py"]
